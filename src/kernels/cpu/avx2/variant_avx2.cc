#include "kernels/variants.h"

namespace ember::kernels {
const KernelVariant kAvx2Variant = {"avx2", nullptr, nullptr};
}  // namespace ember::kernels
