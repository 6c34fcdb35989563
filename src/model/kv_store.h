// The memory of the paged KV cache: what a kv::KvCacheConfig (with num_blocks set) describes.
//
// `layers_per_group` physical K and V tensors of [num_blocks, block_size, num_kv_heads,
// head_dim] in the config's dtype; model layer l uses tensor config.tensor_of_layer[l] and reads
// the block table of group config.group_of_layer[l] (kv/spec.h explains why groups share
// tensors). fp8 (e4m3) rows carry one f32 scale per (slot, KV head) for K and one for V:
// scale = amax / 448, values rounded to nearest even, so no calibration is needed.
// The block pool bookkeeping (which block belongs to whom) lives in src/kv; this class only
// holds bytes, writes new rows, hands the attention kernel a view, and exports and imports a
// request's blocks (kv/kv_transfer.h has the format).
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "core/zeroed_array.h"

#include "core/status.h"
#include "kernels/paged_attention.h"
#include "kv/spec.h"
#include "kv/kv_transfer.h"

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

  // ---- One request's KV to another store (prefill/decode disaggregation) ----
  // `block_tables[g]` is the request's block list in KV group g (what the KV manager hands the
  // runner; entries may be kNullBlock or stale where a sliding window released them) and the first
  // `num_tokens` positions are computed. Exports every entry covering them for full groups and the
  // entries the next query (at position num_tokens) reads for sliding groups, except the entries
  // below `first_token` (a multiple of the block size: the prefix the receiver already holds,
  // e.g. from its prefix cache); each must be a block of this store.
  Expected<KvExportSpans> ExportSpans(std::span<const std::vector<int32_t>> block_tables, int64_t num_tokens,
                                      int64_t first_token = 0) const;
  // Where the payload of ExportSpans(its tables, num_tokens, first_token) from a store with this
  // store's config goes in this store's blocks `block_tables`: the same layout, and spans of this
  // store in payload order. A transport that checked the sender's config (CheckKvLayoutMatches)
  // and its layout's bytes against this one's writes straight into the blocks. Errors as
  // ExportSpans', and a block repeated in the tables.
  Expected<KvImportSpans> ImportSpansFor(std::span<const std::vector<int32_t>> block_tables, int64_t num_tokens,
                                         int64_t first_token);
  // Checks `layout` (ParseKvLayout of another store's export) against this store and returns where
  // each payload byte goes: the blocks of `block_tables` at the entries the layout holds (where the
  // manager of this store gave the request blocks; other entries are not touched). Errors name the
  // mismatch: dtype, block size, heads, head_dim, groups and their layers, a missing entry the
  // next query reads, a destination entry that is null, outside the store or repeated.
  Expected<std::vector<KvDestSpan>> ImportSpans(const KvTransferLayout& layout,
                                                std::span<const std::vector<int32_t>> block_tables);
  // ExportSpans serialized into one buffer (header, then payload).
  Expected<std::vector<uint8_t>> Export(std::span<const std::vector<int32_t>> block_tables, int64_t num_tokens) const;
  // Checks an Export() buffer (truncated or oversized buffers too) and writes it into this
  // store's blocks `block_tables`; returns its layout (num_tokens says how far the request got).
  Expected<KvTransferLayout> Import(std::span<const uint8_t> bytes, std::span<const std::vector<int32_t>> block_tables);

 private:
  explicit KvStore(kv::KvCacheConfig config) : config_(std::move(config)) {}
  struct Tensor {
    // Zeroed pages committed as blocks are first written: reserving the pool touches nothing.
    ZeroedArray<uint8_t> keys, values;
    ZeroedArray<float> key_scales, value_scales;  // fp8 only
  };
  void WriteRows(const float* src, int64_t count, const int64_t* slot_mapping, uint8_t* dst, float* scales) const;
  // Bytes of `part` of the first `rows` slots of `block` in physical tensor `tensor`: a const span
  // of a const store, a writable one otherwise.
  template <typename Store>
  static auto PartBytes(Store& store, int64_t tensor, KvPart part, int32_t block, int64_t rows);
  // ExportSpans and ImportSpansFor: the layout and the spans of `store` (const: an export).
  template <typename Store>
  static auto SpansOf(Store& store, std::span<const std::vector<int32_t>> block_tables, int64_t num_tokens,
                      int64_t first_token)
      -> Expected<BasicKvSpans<std::conditional_t<std::is_const_v<Store>, const uint8_t, uint8_t>>>;

  kv::KvCacheConfig config_;
  DType dtype_ = DType::kF32;
  std::vector<Tensor> tensors_;
};

}  // namespace ember
