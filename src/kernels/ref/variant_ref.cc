#include "kernels/ref/ref.h"
#include "kernels/variants.h"

namespace ember::kernels {
const KernelVariant kRefVariant = {"ref", &ref::MatMulBF16, &ref::MatMulF32, &ref::PagedAttentionHead};
}  // namespace ember::kernels
