// Moving one request's KV from one KvStore to another, possibly in another process (the
// prefill/decode disaggregation issue sends these bytes over a transport): the descriptor that
// travels with the blocks, its byte layout on the wire, and the spans that let a transport read
// and write the stores' memory without an intermediate copy. KvStore::ExportSpans / ImportSpans /
// Export / Import (model/kv_store.h) produce and consume these.
//
// What moves, per KV group: every block-table entry covering the request's tokens for a full
// attention group, only the entries the next query can read for a sliding-window group (what vLLM
// moves since its hybrid-allocator connector support, reference/next_capabilities.md §3). The last
// entry carries only its valid token slots.
//
// The payload is ordered group, model layer of the group, part (K, V, then for fp8 the K and V
// scales), entry: one part of consecutive block ids is then one contiguous range of both the
// payload and the store, so CoalesceKvSpans turns a request into about groups x layers x parts
// transfers, not one per block (the descriptor count is what limits vLLM's NIXL transfers, #55434).
// Within a span the bytes are the store's own: [rows, num_kv_heads, head_dim] elements of the KV
// dtype (e4m3 codes for fp8), or [rows, num_kv_heads] f32 scales.
//
// Wire format (little-endian, version 1): a 24-byte prefix {"EMKV", u32 version, u64 header_bytes,
// u64 payload_bytes}, the layout (u32 dtype, u32 groups, i64 block_size, num_kv_heads, head_dim,
// layers_per_group, num_tokens; per group u32 kind, u32 layers, i64 window, i32 layer ids, u8
// present flag per entry), zero padding to a multiple of 64 bytes so the payload starts aligned,
// then the payload. The receiver checks every field against its own store before writing a byte.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtypes.h"
#include "core/status.h"
#include "kv/spec.h"

namespace ember {

// The element type a KvDtype stores (what a KV store's K and V tensors hold).
DType KvStorageDType(kv::KvDtype dtype);

// Which bytes of a block a span holds.
enum class KvPart : uint8_t { kKeys, kValues, kKeyScales, kValueScales };

// The descriptor of one request's exported KV.
struct KvTransferLayout {
  struct Group {
    kv::AttentionKind kind = kv::AttentionKind::kFull;
    int64_t window = 0;
    std::vector<int32_t> layers;   // the group's model layers in tensor order (KvCacheGroupSpec::layers)
    std::vector<uint8_t> present;  // [num_entries()] (always): 1 where the payload holds that entry's block
  };
  kv::KvDtype dtype = kv::KvDtype::kBF16;
  int64_t block_size = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t layers_per_group = 0;
  int64_t num_tokens = 0;  // tokens (from position 0) whose K/V the payload holds
  std::vector<Group> groups;

