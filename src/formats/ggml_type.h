// GGML tensor types as GGUF files number them, and their table: one row per type with its name
// and block geometry, the file-format half of a type (the GGUF reader needs nothing else).
//
// Every quantized GGUF type packs `block_elements` consecutive elements of a row into a block of
// `block_bytes` bytes; rows are whole blocks. The numeric codes are part of the GGUF file format.
// What ember's kernels do with a type (dequantize, multiply through which activation format,
// repack) is the kernel half, quant/gguf_type_kernels.h, keyed by the same codes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ember {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};
// One past the largest code in GgmlType: the size of tables indexed by code.
inline constexpr uint32_t kGgmlTypeCodeLimit = 31;

// A table of rows with a `type` field indexed by type code at compile time, so a lookup is one
// load rather than a scan; shared by this table and the kernel table keyed by the same codes
// (quant/gguf_type_kernels.h).
template <typename Row>
class GgmlCodeIndex {
 public:
  template <size_t N>
  constexpr explicit GgmlCodeIndex(const Row (&rows)[N]) : rows_(rows) {
    index_.fill(-1);
    for (size_t i = 0; i < N; ++i) index_[static_cast<uint32_t>(rows[i].type)] = static_cast<int8_t>(i);
  }
  // The row of `type`, or null.
  constexpr const Row* Find(GgmlType type) const {
    const auto code = static_cast<uint32_t>(type);
    return code < kGgmlTypeCodeLimit && index_[code] >= 0 ? &rows_[index_[code]] : nullptr;
  }

 private:
  const Row* rows_;
  std::array<int8_t, kGgmlTypeCodeLimit> index_{};
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;   // "q4_K", as llama.cpp prints it
  int64_t block_elements;  // elements per block (1 for plain types)
  int64_t block_bytes;     // bytes per block
};

// The row of `type`, or null if ember does not know it.
const GgmlTypeTraits* FindGgmlType(GgmlType type);
// Every row, in code order (tests walk it).
std::span<const GgmlTypeTraits> GgmlTypeTable();

// Traits for a type code read from a file, or nullopt if ember does not know the code (the
// IQ*/TQ* families and removed types).
std::optional<GgmlTypeTraits> GgmlTypeInfo(uint32_t code);

// Bytes of a row of `elements` elements; nullopt if `elements` is not a whole number of blocks.
std::optional<int64_t> GgmlRowBytes(const GgmlTypeTraits& traits, int64_t elements);

}  // namespace ember
