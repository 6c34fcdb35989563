// Row-wise helpers the multimodal encoders (model/audio, model/vision) share: linears (as stored
// or converted at load) plus a bias, norms and the exact GELU as ThreadPool loops over rows, and
// the loaders of their tensors. Activations are f32.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "model/linear.h"
#include "quant/block_scaled.h"

namespace ember {

class WeightSource;

// How a tower holds its linears: as stored (bf16 or f32, the default), or converted at load to
// `quantization` the way the text model converts its dense linears (`ember serve --quantization
// F --quantize-dense`): the whole matrix, with QuantizeLinear's reference quantizers.
struct EncoderWeightOptions {
  std::optional<quant::WeightFormat> quantization;
  quant::Mxfp4ScaleRounding mxfp4_rounding = quant::Mxfp4ScaleRounding::kEven;
  // Called after each linear with (done, total) while converting, e.g. to draw a progress bar.
  std::function<void(int64_t done, int64_t total)> progress;
};

// What a tower's load did with its linears.
struct EncoderWeightReport {
  std::optional<quant::WeightFormat> format;  // EncoderWeightOptions::quantization
  int64_t linears = 0;
  int64_t converted = 0;
  // Under a quantization, the linears left as stored because their input dimension is not a
  // multiple of the format's block (e.g. a 2*3*14*14 = 1176-wide patch embedding): "name [out, in]".
  std::vector<std::string> kept;

  // "28 linears as stored (bf16/f32)" or "nvfp4: 27 of 28 linears converted, kept as stored: ...".
  std::string Describe() const;
};

namespace encoder_ops {

// Rows per ParallelFor chunk for a row op of width n: ~16k floats of work each.
int64_t RowChunk(int64_t n);

// y [rows, out] = x [rows, in] w^T (+ bias [out] when not null), through w.Apply (a stored
// bf16/f32 matrix goes through kernels::MatMul as before any conversion existed).
void ApplyLinear(const float* x, int64_t rows, const Linear& w, const float* bias, float* y);

// RMSNorm x * (mean(x^2) + eps)^-1/2 (* gain, when not null), rows threaded. In place allowed.
void RmsNorm(const float* x, int64_t rows, int64_t n, double eps, const float* gain, float* out);

// nn.LayerNorm: (x - mean) / sqrt(var + eps) * gain + bias (biased variance; the row's statistics
// accumulated in f64), rows threaded. In place allowed.
void LayerNorm(const float* x, int64_t rows, int64_t n, double eps, const float* gain, const float* bias,
               float* out);

// nn.functional.gelu (approximate="none"): 0.5 x (1 + erf(x / sqrt 2)), in place.
void GeluErf(float* x, int64_t count);

// The tensor `name` of exactly `shape` (f32, bf16 or f16), as f32 values.
Expected<std::vector<float>> RequireF32(WeightSource& source, const std::string& name, const Shape& shape);
// Binds a tower's linears one by one as EncoderWeightOptions says, counting what it did.
class LinearLoader {
 public:
  // `total`: the tower's number of linears, for the progress callback.
  LinearLoader(WeightSource& source, const EncoderWeightOptions& options, int64_t total);
  // The weight `name` [out, in] (bf16 or f32): converted to the options' format when its input
  // dimension allows, else a view of the stored matrix.
  Expected<Linear> Load(const std::string& name, int64_t out, int64_t in);
  const EncoderWeightReport& report() const { return report_; }

 private:
  WeightSource& source_;
  const EncoderWeightOptions& options_;
  int64_t total_;
  EncoderWeightReport report_;
};

// The input-dimension multiple `format`'s conversion needs: the scale block (NVFP4 16, MXFP4 32),
// 16 for FP8 (the kernels' vector width; its 128x128 scale blocks may be partial).
int64_t QuantizableInMultiple(quant::WeightFormat format);

// A config.json (NotFound if it cannot be opened, InvalidArgument if it is not JSON).
Expected<nlohmann::json> ReadJsonFile(const std::string& path);
// The safetensors of a Hugging Face model directory, mapped, as a WeightSource.
Expected<std::unique_ptr<WeightSource>> OpenDirectoryWeights(const std::string& dir);

}  // namespace encoder_ops
}  // namespace ember
