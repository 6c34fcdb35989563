// GgufFile: one memory-mapped GGUF file (versions 2 and 3), validated in full when opened.
//
// Layout (ggml docs/gguf.md), all integers little-endian:
//   "GGUF" magic, uint32 version, uint64 tensor_count, uint64 kv_count,
//   kv_count x { string key, uint32 value_type, value },
//   tensor_count x { string name, uint32 n_dims, uint64 dims[n_dims], uint32 ggml_type,
//                    uint64 offset },
//   zero padding up to `general.alignment` (default 32), then the data section.
// A string is a uint64 byte length followed by that many bytes (no terminator); an array is a
// uint32 element type, a uint64 element count and the elements. Tensor offsets are relative to the
// start of the data section and must be multiples of the alignment.
//
// Dimension order. GGUF (like ggml) lists dims innermost first: dims[0] is the number of elements
// in one contiguous row, dims[1] the number of rows, and so on. This is the reverse of PyTorch and
// safetensors: a PyTorch Linear weight of shape [out_features, in_features] appears here as
// dims {in_features, out_features}, e.g. SmolLM2's token embedding [49152, 576] is {576, 49152}.
// Quantized types pack each row into whole blocks, so dims[0] is a multiple of the block size.
//
// Like SafetensorsFile, nothing is trusted: after Open() succeeds every tensor's bytes lie inside
// the mapping, no two tensors overlap, and every metadata value has been bounds-checked. No input
// makes Open() crash, and allocations driven by counts in the file are capped by the file's size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "formats/ggml_type.h"
#include "formats/mapped_file.h"

namespace ember {

// Metadata value types; the numeric codes are part of the file format.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint8", "float32", "string", "array", ... ("unknown" for codes outside the enum).
std::string_view GgufValueTypeName(GgufValueType type);
// Bytes of one value of a fixed-size type (1 for uint8/int8/bool ... 8 for the 64-bit types);
// 0 for strings and arrays, whose size depends on their contents.
uint64_t GgufValueTypeBytes(GgufValueType type);

// One metadata value. Strings and scalar arrays point into the file's mapping, so a GgufValue (and
// every string_view it returns) is valid only while its GgufFile lives.
class GgufValue {
 public:
  GgufValueType type() const { return type_; }
  bool is_array() const { return type_ == GgufValueType::kArray; }

  // ---- scalars: nullopt when the value is not of a matching kind ----
  // Any of the eight integer types (bool is not an integer); nullopt for a uint64 above INT64_MAX.
  std::optional<int64_t> AsInt() const;
  // Any integer type holding a non-negative value.
  std::optional<uint64_t> AsUint() const;
  // float32 or float64, or any integer type (converted; large 64-bit values round).
  std::optional<double> AsFloat() const;
  std::optional<bool> AsBool() const;
  std::optional<std::string_view> AsString() const;

  // ---- arrays ----
  // Element type and count of an array (kArray / 0 for non-arrays, whose size() is 0).
  GgufValueType element_type() const { return element_type_; }
  int64_t size() const { return count_; }
  // Element `i` (0 <= i < size()) as a standalone value. For arrays of arrays this copies the
  // inner array; nested() refers to it without copying.
  GgufValue At(int64_t i) const;
  // The elements of an array of strings (empty span for any other value).
  std::span<const std::string_view> strings() const { return strings_; }
  // The elements of an array of arrays (empty span for any other value).
  std::span<const GgufValue> nested() const { return nested_; }
  // All elements converted, with the same rules as the scalar accessors; nullopt when this is not
  // an array or an element does not convert. Float64 elements round to float.
  std::optional<std::vector<int64_t>> AsIntArray() const;
  std::optional<std::vector<float>> AsFloatArray() const;
  std::optional<std::span<const std::string_view>> AsStringArray() const;

 private:
  friend class GgufParser;

