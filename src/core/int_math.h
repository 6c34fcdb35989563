// Integer rounding helpers for sizes and counts (blocks of a row, padded lengths).
#pragma once

#include <cstdint>

namespace ember {

// a / b rounded up; a >= 0, b > 0.
constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
// a rounded up to a multiple of b; a >= 0, b > 0.
constexpr int64_t RoundUpTo(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

}  // namespace ember
