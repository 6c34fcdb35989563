#include "formats/gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace ember {

// Every read below is a memcpy of little-endian bytes; a big-endian host would need byte swaps.
static_assert(std::endian::native == std::endian::little, "GgufFile assumes a little-endian host");

namespace {

constexpr std::string_view kRedownload = "re-download or re-convert the model";
constexpr uint32_t kMaxValueType = static_cast<uint32_t>(GgufValueType::kFloat64);
// Smallest encodings: a key/value is a string length, a type and a 1-byte value; a tensor info is
// a name length, n_dims, a type and an offset. Counts larger than the file can hold are refused
// before anything is reserved for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
// Arrays of arrays are allocated element by element; real files have none, so a small total
// budget keeps a crafted file from turning a few MB into GBs of GgufValue objects.
constexpr int64_t kMaxNestedElements = 1 << 20;

template <typename T>
T Load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// ggml type codes that exist (or existed) but that GgmlTypeInfo does not cover, for messages.
std::string_view UnsupportedGgmlTypeName(uint32_t code) {
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {4, "q4_2, removed in 2023"}, {5, "q4_3, removed in 2023"}, {16, "iq2_xxs"}, {17, "iq2_xs"},
      {18, "iq3_xxs"}, {19, "iq1_s"}, {20, "iq4_nl"}, {21, "iq3_s"}, {22, "iq2_s"}, {23, "iq4_xs"},
      {29, "iq1_m"}, {31, "q4_0_4_4, removed"}, {32, "q4_0_4_8, removed"}, {33, "q4_0_8_8, removed"},
      {34, "tq1_0"}, {35, "tq2_0"}, {36, "iq4_nl_4_4, removed"}, {37, "iq4_nl_4_8, removed"},
      {38, "iq4_nl_8_8, removed"}, {39, "mxfp4"}, {40, "nvfp4"}, {41, "q1_0"}};
  for (const auto& [c, name] : kNames) {
    if (c == code) return name;
  }
  return "";
}

// `(value->*As)()`, or nullopt for a missing value: the body of every GgufFile::Get*.
template <auto As>
auto Lookup(const GgufValue* value) -> decltype((value->*As)()) {
  if (value == nullptr) return std::nullopt;
  return (value->*As)();
}

// A hint for the commonest things people mistake for a GGUF file.
std::string_view NotGgufHint(const uint8_t* p, int64_t size) {
  const std::string_view head(reinterpret_cast<const char*>(p), static_cast<size_t>(size));
  if (head.starts_with("PK\x03\x04")) return " (it is a zip archive: extract the .gguf from it)";
  if (head.starts_with("version https://git-lfs")) {
    return " (it is a Git LFS pointer: fetch the real file with `git lfs pull`)";
  }
  if (head.starts_with("<") || head.starts_with("\xef\xbb\xbf<")) {
    return " (it looks like HTML, probably an error page saved by a failed download)";
  }
  if (size >= 9 && p[8] == '{') return " (it looks like safetensors: use the safetensors loader)";
  return "";
}

}  // namespace

int64_t GgufTensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // cannot overflow: checked when the file was opened
  return n;
}

// ---- parsing ------------------------------------------------------------------------------------

// Reads the header sequentially with a cursor that never moves past the end of the mapping; every
// failure becomes a Status naming the file and the key or tensor being read.
class GgufParser {
 public:
  explicit GgufParser(GgufFile* file)
      : f_(*file), base_(file->mapping_.data()), size_(static_cast<uint64_t>(file->mapping_.size())) {
  }

  Status Parse();

 private:
  std::string Where() const { return fmt::format("GGUF file '{}'", f_.path_); }
  std::string Where(std::string_view what) const {
    return fmt::format("GGUF file '{}', {}", f_.path_, what);
  }
  uint64_t Remaining() const { return size_ - pos_; }

  Status Truncated(std::string_view what, std::string_view field, uint64_t need) const {
    return DataLoss(fmt::format(
        "{}: reading the {} needs {} bytes at offset {}, but the file ends at byte {}; the file is "
        "truncated (or corrupt), {}",
        Where(what), field, need, pos_, size_, kRedownload));
  }

