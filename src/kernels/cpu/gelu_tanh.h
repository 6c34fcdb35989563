// GELU-tanh gating (out = gelu_tanh(gate) * up) for the SIMD variants.
//
// PyTorch's 0.5 * g * (1 + tanh(u)), u = sqrt(2/pi) * (g + 0.044715 g^3), equals g * sigmoid(2u)
// = g / (1 + exp(-2u)) exactly, so the vector code needs one exp and one division per element
// instead of libm's tanhf (which calls expm1f: together ~10% of a Gemma 3 prefill). exp is the
// usual range reduction: n = round(x / ln 2), r = x - n ln 2 with ln 2 split in two parts, a
// degree-6 polynomial for e^r on |r| <= ln2 / 2 (about 1 ulp) and 2^n put into the exponent
// bits; x is clamped to [-87.3, 88.3] so 2^n stays a normal float (below, the sigmoid is 1 to
// f32 precision anyway; above, exp returns +inf so the result is -0 as with libm's formula). The sigmoid form also avoids the cancellation of 1 + tanh(u)
// for negative g that libm's formula suffers. Accuracy, measured by
// tests/unit/kernels/gelu_tanh_test.cc against a double-precision GELU: within 2e-7 * |gelu| *
// (1 + |2u|) (the |2u| term is exp's condition number on the f32 rounding of u), i.e. a few ulp
// where gelu is not tiny; libm's form is off by up to ~1e-7 absolute for g near -5.
//
// Each element's result depends only on its own inputs (tails use masked or zero-padded vectors
// through the same instructions), so the op is batch invariant like everything else here.
#pragma once

#include <cstdint>

namespace ember::kernels::cpu {

void GeGluTanhAvx2(const float* gate, const float* up, int64_t count, float* out);
void GeGluTanhAvx512(const float* gate, const float* up, int64_t count, float* out);

// The exp polynomial's constants, shared so the two ISAs compute the same function.
inline constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCubic = 0.044715f;
inline constexpr float kExpMin = -87.3f;
inline constexpr float kExpMax = 88.3f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;     // exactly representable, few mantissa bits
inline constexpr float kLn2Lo = -2.12194440e-4f;  // ln 2 - kLn2Hi
// e^r ~ 1 + r + r^2 * (c0 + c1 r + ... + c5 r^5)  (Cephes expf coefficients)
inline constexpr float kExpC[6] = {5.0000001201e-1f, 1.6666665459e-1f, 4.1665795894e-2f,
                                   8.3334519073e-3f, 1.3981999507e-3f, 1.9875691500e-4f};

}  // namespace ember::kernels::cpu
