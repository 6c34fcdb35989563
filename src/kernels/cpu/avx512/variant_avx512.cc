#include "kernels/variants.h"

namespace ember::kernels {
const KernelVariant kAvx512Variant = {"avx512", nullptr, nullptr};
}  // namespace ember::kernels
