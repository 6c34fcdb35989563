// Row-wise and element-wise ops of the transformer layers, in f32.
//
// These are a small fraction of a step's time next to the matmuls, so there is one portable
// implementation written for the compiler to vectorise; it doubles as the reference. The
// exception is GeGluTanh (libm's tanhf was ~10% of a Gemma 3 prefill): it runs the active
// kernel variant's geglu_tanh (kernels/cpu/gelu_tanh.h). All ops
// work on `rows` rows of width `n` with row stride `n` unless stated otherwise.
#pragma once

#include <cstdint>

namespace ember::kernels {

// out = x * rsqrt(mean(x^2) + eps) (weightless RMSNorm). In-place allowed.
void RmsNorm(const float* x, int64_t rows, int64_t n, float eps, float* out);
// out = RmsNorm(x) * gain   (gain [n]; pass 1+gamma for zero-centred gains). In-place allowed.
void RmsNormGain(const float* x, int64_t rows, int64_t n, float eps, const float* gain, float* out);
// out = RmsNorm(x * gain)  (the "input-scaled" post-norm: gain before the normalisation).
void GainRmsNorm(const float* x, int64_t rows, int64_t n, float eps, const float* gain, float* out);

// Rotary embedding in the rotate-half layout (pairs (j, j + head_dim/2)), in place, for `rows`
// tokens with `heads` heads of head_dim each (row stride heads*head_dim); token r has position
// positions[r]. inv_freq has head_dim/2 entries.
void RopeRotateHalf(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
                    const float* inv_freq);
// The same rotation on adjacent pairs (2j, 2j + 1): the layout GGUF llama-family checkpoints
// use after the converter permutes Q/K rows (llama.cpp's "normal" RoPE).
void RopeInterleaved(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
                     const float* inv_freq);
// inv_freq[j] = theta^(-2j/head_dim), computed as transformers does (f32).
void RopeInverseFrequencies(double theta, int64_t head_dim, float* inv_freq);

// out[r, j] = silu(x[r, j]) * x[r, n + j] for a [rows, 2n] input holding gate then up halves.
void SwiGluHalves(const float* x, int64_t rows, int64_t n, float* out);
// out[r, j] = silu(gate[r, j]) * up[r, j]   (separate [rows, n] inputs).
void SwiGlu(const float* gate, const float* up, int64_t rows, int64_t n, float* out);

// out[r, j] = gelu_tanh(gate[r, j]) * up[r, j], with the tanh approximation of GELU
// (PyTorch's gelu(approximate="tanh"), Gemma's gelu_pytorch_tanh).
void GeGluTanh(const float* gate, const float* up, int64_t rows, int64_t n, float* out);

// x += y, in place (the residual add).
void AddInPlace(float* x, const float* y, int64_t count);
// x *= y elementwise, in place (an output gate).
void MulInPlace(float* x, const float* y, int64_t count);
// x *= scale, in place.
void ScaleInPlace(float* x, int64_t count, float scale);
// x = 1 / (1 + exp(-x)), in place.
void SigmoidInPlace(float* x, int64_t count);
// x = cap * tanh(x * scale / cap) (cap > 0), or x * scale (cap == 0), in place.
void ScaleSoftcapInPlace(float* x, int64_t count, float scale, float cap);

// s = alpha * s + beta * branch per channel (alpha, beta [n]): Muse Spark's norm-preserving
// residual gate.
void ResidualGate(float* s, const float* branch, int64_t rows, int64_t n, const float* alpha, const float* beta);

// The per-channel constants of ResidualGate from its learned gate g [n] (load time, f32 as the
// reference): u = g / temperature, beta = sigmoid(u), alpha = sqrt(max(sigmoid(-u) * (1 + beta),
// eps)).
void FoldResidualGate(const float* gate, int64_t n, float temperature, float eps, float* alpha, float* beta);

// out row i = x row rows[i], for i < count (rows of width n). out must not overlap x.
void GatherRows(const float* x, int64_t n, const int64_t* rows, int64_t count, float* out);
// out row rows[i] += weights[i] * x row i, for i = 0, 1, ..., count - 1 in that order, so a row
// that several inputs add to sums them in input order (rows of width n).
void ScatterAddWeightedRows(const float* x, int64_t n, const int64_t* rows, const float* weights, int64_t count,
                            float* out);

}  // namespace ember::kernels
