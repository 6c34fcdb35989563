#include "formats/safetensors_writer.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace ember {

std::string_view SafetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E5M2: return "F8_E5M2";
    case DType::kE8M0: return "F8_E8M0";
    case DType::kF4E2M1: return "F4";
    case DType::kU8: return "U8";
    case DType::kI8: return "I8";
    case DType::kI16: return "I16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kF64: return "F64";
    case DType::kBool: return "BOOL";
    case DType::kUE4M3: break;  // no safetensors name: NVFP4 scales are stored as F8_E4M3
  }
  EMBER_CHECK(false, "dtype {} has no safetensors name", DTypeName(dtype));
  return "";
}

Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  // nlohmann::ordered_json keeps the tensors in the order their bytes are written.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    const int64_t bytes = DTypeBytes(t.dtype, t.shape.NumElements());
    std::vector<int64_t> shape(t.shape.rank());
    for (int i = 0; i < t.shape.rank(); ++i) shape[i] = t.shape[i];
    header[t.name] = {{"dtype", SafetensorsDTypeName(t.dtype)}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!file) return IoError(fmt::format("cannot create {}", path));
  const uint64_t length = text.size();
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(length >> (8 * i));
  bool ok = std::fwrite(le, 1, 8, file.get()) == 8 && std::fwrite(text.data(), 1, text.size(), file.get()) == text.size();
  for (const SafetensorsEntry& t : tensors) {
    const auto bytes = static_cast<size_t>(DTypeBytes(t.dtype, t.shape.NumElements()));
    ok = ok && (bytes == 0 || std::fwrite(t.data, 1, bytes, file.get()) == bytes);
  }
  ok = std::fflush(file.get()) == 0 && ok;
  if (!ok) return IoError(fmt::format("writing {} failed (disk full?)", path));
  return Status::Ok();
}

}  // namespace ember
