// Checkpoint: every tensor of a Hugging Face safetensors checkpoint, by name.
//
// A model directory holds either one `model.safetensors` or shards described by
// `model.safetensors.index.json` ({"metadata": {...}, "weight_map": {tensor: shard file}}). The
// index and the shards are cross-checked when opened, so that a half-finished download or a
// mismatched index fails here, naming the tensor and the shard, rather than as garbage output.
// Tensor views point into the shards' mappings and live as long as the Checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtypes.h"
#include "core/status.h"
#include "core/tensor.h"
#include "formats/safetensors.h"

namespace ember {

class Checkpoint {
 public:
  static constexpr const char* kSingleFileName = "model.safetensors";
  static constexpr const char* kIndexFileName = "model.safetensors.index.json";

  // Opens a model directory. `model.safetensors` wins when both it and an index are present
  // (as in transformers). Errors:
  //   NotFound   the directory, both weight files, or a shard named by the index is missing
  //   DataLoss   the index is malformed, names a tensor its shard lacks, or two shards hold the
  //              same tensor; or a shard is corrupt (see SafetensorsFile::Open)
  //   IoError / Unimplemented   passed through from SafetensorsFile::Open
  // A path to a regular file is opened as with OpenFile().
  static Expected<std::unique_ptr<Checkpoint>> OpenDirectory(const std::string& dir);
  // Opens a single .safetensors file as a checkpoint.
  static Expected<std::unique_ptr<Checkpoint>> OpenFile(const std::string& path);

  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  bool Has(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }
  // nullptr when absent.
  const SafetensorTensor* Find(std::string_view name) const;
  // NotFound names the tensor and the checkpoint, and suggests a near miss when there is one.
  Expected<TensorView> Get(std::string_view name) const;
  // Get() plus checks: the dtype must be one of `allowed_dtypes` (empty: any) and the shape must
  // equal `expected_shape`, where a -1 dimension matches any size. Mismatches are
  // InvalidArgument: "tensor 'x' in file 'f' has dtype bf16, expected one of f32, f16". When
  // given, `shape_source` says where the expected shape comes from (e.g. "config.json says
  // hidden_size=4096") and is appended to shape errors.
  Expected<TensorView> Require(std::string_view name, std::initializer_list<DType> allowed_dtypes,
                               const Shape& expected_shape,
                               std::string_view shape_source = {}) const;

  // All tensor names, sorted.
  std::vector<std::string> Names() const;
  size_t size() const { return tensors_.size(); }
  // Sum of every tensor's bytes (what loading all weights reads).
  int64_t TotalTensorBytes() const;
  // Path of the file holding `name`, or "" when absent.
  std::string FileOf(std::string_view name) const;

  // The directory or file this checkpoint was opened from.
  const std::string& source() const { return source_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // MappedFile::DropResidentPages over every file of the checkpoint.
  void DropResidentPages() const;
  // The index's "metadata" object with each value as text (strings as-is, others as JSON);
  // empty for single-file checkpoints.
  const std::map<std::string, std::string>& index_metadata() const { return index_metadata_; }

 private:
  struct Entry {
    const SafetensorsFile* file;
    const SafetensorTensor* tensor;
  };

  Checkpoint() = default;
  Status OpenIndex(const std::string& index_path);
  // The closest existing name to `name` if one is an obvious near miss, else "".
  std::string SuggestName(std::string_view name) const;

  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> tensors_;
  std::map<std::string, std::string> index_metadata_;
};

}  // namespace ember
