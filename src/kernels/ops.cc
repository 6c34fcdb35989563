#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace ember::kernels {
namespace cpu {
// cpu/avx512/swiglu_avx512.cc: Silu(g) * up with glibc's expf replicated in vector lanes.
void SwiGluLibmExpAvx512(const float* gate, const float* up, int64_t count, float* out);
int64_t ExpfLibmAvx512(const float* x, int64_t count, float* out);
}  // namespace cpu

namespace {

// Sum of squares in f64-free f32 with 8 partial sums: vectorisable and stable enough for rows of
// up to 1e5 elements (relative error ~1e-7).
float MeanSquare(const float* x, int64_t n) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) partial[l] += x[i + l] * x[i + l];
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += x[i] * x[i];
  for (int l = 0; l < 8; ++l) sum += partial[l];
  return sum / static_cast<float>(n);
}

inline float Silu(float v) { return v / (1.0f + std::exp(-v)); }

// Elementwise gated activations over the pool: [0, count) in spans of kGatedSpan elements (each
// element's bits do not depend on the split: the ops are elementwise and the SIMD variants' tails
// are masked lanes of the same sequence). A prefill's activation is count = tokens x
// intermediate, ~0.8 M elements for 512 SmolLM2 tokens, which one thread took ~6% of the step on.
// So SwiGlu and GeGluTanh must not be called from inside a ParallelFor body of that pool (none
// is: the MLP blocks and the dspark drafter call them between their matmuls).
constexpr int64_t kGatedSpan = 4096;

void ForEachSpan(int64_t count, FunctionRef<void(int64_t, int64_t)> fn) {
  const int64_t spans = (count + kGatedSpan - 1) / kGatedSpan;
  if (spans <= 1) {
    if (count > 0) fn(0, count);
    return;
  }
  ThreadPool::Global().ParallelFor(spans, [&](int64_t begin, int64_t end) {
    fn(begin * kGatedSpan, std::min(count, end * kGatedSpan));
  });
}

// silu(gate) * up for [begin, end): libm's expf per element as Silu calls it, then the division
// and product (IEEE-exact, so Silu's bits) in a loop the compiler vectorizes: the quotient goes
// through a local buffer, which aliases neither input (out may be gate).
void SwiGluSpanScalar(const float* gate, const float* up, int64_t begin, int64_t end, float* out) {
  constexpr int64_t kStep = 256;
  float t[kStep];
  for (int64_t i0 = begin; i0 < end; i0 += kStep) {
    const int64_t len = std::min(kStep, end - i0);
    const float* g = gate + i0;
    const float* u = up + i0;
    for (int64_t i = 0; i < len; ++i) t[i] = std::exp(-g[i]);
    for (int64_t i = 0; i < len; ++i) t[i] = g[i] / (1.0f + t[i]) * u[i];
    std::copy(t, t + len, out + i0);
  }
}

// Whether the avx512 replica of libm's expf gives this process's expf bits: checked once on
// every binade of its range (both signs, a few mantissas each) and on pseudo-random inputs. A
// libm with another algorithm fails and SwiGlu keeps the scalar calls (the same results, slower).
bool LibmExpReplicaMatches() {
  static const bool matches = [] {
    if (!HostCpuFeatures().HasAvx512Set()) return false;
    std::vector<float> x;
    for (uint32_t e = 0x3fu; e <= 0x85u; ++e) {  // 2^-64 <= |x| < 128 (88 and up: libm's special path)
      for (uint32_t m : {0u, 1u, 0x2aaaaau, 0x400000u, 0x555555u, 0x7fffffu}) {
        for (uint32_t sign : {0u, 0x80000000u}) {
          const uint32_t bits = sign | (e << 23) | m;
          float v;
          std::memcpy(&v, &bits, sizeof(v));
          x.push_back(v);
        }
      }
    }
    uint32_t state = 12345;
    for (int i = 0; i < 8192; ++i) {
      state = state * 1664525u + 1013904223u;
      x.push_back((static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 170.0f);
    }
    std::vector<float> got(x.size(), 0.0f);
    if (cpu::ExpfLibmAvx512(x.data(), static_cast<int64_t>(x.size()), got.data()) < 0) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = std::exp(x[i]);
      if (std::fabs(x[i]) < 88.0f && std::memcmp(&want, &got[i], sizeof(want)) != 0) return false;
    }
    return true;
  }();
  return matches;
}

void SwiGluSpan(const float* gate, const float* up, int64_t begin, int64_t end, float* out) {
  if (ActiveIsa() >= Isa::kAvx512 && LibmExpReplicaMatches()) {
    cpu::SwiGluLibmExpAvx512(gate + begin, up + begin, end - begin, out + begin);
  } else {
    SwiGluSpanScalar(gate, up, begin, end, out);
  }
}

}  // namespace

void RmsNorm(const float* x, int64_t rows, int64_t n, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    const float scale = 1.0f / std::sqrt(MeanSquare(xr, n) + eps);
    for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * scale;
  }
}

