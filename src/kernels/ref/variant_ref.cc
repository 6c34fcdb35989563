#include "kernels/ref/ref.h"
#include "kernels/variants.h"

namespace ember::kernels {
const KernelVariant kRefVariant = {&ref::MatMulBF16, &ref::MatMulF32, &ref::PagedAttentionTile,
                                   &ref::GeGluTanh, &ref::SoftmaxExp, &ref::RowAttention};
}  // namespace ember::kernels
