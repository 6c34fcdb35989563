#include "model/encoder_ops.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/dtypes.h"
#include "core/thread_pool.h"
#include "formats/checkpoint.h"
#include "kernels/ops.h"
#include "model/tensor_parallel.h"
#include "model/weight_source.h"

namespace ember {

std::string EncoderWeightReport::Describe() const {
  if (!format) return fmt::format("{} linears as stored (bf16/f32)", linears);
  std::string text =
      fmt::format("{}: {} of {} linears converted", quant::WeightFormatName(*format), converted, linears);
  if (!kept.empty()) {
    text += fmt::format(", kept as stored (input dimension not a multiple of {}): {}",
                        encoder_ops::QuantizableInMultiple(*format), fmt::join(kept, ", "));
  }
  return text;
}

namespace encoder_ops {
namespace {

ThreadPool& Pool() { return ThreadPool::Global(); }

}  // namespace

int64_t RowChunk(int64_t n) { return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(n, 1)); }

void ApplyLinear(const float* x, int64_t rows, const Linear& w, const float* bias, float* y) {
  w.Apply(x, rows, y);
  if (bias == nullptr) return;
  const int64_t n = w.out_features();
  Pool().ParallelFor(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* yr = y + r * n;
      for (int64_t j = 0; j < n; ++j) yr[j] += bias[j];
    }
  }, RowChunk(n));
}

void RmsNorm(const float* x, int64_t rows, int64_t n, double eps, const float* gain, float* out) {
  Pool().ParallelFor(rows, [&](int64_t begin, int64_t end) {
    if (gain != nullptr) {
      kernels::RmsNormGain(x + begin * n, end - begin, n, static_cast<float>(eps), gain, out + begin * n);
    } else {
      kernels::RmsNorm(x + begin * n, end - begin, n, static_cast<float>(eps), out + begin * n);
    }
  }, RowChunk(n));
}

void LayerNorm(const float* x, int64_t rows, int64_t n, double eps, const float* gain, const float* bias,
               float* out) {
  Pool().ParallelFor(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * n;
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) sum += xr[j];
      const double mean = sum / static_cast<double>(n);
      double squares = 0.0;
      for (int64_t j = 0; j < n; ++j) squares += (xr[j] - mean) * (xr[j] - mean);
      const float m = static_cast<float>(mean);
      const float rstd = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(n) + eps));
      float* o = out + r * n;
      for (int64_t j = 0; j < n; ++j) o[j] = (xr[j] - m) * rstd * gain[j] + bias[j];
    }
  }, RowChunk(n));
}

void GeluErf(float* x, int64_t count) {
  Pool().ParallelFor(count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
  }, int64_t{1} << 14);
}

Expected<std::vector<float>> RequireF32(WeightSource& source, const std::string& name, const Shape& shape) {
  EMBER_ASSIGN_OR_RETURN(TensorView t, source.Require(name, {DType::kBF16, DType::kF32, DType::kF16}, shape));
  std::vector<float> out(static_cast<size_t>(t.NumElements()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::kF32: out[i] = t.As<float>()[i]; break;
      case DType::kBF16: out[i] = BF16ToF32(t.As<uint16_t>()[i]); break;
      default: out[i] = F16ToF32(t.As<uint16_t>()[i]); break;
    }
  }
  return out;
}

int64_t QuantizableInMultiple(quant::WeightFormat format) {
  return format == quant::WeightFormat::kFp8E4m3 ? 16 : quant::KBlockSize(format);
}

LinearLoader::LinearLoader(WeightSource& source, const EncoderWeightOptions& options, int64_t total)
    : source_(source), options_(options), total_(total) {
  report_.format = options.quantization;
}

Expected<Linear> LinearLoader::Load(const std::string& name, int64_t out, int64_t in) {
  EMBER_ASSIGN_OR_RETURN(TensorView stored, source_.Require(name, {DType::kBF16, DType::kF32}, Shape{out, in}));
  ++report_.linears;
  if (!options_.quantization) return Linear::Dense(stored);
  Linear linear;
  if (in % QuantizableInMultiple(*options_.quantization) == 0) {
    EMBER_ASSIGN_OR_RETURN(linear, QuantizeLinear(stored, *options_.quantization, options_.mxfp4_rounding,
                                                  MatrixSplit::Whole()));
    // The converted matrix owns its codes: the stored bytes are never read again.
    source_.Release(stored);
    ++report_.converted;
  } else {
    linear = Linear::Dense(stored);
    report_.kept.push_back(fmt::format("{} [{}, {}]", name, out, in));
  }
  if (options_.progress) options_.progress(report_.linears, total_);
  return linear;
}

Expected<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open {}", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return InvalidArgument(fmt::format("{}: not valid JSON", path));
  return json;
}

Expected<std::unique_ptr<WeightSource>> OpenDirectoryWeights(const std::string& dir) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> opened, Checkpoint::OpenDirectory(dir));
  std::shared_ptr<const Checkpoint> checkpoint = std::move(opened);
  return MakeCheckpointWeightSource(checkpoint, fmt::format("checkpoint {}", dir));
}

}  // namespace encoder_ops
}  // namespace ember
