#include "formats/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

namespace ember {
namespace {

using Json = nlohmann::ordered_json;  // ordered: names() must follow the header's order

constexpr std::string_view kRedownload = "re-download or re-convert the checkpoint";

// Every message starts with the file so that a failure inside a 50-shard checkpoint says which
// shard is bad.
std::string Where(const std::string& path) { return fmt::format("safetensors file '{}'", path); }

std::string Where(const std::string& path, std::string_view tensor) {
  return fmt::format("safetensors file '{}', tensor '{}'", path, tensor);
}

// Dtype strings the safetensors format defines that ember has no DType for. These are valid
// files we cannot use (Unimplemented), as opposed to garbage in the dtype field (DataLoss).
bool IsSafetensorsDtypeEmberLacks(std::string_view name) {
  static constexpr std::string_view kKnown[] = {"U16", "U32", "U64", "F6_E2M3", "F6_E3M2", "C64"};
  return std::find(std::begin(kKnown), std::end(kKnown), name) != std::end(kKnown);
}

// Short, printable rendering of a JSON value for messages (headers can hold megabytes).
std::string Abbrev(const Json& value) {
  std::string text =
      value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::detail::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// A JSON integer that is >= 0 and fits int64_t, or nullopt (negative, float, string, too big).
std::optional<int64_t> NonNegativeInt(const Json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    if (v < 0) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

uint64_t ReadLittleEndian64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// The fields of one header entry, checked for self-consistency but not yet against the file.
struct ParsedEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> dims;
  int64_t begin;
  int64_t end;
};

Expected<ParsedEntry> ParseEntry(const std::string& path, const std::string& name,
                                 const Json& entry) {
  const std::string where = Where(path, name);
  if (!entry.is_object()) {
    return DataLoss(
        fmt::format("{}: header entry is {} ({}), expected an object with dtype, "
                    "shape and data_offsets; {}",
                    where, entry.type_name(), Abbrev(entry), kRedownload));
  }
  ParsedEntry out;
  out.name = name;

  // dtype
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return DataLoss(
        fmt::format("{}: header entry has {} dtype, expected a string such as \"BF16\"; {}", where,
                    dtype_it == entry.end() ? "no" : "a non-string", kRedownload));
  }
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  std::optional<DType> dtype = DTypeFromSafetensors(dtype_name);
  if (!dtype) {
    if (IsSafetensorsDtypeEmberLacks(dtype_name)) {
      return Unimplemented(
          fmt::format("{}: dtype {} is valid safetensors but ember does not support "
                      "it; convert the checkpoint to F32, F16, BF16, FP8, FP4, "
                      "I8..I64, U8 or BOOL",
                      where, dtype_name));
    }
    return DataLoss(
        fmt::format("{}: unknown dtype {} (expected F32, F16, BF16, F8_E4M3, "
                    "F8_E5M2, F8_E8M0, F4, U8, I8, I16, I32, I64, F64 or BOOL); {}",
                    where, Abbrev(*dtype_it), kRedownload));
  }
  out.dtype = *dtype;

  // shape
  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return DataLoss(
        fmt::format("{}: header entry has {} shape, expected an array of non-negative "
                    "integers; {}",
                    where, shape_it == entry.end() ? "no" : "a non-array", kRedownload));
  }
  if (shape_it->size() > static_cast<size_t>(kMaxTensorRank)) {
    return Unimplemented(fmt::format("{}: shape {} has rank {}, ember supports at most rank {}",
                                     where, Abbrev(*shape_it), shape_it->size(), kMaxTensorRank));
  }
  int64_t num_elements = 1;
  for (const Json& dim : *shape_it) {
    std::optional<int64_t> d = NonNegativeInt(dim);
    if (!d) {
      return DataLoss(fmt::format("{}: shape {} contains {}, expected non-negative integers; {}",
                                  where, Abbrev(*shape_it), Abbrev(dim), kRedownload));
    }
    out.dims.push_back(*d);
    if (__builtin_mul_overflow(num_elements, *d, &num_elements)) {
      return DataLoss(fmt::format("{}: shape {} has more elements than fit in 64 bits; {}", where,
                                  Abbrev(*shape_it), kRedownload));
    }
  }
  // DTypeBytes multiplies by the bit width (at most 64), so keep that product in range too.
  if (num_elements > (std::numeric_limits<int64_t>::max() - 7) / 64) {
    return DataLoss(fmt::format("{}: shape {} is too large to address; {}", where,
                                Abbrev(*shape_it), kRedownload));
  }