  template <typename T>
  Status Read(T* out, std::string_view what, std::string_view field) {
    if (Remaining() < sizeof(T)) return Truncated(what, field, sizeof(T));
    *out = Load<T>(base_ + pos_);
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string_view* out, std::string_view what, std::string_view field) {
    uint64_t length = 0;
    EMBER_RETURN_IF_ERROR(Read(&length, what, field));
    if (length > Remaining()) {
      return DataLoss(fmt::format(
          "{}: the {} has length {} at offset {}, which runs past the end of the file ({} bytes, "
          "{} left); the file is truncated or corrupt, {}",
          Where(what), field, length, pos_ - 8, size_, Remaining(), kRedownload));
    }
    *out = std::string_view(reinterpret_cast<const char*>(base_ + pos_), length);
    pos_ += length;
    return Status::Ok();
  }

  Status ReadValueType(GgufValueType* out, std::string_view what, std::string_view field) {
    uint32_t code = 0;
    EMBER_RETURN_IF_ERROR(Read(&code, what, field));
    if (code > kMaxValueType) {
      return DataLoss(fmt::format(
          "{}: unknown {} {} at offset {} (GGUF defines 0..{}); the file is corrupt or written by "
          "a newer GGUF revision, {}",
          Where(what), field, code, pos_ - 4, kMaxValueType, kRedownload));
    }
    *out = static_cast<GgufValueType>(code);
    return Status::Ok();
  }

  Status ParseHeader(uint64_t* tensor_count, uint64_t* kv_count);
  Status ParseValue(GgufValueType type, int depth, std::string_view what, GgufValue* out);
  Status ParseAlignment();
  Status ParseTensorInfo(size_t index);
  Status CheckTensorData();

  GgufFile& f_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  int64_t nested_elements_ = 0;
};

Status GgufParser::ParseHeader(uint64_t* tensor_count, uint64_t* kv_count) {
  const std::string_view head(reinterpret_cast<const char*>(base_), std::min<uint64_t>(size_, 4));
  if (head != "GGUF") {
    if (std::string_view("GGUF").starts_with(head)) {
      return DataLoss(fmt::format("{}: file is only {} bytes; the file is truncated, {}", Where(),
                                  size_, kRedownload));
    }
    std::string hex;
    for (size_t i = 0; i < head.size(); ++i) hex += fmt::format("{}{:02x}", i ? " " : "", base_[i]);
    return InvalidArgument(fmt::format(
        "{}: not a GGUF file: it starts with bytes [{}], expected the magic \"GGUF\"{}", Where(),
        hex, NotGgufHint(base_, static_cast<int64_t>(size_))));
  }
  pos_ = 4;
  EMBER_RETURN_IF_ERROR(Read(&f_.version_, "header", "version"));
  const uint32_t v = f_.version_;
  if (v != 2 && v != 3) {
    if (v == 1) {
      return Unimplemented(fmt::format(
          "{}: GGUF version 1 (the 2023 pre-release layout with 32-bit counts) is not supported; "
          "re-convert the model with a current llama.cpp",
          Where()));
    }
    if (v != 0 && (v & 0xffff) == 0) {
      return Unimplemented(fmt::format(
          "{}: version field reads {:#010x}, which looks like a big-endian GGUF file; ember reads "
          "little-endian files only",
          Where(), v));
    }
    return Unimplemented(
        fmt::format("{}: unsupported GGUF version {}; ember reads versions 2 and 3", Where(), v));
  }
  EMBER_RETURN_IF_ERROR(Read(tensor_count, "header", "tensor count"));
  EMBER_RETURN_IF_ERROR(Read(kv_count, "header", "metadata key/value count"));
  if (*kv_count > Remaining() / kMinKvBytes) {
    return DataLoss(fmt::format(
        "{}: header says {} metadata key/value pairs, but the remaining {} bytes can hold at most "
        "{}; the file is truncated or corrupt, {}",
        Where(), *kv_count, Remaining(), Remaining() / kMinKvBytes, kRedownload));
  }
  if (*tensor_count > Remaining() / kMinTensorInfoBytes) {
    return DataLoss(fmt::format(
        "{}: header says {} tensors, but the remaining {} bytes can hold at most {} tensor infos; "
        "the file is truncated or corrupt, {}",
        Where(), *tensor_count, Remaining(), Remaining() / kMinTensorInfoBytes, kRedownload));
  }
  return Status::Ok();
}