  // Block-table entries covering num_tokens.
  int64_t num_entries() const { return (num_tokens + block_size - 1) / block_size; }
  // Token slots of entry `entry` that hold data: block_size, fewer in the last entry.
  int64_t RowsOfEntry(int64_t entry) const { return std::min(block_size, num_tokens - entry * block_size); }
  // The parts each (layer, entry) sends, in payload order.
  std::span<const KvPart> parts() const;
  // Bytes one token slot of `part` holds.
  int64_t RowBytes(KvPart part) const;
  int64_t PayloadBytes() const;
};

// One contiguous piece of the payload: `part` of block-table entry `entry` of model layer `layer`
// (for a coalesced span, its first piece), at payload byte `offset`, in a store's memory.
template <typename Byte>
struct BasicKvSpan {
  int32_t group = 0;
  int32_t layer = 0;
  int64_t entry = 0;
  KvPart part = KvPart::kKeys;
  int64_t offset = 0;
  std::span<Byte> bytes;
};
using KvSourceSpan = BasicKvSpan<const uint8_t>;  // what an export reads
using KvDestSpan = BasicKvSpan<uint8_t>;          // where an import writes

// A descriptor and its payload as spans of a store: what KvStore::ExportSpans returns (spans of the
// source store, valid while the store lives and those blocks are not rewritten) and what
// KvStore::ImportSpansFor returns (where a matching export's payload goes in the destination).
template <typename Byte>
struct BasicKvSpans {
  KvTransferLayout layout;
  std::vector<BasicKvSpan<Byte>> spans;
};
using KvExportSpans = BasicKvSpans<const uint8_t>;
using KvImportSpans = BasicKvSpans<uint8_t>;

// The layout an export of a request's first `num_tokens` positions sends from a store with
// `config`, leaving out the entries below `first_token` (what the receiver holds): every entry of
// full-attention groups, the entries the next query reads of sliding-window groups. What
// KvStore::ExportSpans describes, without a store (for planning: the bytes a request moves).
KvTransferLayout KvLayoutFor(const kv::KvCacheConfig& config, int64_t num_tokens, int64_t first_token = 0);

// The export `all` (ExportSpans from position 0) without the entries below `first_token` (a
// multiple of the block size: what the receiver holds already): the same layout and spans as
// ExportSpans(..., first_token), without going back to the block tables.
KvExportSpans WithoutLeadingEntries(const KvExportSpans& all, int64_t first_token);

// A layout that describes `config` and no tokens' data (one entry, sent nowhere): what two
// instances exchange when they connect, so that CheckKvLayoutMatches refuses a mismatched pair
// before any request moves.
KvTransferLayout KvLayoutOfConfig(const kv::KvCacheConfig& config);

// Merges each span into the one before it when they are adjacent both in the payload and in memory.
template <typename Byte>
std::vector<BasicKvSpan<Byte>> CoalesceKvSpans(std::span<const BasicKvSpan<Byte>> spans) {
  std::vector<BasicKvSpan<Byte>> merged;
  for (const BasicKvSpan<Byte>& s : spans) {
    if (!merged.empty()) {
      BasicKvSpan<Byte>& last = merged.back();
      const auto size = static_cast<int64_t>(last.bytes.size());
      if (last.offset + size == s.offset && last.bytes.data() + size == s.bytes.data()) {
        last.bytes = std::span<Byte>(last.bytes.data(), last.bytes.size() + s.bytes.size());
        continue;
      }
    }
    merged.push_back(s);
  }
  return merged;
}

// One memory-to-memory copy of a transfer.
struct KvCopy {
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  int64_t bytes = 0;
};
// Matches the source and destination spans of one payload (each covering it in order, coalesced
// or not) into the copies that move it: what a one-sided transport (RDMA read or write) posts, and
// what an in-process move runs. Fails unless both cover the same number of bytes.
Expected<std::vector<KvCopy>> PairKvSpans(std::span<const KvSourceSpan> src, std::span<const KvDestSpan> dst);

// The 24-byte prefix a stream reader reads first to learn how many bytes follow.
inline constexpr int64_t kKvTransferPrefixBytes = 24;
struct KvTransferFrame {
  int64_t header_bytes = 0;  // prefix included; the payload starts here
  int64_t payload_bytes = 0;
};
Expected<KvTransferFrame> ParseKvTransferPrefix(std::span<const uint8_t> bytes);

std::vector<uint8_t> SerializeKvLayout(const KvTransferLayout& layout);
// Reads the header at the front of `bytes` (which may go on with the payload); sets *header_bytes.
// A truncated or self-contradicting header is DATA_LOSS, a foreign buffer INVALID_ARGUMENT, a
// newer version UNIMPLEMENTED.
Expected<KvTransferLayout> ParseKvLayout(std::span<const uint8_t> bytes, int64_t* header_bytes);
// INVALID_ARGUMENT naming the first field where `layout` (another instance's export) and this
// store's `config` disagree: dtype, block size, KV heads, head_dim, layers per group, the groups;
// or where the layout contradicts itself (present flags not one per entry).
Status CheckKvLayoutMatches(const KvTransferLayout& layout, const kv::KvCacheConfig& config);

// Header plus payload bytes of a serialized export.
int64_t KvTransferBytes(const KvTransferLayout& layout);
// Serializes `exported` into `out`, which must hold exactly KvTransferBytes(exported.layout).
Status WriteKvTransfer(const KvExportSpans& exported, std::span<uint8_t> out);

}  // namespace ember
