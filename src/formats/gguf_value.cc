// GgufValue accessors and the value-type helpers; the parser that fills GgufValues is in gguf.cc.
#include <cstring>
#include <iterator>
#include <limits>

#include "formats/gguf.h"

namespace ember {
namespace {

bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}
bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 ||
         t == GgufValueType::kUint32 || t == GgufValueType::kUint64;
}
bool IsFloat(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

template <typename T>
T Load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

uint64_t GgufValueTypeBytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16: case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32: case GgufValueType::kInt32: case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64: case GgufValueType::kInt64: case GgufValueType::kFloat64: return 8;
    default: return 0;
  }
}

std::string_view GgufValueTypeName(GgufValueType type) {
  static constexpr std::string_view kNames[] = {"uint8",  "int8",    "uint16", "int16", "uint32",
                                                "int32",  "float32", "bool",   "string", "array",
                                                "uint64", "int64",   "float64"};
  const auto code = static_cast<uint32_t>(type);
  return code < std::size(kNames) ? kNames[code] : "unknown";
}

// ---- GgufValue ----------------------------------------------------------------------------------

std::optional<int64_t> GgufValue::AsInt() const {
  if (IsSigned(type_)) return int_;
  if (IsUnsigned(type_) && uint_ <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(uint_);
  }
  return std::nullopt;
}

std::optional<uint64_t> GgufValue::AsUint() const {
  if (IsUnsigned(type_)) return uint_;
  if (IsSigned(type_) && int_ >= 0) return static_cast<uint64_t>(int_);
  return std::nullopt;
}

std::optional<double> GgufValue::AsFloat() const {
  if (IsFloat(type_)) return float_;
  if (IsSigned(type_)) return static_cast<double>(int_);
  if (IsUnsigned(type_)) return static_cast<double>(uint_);
  return std::nullopt;
}

std::optional<bool> GgufValue::AsBool() const {
  if (type_ == GgufValueType::kBool) return uint_ != 0;
  return std::nullopt;
}

std::optional<std::string_view> GgufValue::AsString() const {
  if (type_ == GgufValueType::kString) return string_;
  return std::nullopt;
}

GgufValue GgufValue::At(int64_t i) const {
  GgufValue out;
  if (!is_array() || i < 0 || i >= count_) return out;
  if (element_type_ == GgufValueType::kString) {
    out.type_ = GgufValueType::kString;
    out.string_ = strings_[i];
  } else if (element_type_ == GgufValueType::kArray) {
    out = nested_[i];
  } else {
    const uint8_t* p = raw_ + i * GgufValueTypeBytes(element_type_);
    out.type_ = element_type_;
    switch (element_type_) {
      case GgufValueType::kUint8: case GgufValueType::kBool: out.uint_ = *p; break;
      case GgufValueType::kInt8: out.int_ = Load<int8_t>(p); break;
      case GgufValueType::kUint16: out.uint_ = Load<uint16_t>(p); break;
      case GgufValueType::kInt16: out.int_ = Load<int16_t>(p); break;
      case GgufValueType::kUint32: out.uint_ = Load<uint32_t>(p); break;
      case GgufValueType::kInt32: out.int_ = Load<int32_t>(p); break;
      case GgufValueType::kUint64: out.uint_ = Load<uint64_t>(p); break;
      case GgufValueType::kInt64: out.int_ = Load<int64_t>(p); break;
      case GgufValueType::kFloat32: out.float_ = Load<float>(p); break;
      case GgufValueType::kFloat64: out.float_ = Load<double>(p); break;
      default: break;
    }
  }
  return out;
}

std::optional<std::vector<int64_t>> GgufValue::AsIntArray() const {
  if (!is_array() || !(IsSigned(element_type_) || IsUnsigned(element_type_))) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(count_));
  for (int64_t i = 0; i < count_; ++i) {
    std::optional<int64_t> v = At(i).AsInt();
    if (!v) return std::nullopt;
    out[i] = *v;
  }
  return out;
}

std::optional<std::vector<float>> GgufValue::AsFloatArray() const {
  if (!is_array() || GgufValueTypeBytes(element_type_) == 0 || element_type_ == GgufValueType::kBool) {
    return std::nullopt;
  }
  std::vector<float> out(static_cast<size_t>(count_));
  for (int64_t i = 0; i < count_; ++i) out[i] = static_cast<float>(*At(i).AsFloat());
  return out;
}

std::optional<std::span<const std::string_view>> GgufValue::AsStringArray() const {
  if (!is_array() || element_type_ != GgufValueType::kString) return std::nullopt;
  return std::span<const std::string_view>(strings_);
}

}  // namespace ember