Status GgufParser::ParseValue(GgufValueType type, int depth, std::string_view what,
                              GgufValue* out) {
  out->type_ = type;
  if (type == GgufValueType::kString) return ReadString(&out->string_, what, "string value");
  if (type != GgufValueType::kArray) {
    const uint64_t bytes = GgufValueTypeBytes(type);
    if (Remaining() < bytes) return Truncated(what, GgufValueTypeName(type), bytes);
    const uint8_t* p = base_ + pos_;
    if (type == GgufValueType::kBool && *p > 1) {
      return DataLoss(fmt::format("{}: bool value at offset {} is {}, expected 0 or 1; {}",
                                  Where(what), pos_, *p, kRedownload));
    }
    // Decode through the array path's element decoder: one place knows every type's layout.
    GgufValue one;
    one.type_ = GgufValueType::kArray;
    one.element_type_ = type;
    one.count_ = 1;
    one.raw_ = p;
    *out = one.At(0);
    pos_ += bytes;
    return Status::Ok();
  }

  // An array: element type, element count, elements.
  if (depth >= GgufFile::kMaxArrayDepth) {
    return Unimplemented(fmt::format("{}: arrays nested more than {} deep are not supported",
                                     Where(what), GgufFile::kMaxArrayDepth));
  }
  GgufValueType element = GgufValueType::kUint8;
  EMBER_RETURN_IF_ERROR(ReadValueType(&element, what, "array element type"));
  uint64_t count = 0;
  EMBER_RETURN_IF_ERROR(Read(&count, what, "array length"));
  const uint64_t scalar = GgufValueTypeBytes(element);
  const uint64_t min_bytes = scalar != 0 ? scalar : (element == GgufValueType::kString ? 8 : 12);
  if (count > Remaining() / min_bytes) {
    return DataLoss(fmt::format(
        "{}: array of {} {} elements at offset {} needs at least {} bytes per element, but only "
        "{} bytes are left in the file; the file is truncated or corrupt, {}",
        Where(what), count, GgufValueTypeName(element), pos_ - 12, min_bytes, Remaining(),
        kRedownload));
  }
  out->element_type_ = element;
  out->count_ = static_cast<int64_t>(count);
  if (scalar != 0) {
    out->raw_ = base_ + pos_;
    if (element == GgufValueType::kBool) {
      for (uint64_t i = 0; i < count; ++i) {
        if (out->raw_[i] > 1) {
          return DataLoss(fmt::format("{}: bool element {} at offset {} is {}, expected 0 or 1; {}",
                                      Where(what), i, pos_ + i, out->raw_[i], kRedownload));
        }
      }
    }
    pos_ += count * scalar;
  } else if (element == GgufValueType::kString) {
    out->strings_.resize(count);  // at most a 16/8 multiple of the file size (checked above)
    for (uint64_t i = 0; i < count; ++i) {
      EMBER_RETURN_IF_ERROR(ReadString(&out->strings_[i], what, "array element string"));
    }
  } else {
    nested_elements_ += static_cast<int64_t>(count);
    if (nested_elements_ > kMaxNestedElements) {
      return Unimplemented(fmt::format(
          "{}: arrays of arrays hold more than {} elements in total; ember does not support that",
          Where(what), kMaxNestedElements));
    }
    out->nested_.resize(count);
    // Each element is a whole array value: its own element type, count and elements.
    for (uint64_t i = 0; i < count; ++i) {
      EMBER_RETURN_IF_ERROR(ParseValue(GgufValueType::kArray, depth + 1, what, &out->nested_[i]));
    }
  }
  return Status::Ok();
}

Status GgufParser::ParseAlignment() {
  auto it = f_.key_index_.find("general.alignment");
  if (it == f_.key_index_.end()) return Status::Ok();
  const GgufValue& value = f_.values_[it->second];
  if (value.type() != GgufValueType::kUint32) {
    return DataLoss(fmt::format("{}: has type {}, the GGUF spec requires uint32; {}",
                                Where("key 'general.alignment'"), GgufValueTypeName(value.type()),
                                kRedownload));
  }
  const uint64_t alignment = *value.AsUint();
  if (!std::has_single_bit(alignment)) {
    return DataLoss(fmt::format("{}: is {}, which is not a power of two; {}",
                                Where("key 'general.alignment'"), alignment, kRedownload));
  }
  f_.alignment_ = static_cast<int64_t>(alignment);
  return Status::Ok();
}

