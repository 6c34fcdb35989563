// Where a model's tensors come from: a checkpoint on disk, or deterministic random values for
// benchmarks and tests of configurations nobody has weights for.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ember {

class Checkpoint;

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The tensor `name`, which must have one of `allowed` dtypes and exactly `shape`.
  virtual Expected<TensorView> Require(std::string_view name, std::initializer_list<DType> allowed,
                                       const Shape& shape) = 0;
  virtual bool Has(std::string_view name) const = 0;
  // A description for logs and errors ("checkpoint /path" or "random weights (seed 1)").
  virtual std::string Describe() const = 0;
  // Tensors the source holds that nobody has required (e.g. vision towers of a multimodal
  // checkpoint when only the text decoder runs), sorted.
  virtual std::vector<std::string> UnusedTensorNames() const { return {}; }
  // The caller has copied what it needs of `view` (a tensor-parallel rank's block of columns): a
  // mapped source drops its pages from this process's resident memory, so a rank never holds
  // more than its shard at once while loading. A no-op for sources that own their bytes.
  virtual void Release(const TensorView& view) { (void)view; }
};

// The vector `name` of `n` elements stored as f32, bf16 or f16, as f32 values plus `add` (1 for
// the zero-centred norm gains, so they are ready to multiply).
Expected<std::vector<float>> RequireVectorF32(WeightSource& source, std::string_view name, int64_t n,
                                              float add = 0.0f);

// "model.vision_tower.* (80), model.audio_tower.* (43)": unused tensors grouped by the first two
// components of their names, for one log line.
std::string SummarizeTensorNames(const std::vector<std::string>& names);

// Tensors from a safetensors checkpoint (mmapped; nothing is copied).
std::unique_ptr<WeightSource> MakeCheckpointWeightSource(std::shared_ptr<const Checkpoint> checkpoint,
                                                         std::string description);

// Random tensors created on request: normal-ish values with the given standard deviation, stored
// in the first allowed dtype, deterministic in (seed, name). Norm gains are drawn around zero, so
// zero-centred gains stay near one.
class RandomWeightSource : public WeightSource {
 public:
  explicit RandomWeightSource(uint64_t seed, float stddev = 0.02f) : seed_(seed), stddev_(stddev) {}
  Expected<TensorView> Require(std::string_view name, std::initializer_list<DType> allowed,
                               const Shape& shape) override;
  bool Has(std::string_view name) const override { return true; }
  std::string Describe() const override;

 private:
  uint64_t seed_;
  float stddev_;
  std::vector<std::unique_ptr<uint8_t[]>> buffers_;
};

}  // namespace ember