  GgufValueType type_ = GgufValueType::kUint8;
  // Scalars: integers widen into `int_` (signed types) or `uint_` (unsigned types and bool), floats
  // into `float_`.
  int64_t int_ = 0;
  uint64_t uint_ = 0;
  double float_ = 0;
  std::string_view string_;
  // Arrays. Scalar elements stay packed in the mapping at `raw_` and are decoded on access (a
  // vocabulary's 262144 scores need no copy); strings and nested arrays have variable lengths, so
  // they are located once, when the file is opened.
  GgufValueType element_type_ = GgufValueType::kArray;
  int64_t count_ = 0;
  const uint8_t* raw_ = nullptr;
  std::vector<std::string_view> strings_;
  std::vector<GgufValue> nested_;
};

// One tensor of a GgufFile. `data` points into the file's mapping (valid while the GgufFile
// lives); it is nullptr for tensors with zero elements.
struct GgufTensor {
  std::string name;
  GgmlTypeTraits type{};
  // ggml order, innermost first: dims[0] is the contiguous row length (see the top of this file).
  // 0 to 4 entries; a tensor with no dims holds one element.
  std::vector<int64_t> dims;
  const uint8_t* data = nullptr;
  int64_t bytes = 0;
  // Offset from the start of the data section, as stored in the file.
  int64_t offset = 0;

  int64_t NumElements() const;
};

class GgufFile {
 public:
  // ggml's GGML_MAX_DIMS: tensor infos with more dims are refused.
  static constexpr uint32_t kMaxDims = 4;
  // Arrays of arrays nest at most this deep; deeper nesting is refused rather than recursed into.
  static constexpr int kMaxArrayDepth = 8;

  // Maps `path` read-only and validates it. Errors (each message names the file and the key or
  // tensor at fault):
  //   NotFound         the file does not exist
  //   IoError          open/stat/mmap failed for another reason
  //   InvalidArgument  not a GGUF file at all (wrong magic)
  //   DataLoss         truncated, or the header is malformed or contradicts itself
  //   Unimplemented    well-formed, but a version, byte order or tensor type ember cannot read
  static Expected<std::unique_ptr<GgufFile>> Open(const std::string& path);

  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  int64_t file_size() const { return mapping_.size(); }
  // `general.alignment`, or 32 when the file does not set it.
  int64_t alignment() const { return alignment_; }
  // Byte offset of the data section from the start of the file (a multiple of alignment()).
  int64_t data_offset() const { return data_offset_; }
  const uint8_t* mapped_bytes() const { return mapping_.data(); }
  // MappedFile::DropResidentPages over the whole file.
  void DropResidentPages() const { MappedFile::DropResidentPages(mapping_.data(), mapping_.size()); }

  // ---- metadata ----
  // Keys in file order.
  const std::vector<std::string_view>& Keys() const { return keys_; }
  // nullptr when the key is absent.
  const GgufValue* Find(std::string_view key) const;
  // Typed lookups: nullopt when the key is absent or its value does not convert (see GgufValue).
  std::optional<int64_t> GetInt(std::string_view key) const;
  std::optional<double> GetFloat(std::string_view key) const;
  std::optional<bool> GetBool(std::string_view key) const;
  std::optional<std::string_view> GetString(std::string_view key) const;
  std::optional<std::span<const std::string_view>> GetStringArray(std::string_view key) const;
  std::optional<std::vector<float>> GetFloatArray(std::string_view key) const;
  std::optional<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // ---- tensors ----
  // In file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // nullptr when the file has no tensor of that name.
  const GgufTensor* FindTensor(std::string_view name) const;

 private:
  friend class GgufParser;
  GgufFile() = default;

  std::string path_;
  MappedFile mapping_;
  uint32_t version_ = 0;
  int64_t alignment_ = 32;
  int64_t data_offset_ = 0;
  // Keys are views of the key bytes inside the mapping, which never move.
  std::vector<std::string_view> keys_;
  std::vector<GgufValue> values_;
  std::unordered_map<std::string_view, size_t> key_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // views of mapping bytes too
};

}  // namespace ember