Status GgufParser::ParseTensorInfo(size_t index) {
  const std::string info = fmt::format("tensor info #{}", index);
  std::string_view name;
  EMBER_RETURN_IF_ERROR(ReadString(&name, info, "tensor name"));
  const std::string what = fmt::format("tensor '{}'", name);
  if (f_.tensor_index_.count(name) != 0) {
    return DataLoss(fmt::format("{}: the file lists this tensor twice (infos #{} and #{}); {}",
                                Where(what), f_.tensor_index_.at(name), index, kRedownload));
  }
  uint32_t n_dims = 0;
  EMBER_RETURN_IF_ERROR(Read(&n_dims, what, "number of dims"));
  if (n_dims > GgufFile::kMaxDims) {
    return DataLoss(fmt::format("{}: has {} dims, but GGUF tensors have at most {}; {}",
                                Where(what), n_dims, GgufFile::kMaxDims, kRedownload));
  }
  GgufTensor t;
  t.name = std::string(name);
  int64_t elements = 1;
  for (uint32_t i = 0; i < n_dims; ++i) {
    uint64_t dim = 0;
    EMBER_RETURN_IF_ERROR(Read(&dim, what, "dims"));
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
      return DataLoss(fmt::format("{}: dims[{}] = {} makes the element count overflow 64 bits; {}",
                                  Where(what), i, dim, kRedownload));
    }
    t.dims.push_back(static_cast<int64_t>(dim));
  }
  uint32_t code = 0;
  EMBER_RETURN_IF_ERROR(Read(&code, what, "ggml type"));
  std::optional<GgmlTypeTraits> traits = GgmlTypeInfo(code);
  if (!traits) {
    const std::string_view known = UnsupportedGgmlTypeName(code);
    return Unimplemented(fmt::format(
        "{}: ggml type {} ({}) is not supported by ember; ember does not support IQ* quant types "
        "yet (nor TQ*, MXFP4 or repacked types): use a file quantized with a Q*_0/Q*_1/Q*_K type, "
        "Q8_0, F16, BF16 or F32",
        Where(what), code, known.empty() ? "a code ember does not know" : known));
  }
  t.type = *traits;
  uint64_t offset = 0;
  EMBER_RETURN_IF_ERROR(Read(&offset, what, "data offset"));
  if (offset > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return DataLoss(fmt::format("{}: data offset {} is beyond any file; {}", Where(what), offset,
                                kRedownload));
  }
  t.offset = static_cast<int64_t>(offset);

  // Quantized types pack whole blocks per row, so the row length must be a multiple of the block.
  const int64_t row = t.dims.empty() ? 1 : t.dims[0];
  if (row % t.type.block_elements != 0) {
    return DataLoss(fmt::format(
        "{}: row length dims[0] = {} is not a multiple of the {} block size {}; the tensor cannot "
        "be stored as {}, {}",
        Where(what), row, t.type.name, t.type.block_elements, t.type.name, kRedownload));
  }
  if (__builtin_mul_overflow(elements / t.type.block_elements, t.type.block_bytes, &t.bytes)) {
    return DataLoss(fmt::format("{}: {} elements of {} overflow 64-bit byte counts; {}",
                                Where(what), elements, t.type.name, kRedownload));
  }
  f_.tensor_index_.emplace(name, f_.tensors_.size());
  f_.tensors_.push_back(std::move(t));
  return Status::Ok();
}

Status GgufParser::CheckTensorData() {
  const int64_t file_size = static_cast<int64_t>(size_);
  std::vector<size_t> order;
  order.reserve(f_.tensors_.size());
  for (size_t i = 0; i < f_.tensors_.size(); ++i) {
    const GgufTensor& t = f_.tensors_[i];
    if (t.offset % f_.alignment_ != 0) {
      const bool custom = f_.key_index_.count("general.alignment") != 0;
      return DataLoss(fmt::format("{}: data offset {} is not a multiple of the alignment {} ({}); {}",
                                  Where(fmt::format("tensor '{}'", t.name)), t.offset,
                                  f_.alignment_, custom ? "general.alignment" : "the default",
                                  kRedownload));
    }
    if (t.bytes > 0) order.push_back(i);
  }
  // In offset order, so that the tensor reported for a truncated file is the first one whose
  // bytes are missing, and overlaps are found between neighbours.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return f_.tensors_[a].offset < f_.tensors_[b].offset; });
  const GgufTensor* previous = nullptr;
  for (size_t i : order) {
    GgufTensor& t = f_.tensors_[i];
    const std::string what = fmt::format("tensor '{}'", t.name);
    int64_t begin = 0, end = 0;
    if (__builtin_add_overflow(f_.data_offset_, t.offset, &begin) ||
        __builtin_add_overflow(begin, t.bytes, &end) || end > file_size) {
      return DataLoss(fmt::format(
          "{}: needs {} bytes of {} data at file offset {} (data section offset {}), but the "
          "file is only {} bytes; the file is truncated (an interrupted download?) and should be "
          "re-downloaded",
          Where(what), t.bytes, t.type.name, static_cast<uint64_t>(f_.data_offset_) + t.offset,
          t.offset, file_size));
    }
    if (previous != nullptr && t.offset < previous->offset + previous->bytes) {
      return DataLoss(fmt::format(
          "{}: data [{}, {}) overlaps tensor '{}' at [{}, {}) (offsets within the data section); "
          "{}",
          Where(what), t.offset, t.offset + t.bytes, previous->name, previous->offset,
          previous->offset + previous->bytes, kRedownload));
    }
    t.data = base_ + begin;
    previous = &t;
  }
  return Status::Ok();
}

