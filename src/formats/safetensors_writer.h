// Writing .safetensors files (the format safetensors.h reads): an 8-byte little-endian header
// length, the JSON header padded with spaces to a multiple of 8 (so the data section starts
// 8-byte aligned, as the reference writer does), then every tensor's bytes back to back in the
// order given.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtypes.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ember {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  const void* data = nullptr;  // DTypeBytes(dtype, shape.NumElements()) bytes, alive until written
};

// The safetensors dtype string ("BF16", "F8_E4M3", "U8", ...); the inverse of DTypeFromSafetensors.
std::string_view SafetensorsDTypeName(DType dtype);

// Writes `tensors` to `path` (replacing it). IoError when the file cannot be written.
Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace ember
