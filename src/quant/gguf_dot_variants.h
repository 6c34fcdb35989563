// The dot-product variants compiled into ember (internal to src/quant).
#pragma once

#include <cstdint>

#include "quant/gguf_dot.h"

namespace ember::quant {

extern const DotVariant kDotRef;     // gguf_dot_ref.cc: scalar oracle, also the generic level's
extern const DotVariant kDotAvx2;    // gguf_dot_avx2.cc
extern const DotVariant kDotAvx512;  // gguf_dot_avx512.cc

// The plain-float dot products, shared by every variant: F32/F16/BF16 weights are not what
// GGUF matmul weights normally are, and kernels/matmul.h has the fast bf16/f32 paths.
namespace ref {
float DotF32(int64_t n, const void* w, const void* x);
float DotF16(int64_t n, const void* w, const void* x);
float DotBF16(int64_t n, const void* w, const void* x);
}  // namespace ref

}  // namespace ember::quant