Status GgufParser::Parse() {
  uint64_t tensor_count = 0, kv_count = 0;
  EMBER_RETURN_IF_ERROR(ParseHeader(&tensor_count, &kv_count));

  f_.keys_.reserve(kv_count);
  f_.values_.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string_view key;
    EMBER_RETURN_IF_ERROR(ReadString(&key, fmt::format("metadata entry #{}", i), "key"));
    const std::string what = fmt::format("key '{}'", key);
    auto [it, inserted] = f_.key_index_.emplace(key, f_.keys_.size());
    if (!inserted) {
      return DataLoss(fmt::format("{}: the key appears twice (entries #{} and #{}); {}",
                                  Where(what), it->second, i, kRedownload));
    }
    GgufValueType type = GgufValueType::kUint8;
    EMBER_RETURN_IF_ERROR(ReadValueType(&type, what, "value type"));
    GgufValue value;
    EMBER_RETURN_IF_ERROR(ParseValue(type, 0, what, &value));
    f_.keys_.push_back(key);
    f_.values_.push_back(std::move(value));
  }
  EMBER_RETURN_IF_ERROR(ParseAlignment());

  if (tensor_count > Remaining() / kMinTensorInfoBytes) {
    return DataLoss(fmt::format(
        "{}: header says {} tensors, but only {} bytes remain after the metadata; the file is "
        "truncated or corrupt, {}",
        Where(), tensor_count, Remaining(), kRedownload));
  }
  f_.tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) EMBER_RETURN_IF_ERROR(ParseTensorInfo(i));

  // The data section starts at the next multiple of the alignment after the tensor infos.
  const uint64_t alignment = static_cast<uint64_t>(f_.alignment_);
  f_.data_offset_ = static_cast<int64_t>((pos_ + alignment - 1) / alignment * alignment);
  return CheckTensorData();
}

// ---- GgufFile -----------------------------------------------------------------------------------

Expected<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(MappedFile mapping,
                         MappedFile::Open(path, fmt::format("GGUF file '{}'", path)));
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->mapping_ = std::move(mapping);
  // The metadata is read once, now, front to back: ask for the first MBs in one go (a vocabulary
  // of 262k tokens is ~6 MB).
  file->mapping_.WillNeed(0, 8 << 20);
  GgufParser parser(file.get());
  EMBER_RETURN_IF_ERROR(parser.Parse());
  return file;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &values_[it->second];
}

std::optional<int64_t> GgufFile::GetInt(std::string_view key) const {
  return Lookup<&GgufValue::AsInt>(Find(key));
}
std::optional<double> GgufFile::GetFloat(std::string_view key) const {
  return Lookup<&GgufValue::AsFloat>(Find(key));
}
std::optional<bool> GgufFile::GetBool(std::string_view key) const {
  return Lookup<&GgufValue::AsBool>(Find(key));
}
std::optional<std::string_view> GgufFile::GetString(std::string_view key) const {
  return Lookup<&GgufValue::AsString>(Find(key));
}
std::optional<std::span<const std::string_view>> GgufFile::GetStringArray(
    std::string_view key) const {
  return Lookup<&GgufValue::AsStringArray>(Find(key));
}
std::optional<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  return Lookup<&GgufValue::AsFloatArray>(Find(key));
}
std::optional<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  return Lookup<&GgufValue::AsIntArray>(Find(key));
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace ember
