#include <cmath>
#include <cstdint>

#include "kernels/ref/ref.h"

namespace ember::kernels::ref {

void GeGluTanh(const float* gate, const float* up, int64_t count, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    const float gelu = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
    out[i] = gelu * up[i];
  }
}

}  // namespace ember::kernels::ref
