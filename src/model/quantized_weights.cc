#include "model/quantized_weights.h"

#include <fmt/format.h>

#include <cmath>
#include <deque>

#include "core/int_math.h"
#include "core/thread_pool.h"
#include "model/quantized_linear.h"

namespace ember {
namespace {

using quant::BlockScaledMatrix;
using quant::Fp8ScaleKind;
using quant::WeightFormat;

constexpr std::initializer_list<DType> kDenseDTypes = {DType::kBF16, DType::kF32};


float ScalarF32(const TensorView& t, int64_t i) {
  return t.dtype == DType::kBF16 ? BF16ToF32(t.As<uint16_t>()[i]) : t.As<float>()[i];
}

// A module the scheme says is quantized must not hide a bf16 tensor under the codes' name.
Status NotQuantizedError(const QuantScheme& scheme, const std::string& module, const std::string& missing,
                         const std::string& present) {
  return InvalidArgument(fmt::format(
      "{} quantizes module '{}' (it matches no exclusion), but tensor '{}' is missing{}; a module kept in "
      "bf16 must be listed in the checkpoint's exclusions", scheme.Describe(), module, missing,
      present.empty() ? "" : fmt::format(" while '{}' is present", present)));
}

Status CheckGlobal(float g, const std::string& name, int64_t index) {
  if (!(std::isfinite(g) && g > 0)) {
    return InvalidArgument(fmt::format("tensor '{}' element {} is {}; a global scale must be finite and positive",
                                       name, index, g));
  }
  return Status::Ok();
}

// Expert `full` as its row ranges: NVFP4 gate/up halves each with its own global scale
// (globals[h]), one matrix otherwise.
Expected<std::vector<BlockScaledMatrix>> SplitByGlobalScale(BlockScaledMatrix full, int64_t halves,
                                                            const float* globals) {
  if (full.format != WeightFormat::kNvfp4) return std::vector<BlockScaledMatrix>{full};
  std::vector<BlockScaledMatrix> parts;
  const int64_t part_rows = full.rows / halves;
  for (int64_t h = 0; h < halves; ++h) {
    EMBER_ASSIGN_OR_RETURN(BlockScaledMatrix m, quant::SliceRows(full, h * part_rows, part_rows));
    m.global_scale = globals[h];
    parts.push_back(m);
  }
  return parts;
}

// ModelOpt NVFP4, Quark MXFP4 and FP8 weight_scale_inv: codes and scales as stacked tensors.
Expected<ExpertWeights> ReadStacked(WeightSource& w, const QuantScheme& scheme, const ExpertTensor& t,
                                    PackForGemm pack) {
  const std::string name = t.Name();
  const WeightFormat format = scheme.format;
  const bool fp8 = format == WeightFormat::kFp8E4m3;
  const std::string scale_name = name + (fp8 ? "_weight_scale_inv" : "_weight_scale");
  if (!w.Has(scale_name)) return NotQuantizedError(scheme, t.module, scale_name, w.Has(name) ? name : "");
  const int64_t code_cols = fp8 ? t.cols : quant::CodesRowBytes(format, t.cols);
  if (!fp8 && t.cols % quant::KBlockSize(format) != 0) {
    return InvalidArgument(fmt::format("tensor '{}': {} input features are not a multiple of the {} block of {}", name,
                                       t.cols, quant::WeightFormatName(format), quant::KBlockSize(format)));
  }
  EMBER_ASSIGN_OR_RETURN(TensorView codes, w.Require(name, {fp8 ? DType::kF8E4M3 : DType::kU8},
                                                     Shape{t.experts, t.rows, code_cols}));
  TensorView scales;
  if (fp8) {
    EMBER_ASSIGN_OR_RETURN(scales, w.Require(scale_name, {DType::kF32},
                                             Shape{t.experts, CeilDiv(t.rows, 128), CeilDiv(t.cols, 128)}));
  } else {
    const Shape shape{t.experts, t.rows, quant::ScalesRowBytes(format, t.cols)};
    if (format == WeightFormat::kNvfp4) {
      EMBER_ASSIGN_OR_RETURN(scales, w.Require(scale_name, {DType::kF8E4M3}, shape));
    } else {  // e8m0 bytes, stored as U8 by Quark or as F8_E8M0
      EMBER_ASSIGN_OR_RETURN(scales, w.Require(scale_name, {DType::kU8, DType::kE8M0}, shape));
    }
  }
  std::vector<float> globals(t.experts * t.halves, 1.0f);
  if (format == WeightFormat::kNvfp4) {
    const std::string g_name = name + "_weight_scale_2";
    const Shape g_shape = t.halves == 1 ? Shape{t.experts} : Shape{t.experts, t.halves};
    EMBER_ASSIGN_OR_RETURN(TensorView g, w.Require(g_name, {DType::kF32}, g_shape));
    for (int64_t i = 0; i < g.NumElements(); ++i) {
      globals[i] = g.As<float>()[i];
      EMBER_RETURN_IF_ERROR(CheckGlobal(globals[i], g_name, i));
    }
    // Activation scales are for W4A4 kernels; ember keeps activations in f32.
    if (w.Has(name + "_input_scale")) (void)w.Require(name + "_input_scale", {DType::kF32}, g_shape);
  }
  const int64_t scale_row_bytes = fp8 ? 4 * CeilDiv(t.cols, 128) : quant::ScalesRowBytes(format, t.cols);
  const int64_t scale_rows = fp8 ? CeilDiv(t.rows, 128) : t.rows;
  std::vector<std::vector<BlockScaledMatrix>> parts(t.experts);
  for (int64_t e = 0; e < t.experts; ++e) {
    BlockScaledMatrix m;
    m.format = format;
    m.rows = t.rows;
    m.cols = t.cols;
    m.codes_row_stride = code_cols;
    m.codes = static_cast<const uint8_t*>(codes.data) + e * t.rows * code_cols;
    m.scales_row_stride = scale_row_bytes;
    m.scales = static_cast<const uint8_t*>(scales.data) + e * scale_rows * scale_row_bytes;
    m.fp8_scale_kind = Fp8ScaleKind::kBlock128;
    EMBER_RETURN_IF_ERROR(quant::ValidateBlockScaledMatrix(m));
    EMBER_ASSIGN_OR_RETURN(parts[e], SplitByGlobalScale(m, t.halves, globals.data() + e * t.halves));
  }
  return ExpertWeights::BlockScaled(t.rows, t.cols, std::move(parts), nullptr, pack);
}

// compressed-tensors: one linear per expert and projection (ReadCompressedTensorsMatrix).
Expected<ExpertWeights> ReadCompressedTensors(WeightSource& w, const QuantScheme& scheme, const ExpertTensor& t,
                                              PackForGemm pack) {
  static const char* const kGateUp[] = {"gate_proj", "up_proj"};
  static const char* const kDown[] = {"down_proj"};
  const char* const* projs = t.halves == 2 ? kGateUp : kDown;
  const int64_t part_rows = t.rows / t.halves;
  // f32 copies of scales that are not stored as f32 (bf16 FP8 scales): tiny next to the weights.
  auto owned = std::make_shared<std::deque<std::vector<float>>>();
  std::vector<std::vector<BlockScaledMatrix>> parts(t.experts);
  for (int64_t e = 0; e < t.experts; ++e) {
    for (int64_t h = 0; h < t.halves; ++h) {
      const std::string base = fmt::format("{}.{}.{}", t.module, e, projs[h]);
      const bool fp8 = scheme.format == WeightFormat::kFp8E4m3;
      const std::string codes_name = base + (fp8 ? ".weight" : ".weight_packed");
      const std::string scale_name = base + ".weight_scale";
      if (!w.Has(codes_name) || !w.Has(scale_name)) {
        return NotQuantizedError(scheme, t.module, w.Has(codes_name) ? scale_name : codes_name,
                                 w.Has(t.Name()) ? t.Name() : "");
      }
      EMBER_ASSIGN_OR_RETURN(BlockScaledMatrix m, ReadCompressedTensorsMatrix(w, scheme, base, part_rows, t.cols,
                                                                              *owned));
      parts[e].push_back(m);
    }
  }
  return ExpertWeights::BlockScaled(t.rows, t.cols, std::move(parts), std::move(owned), pack);
}

}  // namespace

Expected<ExpertWeights> ReadExpertWeights(WeightSource& source, const QuantScheme& scheme, const ExpertTensor& t,
                                          PackForGemm pack) {
  if (!scheme.quantized() || scheme.Excludes(t.module) || scheme.Excludes(t.Name())) {
    EMBER_ASSIGN_OR_RETURN(TensorView dense, source.Require(t.Name(), kDenseDTypes, Shape{t.experts, t.rows, t.cols}));
    return ExpertWeights::Dense(dense);
  }
  if (scheme.producer == QuantProducer::kCompressedTensors) return ReadCompressedTensors(source, scheme, t, pack);
  return ReadStacked(source, scheme, t, pack);
}

ExpertWeights QuantizedStack::View(std::shared_ptr<const QuantizedStack> self, PackForGemm pack) const {
  EMBER_CHECK(self.get() == this, "View needs the shared pointer to this stack");
  const bool fp8 = format == WeightFormat::kFp8E4m3;
  const int64_t code_row = fp8 ? cols : quant::CodesRowBytes(format, cols);
  const int64_t scale_row = fp8 ? 4 * CeilDiv(cols, 128) : quant::ScalesRowBytes(format, cols);
  const int64_t scale_rows = fp8 ? CeilDiv(rows, 128) : rows;
  std::vector<std::vector<BlockScaledMatrix>> parts(experts);
  for (int64_t e = 0; e < experts; ++e) {
    BlockScaledMatrix m;
    m.format = format;
    m.rows = rows;
    m.cols = cols;
    m.codes = codes.data() + e * rows * code_row;
    m.codes_row_stride = code_row;
    m.scales = scales.data() + e * scale_rows * scale_row;
    m.scales_row_stride = scale_row;
    m.fp8_scale_kind = Fp8ScaleKind::kBlock128;
    auto split = SplitByGlobalScale(m, halves, format == WeightFormat::kNvfp4 ? globals.data() + e * halves : nullptr);
    EMBER_CHECK(split.ok(), "{}", split.status().message());
    parts[e] = std::move(*split);
  }
  return ExpertWeights::BlockScaled(rows, cols, std::move(parts), std::move(self), pack);
}

Expected<std::shared_ptr<const QuantizedStack>> QuantizeStack(const TensorView& stacked, WeightFormat format,
                                                              int64_t halves, quant::Mxfp4ScaleRounding mxfp4_rounding) {
  if (stacked.shape.rank() != 3 || (stacked.dtype != DType::kBF16 && stacked.dtype != DType::kF32)) {
    return InvalidArgument(fmt::format("QuantizeStack needs a bf16/f32 [E, rows, cols] tensor, got {} {}",
                                       DTypeName(stacked.dtype), stacked.shape.ToString()));
  }
  auto q = std::make_shared<QuantizedStack>();
  q->format = format;
  q->experts = stacked.shape[0];
  q->rows = stacked.shape[1];
  q->cols = stacked.shape[2];
  q->halves = format == WeightFormat::kNvfp4 ? halves : 1;
  const bool fp8 = format == WeightFormat::kFp8E4m3;
  if (q->rows % q->halves != 0 || (!fp8 && q->cols % quant::KBlockSize(format) != 0) || (fp8 && q->cols % 16 != 0)) {
    return InvalidArgument(fmt::format("cannot quantize a {} tensor to {}: the input dimension must be a multiple of "
                                       "{}", stacked.shape.ToString(), quant::WeightFormatName(format),
                                       fp8 ? 16 : quant::KBlockSize(format)));
  }
  const int64_t rows = q->rows, cols = q->cols;
  const int64_t code_bytes = fp8 ? rows * cols : rows * quant::CodesRowBytes(format, cols);
  const int64_t scale_bytes = fp8 ? 4 * quant::Fp8ScaleCount(Fp8ScaleKind::kBlock128, rows, cols)
                                  : rows * quant::ScalesRowBytes(format, cols);
  q->codes.resize(q->experts * code_bytes);
  q->scales.resize(q->experts * scale_bytes);
  q->globals.assign(format == WeightFormat::kNvfp4 ? q->experts * q->halves : 0, 1.0f);
  std::vector<Status> errors(q->experts);
  ThreadPool::Global().ParallelFor(q->experts, [&](int64_t begin, int64_t end) {
    std::vector<float> x(rows * cols);
    for (int64_t e = begin; e < end; ++e) {
      const TensorView src = stacked.Slice0(e);
      for (int64_t i = 0; i < rows * cols; ++i) x[i] = ScalarF32(src, i);
      uint8_t* codes = q->codes.data() + e * code_bytes;
      uint8_t* scales = q->scales.data() + e * scale_bytes;
      if (format == WeightFormat::kMxfp4) {
        errors[e] = quant::QuantizeMxfp4(x.data(), rows, cols, codes, scales, mxfp4_rounding);
      } else if (format == WeightFormat::kNvfp4) {
        const int64_t part = rows / q->halves;
        for (int64_t h = 0; h < q->halves && errors[e].ok(); ++h) {
          const float* xh = x.data() + h * part * cols;
          const float g = quant::Nvfp4GlobalScale(quant::AbsMax(xh, part * cols));
          q->globals[e * q->halves + h] = g;
          errors[e] = quant::QuantizeNvfp4(xh, part, cols, g, codes + h * part * cols / 2,
                                           scales + h * part * (cols / quant::kNvfp4BlockSize));
        }
      } else {
        float unused = 1.0f;
        errors[e] = quant::QuantizeFp8(x.data(), rows, cols, Fp8ScaleKind::kBlock128, codes,
                                       reinterpret_cast<float*>(scales), &unused);
      }
    }
  }, 1);
  for (const Status& s : errors) EMBER_RETURN_IF_ERROR(s);
  return std::shared_ptr<const QuantizedStack>(std::move(q));
}

Expected<WeightFormat> ParseWeightFormat(std::string_view name) {
  for (WeightFormat f : {WeightFormat::kNvfp4, WeightFormat::kMxfp4, WeightFormat::kFp8E4m3}) {
    if (name == quant::WeightFormatName(f)) return f;
  }
  return InvalidArgument(fmt::format("unknown quantization '{}'; choose nvfp4, mxfp4 or fp8", name));
}

Expected<QuantizationChoice> ParseQuantization(std::string_view name) {
  for (auto rounding : {quant::Mxfp4ScaleRounding::kFloor, quant::Mxfp4ScaleRounding::kEven}) {
    if (name == fmt::format("mxfp4-{}", quant::Mxfp4ScaleRoundingName(rounding))) {
      return QuantizationChoice{WeightFormat::kMxfp4, rounding};
    }
  }
  constexpr std::string_view kChoices =
      "nvfp4, mxfp4 (Quark's default scale rounding), mxfp4-floor (OCP MX v1.0 scales) or fp8";
  // Empty is not a way to say "no quantization": that is leaving the option out.
  if (name.empty()) {
    return InvalidArgument(
        fmt::format("--quantization is empty; choose {} (to keep the checkpoint's stored formats, leave the flag out)",
                    kChoices));
  }
  auto format = ParseWeightFormat(name);
  if (!format.ok()) return InvalidArgument(fmt::format("unknown quantization '{}'; choose {}", name, kChoices));
  return QuantizationChoice{*format};
}

}  // namespace ember
