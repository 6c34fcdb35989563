#include "core/dtypes.h"

namespace ember {

int DTypeBits(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 32;
    case DType::kF16: return 16;
    case DType::kBF16: return 16;
    case DType::kF8E4M3: return 8;
    case DType::kF8E5M2: return 8;
    case DType::kF4E2M1: return 4;
    case DType::kE8M0: return 8;
    case DType::kUE4M3: return 8;
    case DType::kU8: return 8;
    case DType::kI8: return 8;
    case DType::kI16: return 16;
    case DType::kI32: return 32;
    case DType::kI64: return 64;
    case DType::kF64: return 64;
    case DType::kBool: return 8;
  }
  return 0;
}

int64_t DTypeBytes(DType dtype, int64_t count) { return (count * DTypeBits(dtype) + 7) / 8; }

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3: return "f8_e4m3";
    case DType::kF8E5M2: return "f8_e5m2";
    case DType::kF4E2M1: return "f4_e2m1";
    case DType::kE8M0: return "e8m0";
    case DType::kUE4M3: return "ue4m3";
    case DType::kU8: return "u8";
    case DType::kI8: return "i8";
    case DType::kI16: return "i16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kF64: return "f64";
    case DType::kBool: return "bool";
  }
  return "?";
}

std::optional<DType> DTypeFromSafetensors(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  if (name == "F8_E4M3") return DType::kF8E4M3;
  if (name == "F8_E5M2") return DType::kF8E5M2;
  if (name == "F8_E8M0") return DType::kE8M0;
  if (name == "F4") return DType::kF4E2M1;
  if (name == "U8") return DType::kU8;
  if (name == "I8") return DType::kI8;
  if (name == "I16") return DType::kI16;
  if (name == "I32") return DType::kI32;
  if (name == "I64") return DType::kI64;
  if (name == "F64") return DType::kF64;
  if (name == "BOOL") return DType::kBool;
  return std::nullopt;
}

// The scalar conversions for f16, fp8, fp4, e8m0 and ue4m3 live in dtype_convert.cc.

}  // namespace ember
