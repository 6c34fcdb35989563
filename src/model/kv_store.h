// The memory of the paged KV cache: what a kv::KvCacheConfig (with num_blocks set) describes.
//
// `layers_per_group` physical K and V tensors of [num_blocks, block_size, num_kv_heads,
// head_dim] in the config's dtype; model layer l uses tensor config.tensor_of_layer[l] and reads
// the block table of group config.group_of_layer[l] (kv/spec.h explains why groups share
// tensors). fp8 (e4m3) rows carry one f32 scale per (slot, KV head) for K and one for V:
// scale = amax / 448, values rounded to nearest even, so no calibration is needed.
// The block pool bookkeeping (which block belongs to whom) lives in src/kv; this class only
// holds bytes, writes new rows and hands the attention kernel a view.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/paged_attention.h"
#include "kv/spec.h"

namespace ember {

class KvStore {
 public:
  // Allocates (zeroed) storage for config.num_blocks blocks. Errors name the bad field.
  static Expected<KvStore> Create(kv::KvCacheConfig config);

  const kv::KvCacheConfig& config() const { return config_; }
  int64_t num_slots() const { return config_.num_blocks * config_.block_size; }
  // Bytes held (K, V and fp8 scales over all tensors).
  int64_t bytes() const;

  // Writes `count` new K and V rows (each [num_kv_heads * head_dim] f32) of model layer `layer`
  // to the slots in slot_mapping (block * block_size + offset); slot -1 skips the row (vLLM's
  // padding convention). Converts to the stored dtype.
  void Write(int64_t layer, const float* k, const float* v, int64_t count, const int64_t* slot_mapping);
  // What the attention kernel reads for model layer `layer`.
  kernels::PagedKvView View(int64_t layer) const;

 private:
  explicit KvStore(kv::KvCacheConfig config) : config_(std::move(config)) {}
  struct Tensor {
    std::vector<uint8_t> keys, values;
    std::vector<float> key_scales, value_scales;  // fp8 only
  };
  void WriteRows(const float* src, int64_t count, const int64_t* slot_mapping, uint8_t* dst, float* scales) const;

  kv::KvCacheConfig config_;
  DType dtype_ = DType::kF32;
  std::vector<Tensor> tensors_;
};

// The element type a KvDtype stores.
DType KvStorageDType(kv::KvDtype dtype);

}  // namespace ember
