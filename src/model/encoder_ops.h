// Row-wise helpers the multimodal encoders (model/audio, model/vision) share: linears through
// kernels::MatMul plus a bias, norms and the exact GELU as ThreadPool loops over rows, and the
// loaders of their tensors. All f32.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ember {

class WeightSource;

namespace encoder_ops {

// Rows per ParallelFor chunk for a row op of width n: ~16k floats of work each.
int64_t RowChunk(int64_t n);

// y [rows, out] = x [rows, in] w^T (+ bias [out] when not null); w is [out, in], bf16 or f32.
void Linear(const float* x, int64_t rows, const TensorView& w, const float* bias, float* y);

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
// The linear weight `name` [out, in], left as stored (bf16 or f32) for Linear.
Expected<TensorView> RequireMatrix(WeightSource& source, const std::string& name, int64_t out, int64_t in);

// A config.json (NotFound if it cannot be opened, InvalidArgument if it is not JSON).
Expected<nlohmann::json> ReadJsonFile(const std::string& path);
// The safetensors of a Hugging Face model directory, mapped, as a WeightSource.
Expected<std::unique_ptr<WeightSource>> OpenDirectoryWeights(const std::string& dir);

}  // namespace encoder_ops
}  // namespace ember
