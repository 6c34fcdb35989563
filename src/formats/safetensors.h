// SafetensorsFile: one memory-mapped .safetensors file, validated in full when opened.
//
// Layout (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N
// bytes of UTF-8 JSON mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]},
// then the data section; offsets are relative to the start of the data section. An optional
// "__metadata__" entry maps strings to strings.
//
// Checkpoints come from the internet and from conversion scripts, so every field is checked
// before a single tensor is handed out: after Open() succeeds, every SafetensorTensor's view lies
// inside the mapping and holds exactly the bytes its dtype and shape need. A bad file is reported
// as a Status naming the file, the tensor and what was expected; no input makes Open() crash.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtypes.h"
#include "core/status.h"
#include "core/tensor.h"
#include "formats/mapped_file.h"

namespace ember {

// One tensor of a SafetensorsFile. `view.data` points into the file's mapping, so it stays valid
// as long as the SafetensorsFile lives.
struct SafetensorTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  TensorView view;
  // [data_begin, data_end): byte range inside the data section, as written in the header.
  int64_t data_begin = 0;
  int64_t data_end = 0;

  int64_t NumBytes() const { return data_end - data_begin; }
};

class SafetensorsFile {
 public:
  // Headers beyond this are refused: real checkpoints stay far below (a 100k-tensor header is a
  // few MB), and the cap stops a corrupt length field from making us parse gigabytes of weights.
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  // Maps `path` read-only and validates the header against the file. Errors:
  //   NotFound         the file does not exist
  //   IoError          open/stat/mmap failed for another reason (permissions, a directory, ...)
  //   DataLoss         the file is truncated or its header is malformed or inconsistent
  //   Unimplemented    well-formed, but uses a dtype or rank ember does not support
  static Expected<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Size of the whole file in bytes (header included).
  int64_t file_size() const { return file_size_; }
  // Byte offset of the data section from the start of the file (8 + header length).
  int64_t data_offset() const { return data_offset_; }
  // The whole mapping, for callers that want to check where a view points.
  const uint8_t* mapped_bytes() const { return base_; }

  // Tensor names in the order the header lists them.
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<SafetensorTensor>& tensors() const { return tensors_; }
  size_t size() const { return tensors_.size(); }
  // nullptr when the file has no tensor of that name.
  const SafetensorTensor* Find(std::string_view name) const;
  // Sum of all tensors' byte sizes.
  int64_t TotalTensorBytes() const;

  // The "__metadata__" entry (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Asks the kernel to start reading the whole file in the background (MADV_WILLNEED), for
  // callers about to touch every weight (repacking, quantising). Purely a hint.
  void Prefetch() const;

 private:
  SafetensorsFile() = default;
  Status ParseHeader(std::string_view header);

  std::string path_;
  MappedFile mapping_;
  const uint8_t* base_ = nullptr;  // mapping_.data(); nullptr only before Open() maps it
  int64_t file_size_ = 0;
  int64_t data_offset_ = 0;
  std::vector<std::string> names_;
  std::vector<SafetensorTensor> tensors_;
  // name -> index into tensors_; keyed by string_view into tensors_[i].name (never reallocated
  // after parsing).
  std::unordered_map<std::string_view, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace ember