  // data_offsets
  auto offsets_it = entry.find("data_offsets");
  std::optional<int64_t> begin, end;
  if (offsets_it != entry.end() && offsets_it->is_array() && offsets_it->size() == 2) {
    begin = NonNegativeInt((*offsets_it)[0]);
    end = NonNegativeInt((*offsets_it)[1]);
  }
  if (!begin || !end) {
    return DataLoss(fmt::format(
        "{}: data_offsets is {}, expected [begin, end] with non-negative "
        "integers; {}",
        where, offsets_it == entry.end() ? "missing" : Abbrev(*offsets_it), kRedownload));
  }
  if (*begin > *end) {
    return DataLoss(fmt::format("{}: data_offsets [{}, {}] has begin after end; {}", where, *begin,
                                *end, kRedownload));
  }
  out.begin = *begin;
  out.end = *end;
  const int64_t expected_bytes = DTypeBytes(out.dtype, num_elements);
  if (out.end - out.begin != expected_bytes) {
    return DataLoss(
        fmt::format("{}: data_offsets [{}, {}] span {} bytes, but dtype {} with shape "
                    "{} needs {} bytes; the header is inconsistent, {}",
                    where, out.begin, out.end, out.end - out.begin, dtype_name, Abbrev(*shape_it),
                    expected_bytes, kRedownload));
  }
  return out;
}

}  // namespace

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::Open(path, Where(path)));
  const int64_t file_size = mapping.size();
  if (file_size < 8) {
    return DataLoss(
        fmt::format("{}: file is {} bytes, too short for the 8-byte header length "
                    "that starts every safetensors file; {}",
                    Where(path), file_size, kRedownload));
  }

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->mapping_ = std::move(mapping);
  file->base_ = file->mapping_.data();
  file->file_size_ = file_size;

  const uint64_t header_len = ReadLittleEndian64(file->base_);
  const uint64_t available = static_cast<uint64_t>(file_size) - 8;
  if (header_len > kMaxHeaderBytes) {
    return DataLoss(
        fmt::format("{}: header length field says {} bytes, above the {} MB limit; the "
                    "file is corrupt or not safetensors (PyTorch .bin/.pt checkpoints "
                    "must be converted first); {}",
                    Where(path), header_len, kMaxHeaderBytes >> 20, kRedownload));
  }
  if (header_len > available) {
    return DataLoss(
        fmt::format("{}: header length field says {} bytes but only {} bytes follow it; "
                    "the file is truncated or not safetensors; {}",
                    Where(path), header_len, available, kRedownload));
  }
  file->data_offset_ = static_cast<int64_t>(8 + header_len);
  // The header is read once, now: tell the kernel so it reads it in one go.
  file->mapping_.WillNeed(0, file->data_offset_);

  const std::string_view header(reinterpret_cast<const char*>(file->base_) + 8, header_len);
  EMBER_RETURN_IF_ERROR(file->ParseHeader(header));
  return file;
}

