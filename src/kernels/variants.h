// The kernel variants compiled into ember. A variant whose ISA the compiler could not target
// has null function pointers and is never offered.
#pragma once

#include "kernels/matmul.h"

namespace ember::kernels {

extern const KernelVariant kRefVariant;      // ref/: scalar oracle
extern const KernelVariant kGenericVariant;  // cpu/generic/: portable C++ the compiler vectorises
extern const KernelVariant kAvx2Variant;     // cpu/avx2/
extern const KernelVariant kAvx512Variant;   // cpu/avx512/

}  // namespace ember::kernels