void RmsNormGain(const float* x, int64_t rows, int64_t n, float eps, const float* gain, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    const float scale = 1.0f / std::sqrt(MeanSquare(xr, n) + eps);
    for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * scale * gain[i];
  }
}

void GainRmsNorm(const float* x, int64_t rows, int64_t n, float eps, const float* gain, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * gain[i];
    const float scale = 1.0f / std::sqrt(MeanSquare(o, n) + eps);
    for (int64_t i = 0; i < n; ++i) o[i] *= scale;
  }
}

void RopeInverseFrequencies(double theta, int64_t head_dim, float* inv_freq) {
  // transformers: 1 / base ** (arange(0, d, 2, float32) / d), all in f32.
  for (int64_t j = 0; j < head_dim / 2; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
    inv_freq[j] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
}

namespace {

// Rotates pairs (j * stride, j * stride + offset), j < head_dim / 2, of every head by the angle
// position * inv_freq[j]. The angle is formed in f32 as transformers does, then cos/sin.
void RotatePairs(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
                 const float* inv_freq, int64_t stride, int64_t offset) {
  const int64_t half = head_dim / 2;
  EMBER_CHECK(half <= 512, "head_dim {} too large for RoPE tables", head_dim);
  float cos_table[512];
  float sin_table[512];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < half; ++j) {
      const float angle = static_cast<float>(positions[r]) * inv_freq[j];
      cos_table[j] = std::cos(angle);
      sin_table[j] = std::sin(angle);
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (r * heads + h) * head_dim;
      for (int64_t j = 0; j < half; ++j) {
        const float a = v[j * stride];
        const float b = v[j * stride + offset];
        v[j * stride] = a * cos_table[j] - b * sin_table[j];
        v[j * stride + offset] = b * cos_table[j] + a * sin_table[j];
      }
    }
  }
}

}  // namespace

void RopeRotateHalf(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
                    const float* inv_freq) {
  RotatePairs(x, rows, heads, head_dim, positions, inv_freq, /*stride=*/1, /*offset=*/head_dim / 2);
}

void RopeInterleaved(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
                     const float* inv_freq) {
  RotatePairs(x, rows, heads, head_dim, positions, inv_freq, /*stride=*/2, /*offset=*/1);
}

void SwiGluHalves(const float* x, int64_t rows, int64_t n, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x + r * 2 * n;
    const float* up = gate + n;
    float* o = out + r * n;
    for (int64_t i = 0; i < n; ++i) o[i] = Silu(gate[i]) * up[i];
  }
}

void SwiGlu(const float* gate, const float* up, int64_t rows, int64_t n, float* out) {
  ForEachSpan(rows * n, [&](int64_t begin, int64_t end) { SwiGluSpan(gate, up, begin, end, out); });
}

void GeGluTanh(const float* gate, const float* up, int64_t rows, int64_t n, float* out) {
  const GeGluTanhFn geglu = ActiveVariant().geglu_tanh;  // one variant for the whole call
  ForEachSpan(rows * n, [&](int64_t begin, int64_t end) { geglu(gate + begin, up + begin, end - begin, out + begin); });
}

void AddInPlace(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

void MulInPlace(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] *= y[i];
}

void ScaleInPlace(float* x, int64_t count, float scale) {
  for (int64_t i = 0; i < count; ++i) x[i] *= scale;
}

void SigmoidInPlace(float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

void ScaleSoftcapInPlace(float* x, int64_t count, float scale, float cap) {
  if (cap > 0.0f) {
    for (int64_t i = 0; i < count; ++i) x[i] = cap * std::tanh(x[i] * scale / cap);
  } else {
    for (int64_t i = 0; i < count; ++i) x[i] *= scale;
  }
}

void ResidualGate(float* s, const float* branch, int64_t rows, int64_t n, const float* alpha, const float* beta) {
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * n;
    const float* br = branch + r * n;
    for (int64_t i = 0; i < n; ++i) sr[i] = alpha[i] * sr[i] + beta[i] * br[i];
  }
}

void FoldResidualGate(const float* gate, int64_t n, float temperature, float eps, float* alpha, float* beta) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = gate[i] / temperature;
    const float b = 1.0f / (1.0f + std::exp(-u));
    const float s_neg = 1.0f / (1.0f + std::exp(u));
    beta[i] = b;
    alpha[i] = std::sqrt(std::max(s_neg * (1.0f + b), eps));
  }
}

void GatherRows(const float* x, int64_t n, const int64_t* rows, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) std::copy_n(x + rows[i] * n, n, out + i * n);
}

void ScatterAddWeightedRows(const float* x, int64_t n, const int64_t* rows, const float* weights, int64_t count,
                            float* out) {
  for (int64_t i = 0; i < count; ++i) {
    float* dst = out + rows[i] * n;
    const float* src = x + i * n;
    const float w = weights[i];
    for (int64_t j = 0; j < n; ++j) dst[j] += w * src[j];
  }
}

}  // namespace ember::kernels