Status SafetensorsFile::ParseHeader(std::string_view header) {
  // nlohmann keeps the last of duplicate keys silently; a duplicated tensor name means the writer
  // was broken, so spot it while parsing.
  std::unordered_set<std::string> seen_keys;
  std::string duplicate;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key && duplicate.empty() &&
        !seen_keys.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(header.begin(), header.end(), on_event);
  } catch (const nlohmann::json::exception& e) {
    // Number overflow arrives as out_of_range rather than parse_error; both mean a bad header.
    return DataLoss(fmt::format("{}: header ({} bytes) is not valid JSON: {}; {}", Where(path_),
                                header.size(), e.what(), kRedownload));
  }
  if (!root.is_object()) {
    return DataLoss(
        fmt::format("{}: header is a JSON {}, expected an object mapping tensor names "
                    "to entries; {}",
                    Where(path_), root.type_name(), kRedownload));
  }
  if (!duplicate.empty()) {
    return DataLoss(fmt::format("{}: header lists tensor '{}' more than once; {}", Where(path_),
                                duplicate, kRedownload));
  }

  std::vector<ParsedEntry> entries;
  entries.reserve(root.size());
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) {
        return DataLoss(
            fmt::format("{}: __metadata__ is a JSON {}, expected an object of strings; {}",
                        Where(path_), value.type_name(), kRedownload));
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return DataLoss(fmt::format("{}: __metadata__[\"{}\"] is {}, expected a string; {}",
                                      Where(path_), meta_key, Abbrev(meta_value), kRedownload));
        }
        metadata_[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    EMBER_ASSIGN_OR_RETURN(ParsedEntry entry, ParseEntry(path_, key, value));
    entries.push_back(std::move(entry));
  }

  // Check the byte ranges against the file in offset order, so that the tensor reported for a
  // truncated file is the first one whose bytes are missing.
  const int64_t data_size = file_size_ - data_offset_;
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entries[a].begin != entries[b].begin ? entries[a].begin < entries[b].begin
                                                : entries[a].end < entries[b].end;
  });
  for (size_t i : order) {
    const ParsedEntry& e = entries[i];
    if (e.end > data_size) {
      return DataLoss(fmt::format(
          "{}: needs bytes [{}, {}) of the data section, but the data section is only {} bytes "
          "(file is {} bytes, header promises at least {}); the file is truncated or its header is "
          "wrong; {}",
          Where(path_, e.name), e.begin, e.end, data_size, file_size_, data_offset_ + e.end,
          kRedownload));
    }
  }
  // Empty tensors own no bytes and may sit anywhere, including on another tensor's offset.
  const ParsedEntry* previous = nullptr;
  for (size_t i : order) {
    const ParsedEntry& e = entries[i];
    if (e.begin == e.end) continue;
    if (previous != nullptr && e.begin < previous->end) {
      return DataLoss(fmt::format("{}: bytes [{}, {}) overlap tensor '{}' at [{}, {}); {}",
                                  Where(path_, e.name), e.begin, e.end, previous->name,
                                  previous->begin, previous->end, kRedownload));
    }
    previous = &e;
  }

  tensors_.reserve(entries.size());
  names_.reserve(entries.size());
  for (ParsedEntry& e : entries) {
    SafetensorTensor t;
    t.name = std::move(e.name);
    t.dtype = e.dtype;
    t.shape = Shape(e.dims);  // rank was checked against kMaxTensorRank above
    t.data_begin = e.begin;
    t.data_end = e.end;
    t.view.dtype = t.dtype;
    t.view.shape = t.shape;
    t.view.data = base_ + data_offset_ + e.begin;
    names_.push_back(t.name);
    tensors_.push_back(std::move(t));
  }
  // Built only now: the keys view tensors_[i].name, which must no longer move.
  index_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  return Status::Ok();
}

SafetensorsFile::~SafetensorsFile() = default;

const SafetensorTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

int64_t SafetensorsFile::TotalTensorBytes() const {
  int64_t total = 0;
  for (const SafetensorTensor& t : tensors_) total += t.NumBytes();
  return total;
}

void SafetensorsFile::Prefetch() const { mapping_.WillNeed(0, file_size_); }

}  // namespace ember
