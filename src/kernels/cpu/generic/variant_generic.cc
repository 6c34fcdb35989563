#include "kernels/ref/ref.h"
#include "kernels/variants.h"

namespace ember::kernels {
// TODO(kernels helper): portable blocked implementation.
const KernelVariant kGenericVariant = {"generic", &ref::MatMulBF16, &ref::MatMulF32};
}  // namespace ember::kernels
