#include "model/weight_source.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

#include "core/thread_pool.h"
#include "formats/checkpoint.h"
#include "formats/mapped_file.h"

namespace ember {
namespace {

class CheckpointWeightSource : public WeightSource {
 public:
  CheckpointWeightSource(std::shared_ptr<const Checkpoint> checkpoint, std::string description)
      : checkpoint_(std::move(checkpoint)), description_(std::move(description)) {}

  Expected<TensorView> Require(std::string_view name, std::initializer_list<DType> allowed,
                               const Shape& shape) override {
    used_.insert(std::string(name));
    return checkpoint_->Require(name, allowed, shape);
  }
  bool Has(std::string_view name) const override { return checkpoint_->Has(name); }
  std::string Describe() const override { return description_; }
  void Release(const TensorView& view) override {
    MappedFile::DropResidentPages(static_cast<const uint8_t*>(view.data), view.NumBytes());
  }
  std::vector<std::string> UnusedTensorNames() const override {
    std::vector<std::string> unused;
    for (const std::string& name : checkpoint_->Names()) {
      if (used_.count(name) == 0) unused.push_back(name);
    }
    return unused;
  }

 private:
  std::set<std::string> used_;
  std::shared_ptr<const Checkpoint> checkpoint_;
  std::string description_;
};

// SplitMix64: a tiny, well-mixed generator; one stream per (seed, tensor name, element).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t HashName(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

std::unique_ptr<WeightSource> MakeCheckpointWeightSource(std::shared_ptr<const Checkpoint> checkpoint,
                                                         std::string description) {
  return std::make_unique<CheckpointWeightSource>(std::move(checkpoint), std::move(description));
}

Expected<TensorView> RandomWeightSource::Require(std::string_view name, std::initializer_list<DType> allowed,
                                                 const Shape& shape) {
  const DType dtype = *allowed.begin();
  if (dtype != DType::kBF16 && dtype != DType::kF32) {
    return Unimplemented(fmt::format("random weights: cannot make {} tensor {}", DTypeName(dtype), name));
  }
  const int64_t count = shape.NumElements();
  const int64_t bytes = DTypeBytes(dtype, count);
  auto buffer = std::make_unique<uint8_t[]>(bytes);
  const uint64_t stream = Mix(seed_ ^ HashName(name));
  const float stddev = stddev_;
  uint8_t* data = buffer.get();
  // Sum of two uniforms (triangular, std = 1/sqrt(6) of the range) is close enough to normal here
  // and cheap to generate for hundreds of MB.
  ThreadPool::Global().ParallelFor(count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t r = Mix(stream + static_cast<uint64_t>(i));
      const float u1 = static_cast<float>(r & 0xffffffffu) * 2.3283064e-10f;
      const float u2 = static_cast<float>(r >> 32) * 2.3283064e-10f;
      const float value = (u1 + u2 - 1.0f) * 2.449489743f * stddev;
      if (dtype == DType::kBF16) {
        reinterpret_cast<uint16_t*>(data)[i] = F32ToBF16(value);
      } else {
        reinterpret_cast<float*>(data)[i] = value;
      }
    }
  }, 1 << 16);
  TensorView view{dtype, shape, data};
  buffers_.push_back(std::move(buffer));
  return view;
}

Expected<std::vector<float>> RequireVectorF32(WeightSource& source, std::string_view name, int64_t n, float add) {
  EMBER_ASSIGN_OR_RETURN(TensorView t, source.Require(name, {DType::kBF16, DType::kF32, DType::kF16}, Shape{n}));
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    float v = 0.0f;
    switch (t.dtype) {
      case DType::kF32: v = t.As<float>()[i]; break;
      case DType::kBF16: v = BF16ToF32(t.As<uint16_t>()[i]); break;
      default: v = F16ToF32(t.As<uint16_t>()[i]); break;  // kF16, the last dtype Require allows
    }
    out[i] = add + v;
  }
  return out;
}

std::string SummarizeTensorNames(const std::vector<std::string>& names) {
  std::map<std::string, int> groups;
  for (const std::string& name : names) {
    const size_t first = name.find('.');
    const size_t second = first == std::string::npos ? std::string::npos : name.find('.', first + 1);
    groups[second == std::string::npos ? name : name.substr(0, second) + ".*"]++;
  }
  std::string out;
  for (const auto& [group, count] : groups) out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", group, count);
  return out;
}

std::string RandomWeightSource::Describe() const { return fmt::format("random weights (seed {})", seed_); }

}  // namespace ember
