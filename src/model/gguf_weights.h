// Typed, validated access to a GGUF model's hyperparameters and tensors for architecture loaders.
// Every error names the file and the key or tensor and says what was expected.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/gguf.h"
#include "model/linear.h"
#include "model/tensor_parallel.h"

namespace ember {

class GgufWeights {
 public:
  explicit GgufWeights(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {}

  const GgufFile& file() const { return *file_; }
  std::shared_ptr<const GgufFile> shared_file() const { return file_; }

  // "<arch>.<suffix>" hyperparameters, e.g. Int("block_count") reads "llama.block_count".
  Expected<int64_t> Int(const std::string& suffix) const;
  int64_t IntOr(const std::string& suffix, int64_t fallback) const;
  Expected<double> Float(const std::string& suffix) const;
  double FloatOr(const std::string& suffix, double fallback) const;
  const std::string& architecture() const { return architecture_; }
  Status ReadArchitecture();

  bool Has(const std::string& tensor) const { return file_->FindTensor(tensor) != nullptr; }
  // A matmul weight stored as GGUF dims {in, out} (PyTorch [out, in]), or the block of it `split`
  // names (a tensor-parallel rank's shard: a view of rows, a copy of columns).
  Expected<Linear> Matrix(const std::string& tensor, int64_t out_features, int64_t in_features,
                          const MatrixSplit& split = MatrixSplit::Whole()) const;
  // A 1-D F32/F16/BF16 tensor of n elements, as f32.
  Expected<std::vector<float>> Vector(const std::string& tensor, int64_t n) const;

 private:
  std::shared_ptr<const GgufFile> file_;
  std::string architecture_;
};

}  // namespace ember
