#include "kernels/ref/ref.h"
#include "kernels/variants.h"

namespace ember::kernels {
const KernelVariant kRefVariant = {&ref::MatMulBF16, &ref::MatMulF32, &ref::PagedAttentionHead,
                                   &ref::GeGluTanh};
}  // namespace ember::kernels
