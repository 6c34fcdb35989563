#include "kv/kv_transfer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "core/dtypes.h"


namespace ember {

// Fields are copied in host order; the format is little-endian, like every host ember builds for.
static_assert(std::endian::native == std::endian::little, "the KV transfer format is little-endian");

namespace {

constexpr char kMagic[4] = {'E', 'M', 'K', 'V'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kHeaderAlignment = 64;  // the payload after the header starts cache-line aligned
// Bounds on header fields so that no byte count computed from them can overflow; real models are
// orders of magnitude below.
constexpr int64_t kMaxDimension = int64_t{1} << 20;
constexpr int64_t kMaxTokens = int64_t{1} << 40;

constexpr KvPart kPlainParts[] = {KvPart::kKeys, KvPart::kValues};
constexpr KvPart kFp8Parts[] = {KvPart::kKeys, KvPart::kValues, KvPart::kKeyScales, KvPart::kValueScales};

int64_t AlignUp(int64_t n) { return (n + kHeaderAlignment - 1) / kHeaderAlignment * kHeaderAlignment; }

int64_t HeaderBytes(const KvTransferLayout& layout) {
  int64_t n = kKvTransferPrefixBytes + 2 * 4 + 5 * 8;
  for (const KvTransferLayout::Group& g : layout.groups) {
    n += 4 + 4 + 8 + 4 * static_cast<int64_t>(g.layers.size()) + static_cast<int64_t>(g.present.size());
  }
  return AlignUp(n);
}

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void Put(T value) {
    PutBytes(&value, sizeof(T));
  }
  void PutBytes(const void* data, size_t size) {
    if (size == 0) return;
    const size_t at = out_->size();
    out_->resize(at + size);
    std::memcpy(out_->data() + at, data, size);
  }

 private:
  std::vector<uint8_t>* out_;
};

// Reads fields from bytes [0, end); running past `end` is a truncated header.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, int64_t pos, int64_t end) : bytes_(bytes), pos_(pos), end_(end) {}
  template <typename T>
  Status Get(T* value, std::string_view what) {
    const uint8_t* p = nullptr;
    EMBER_RETURN_IF_ERROR(Take(sizeof(T), what, &p));
    std::memcpy(value, p, sizeof(T));
    return Status::Ok();
  }
  Status Take(int64_t size, std::string_view what, const uint8_t** p) {
    if (size > end_ - pos_) {
      return DataLoss(
          fmt::format("KV transfer header: {} needs bytes [{}, {}) but the header ends at byte {}; the "
                      "header is truncated or corrupt",
                      what, pos_, pos_ + size, end_));
    }
    *p = bytes_.data() + pos_;
    pos_ += size;
    return Status::Ok();
  }
  int64_t pos() const { return pos_; }

 private:
  std::span<const uint8_t> bytes_;
  int64_t pos_;
  int64_t end_;
};

Status CheckDimension(std::string_view what, int64_t value, int64_t max) {
  if (value < 1 || value > max) {
    return DataLoss(
        fmt::format("KV transfer header: {} is {}, outside [1, {}]; the header is corrupt", what, value, max));
  }
  return Status::Ok();
}

// The payload bytes of `layout`, summed in Int.
template <typename Int>
Int SumPayloadBytes(const KvTransferLayout& layout) {
  Int total = 0;
  for (const KvTransferLayout::Group& g : layout.groups) {
    Int rows = 0;  // of one (layer, part)
    for (int64_t j = 0; j < layout.num_entries(); ++j) {
      if (g.present[j]) rows += layout.RowsOfEntry(j);
    }
    for (KvPart part : layout.parts()) total += rows * layout.RowBytes(part) * static_cast<Int>(g.layers.size());
  }
  return total;
}

// The payload size of a parsed layout, summed wide: its fields come from outside, and the bounds
// ParseKvLayout puts on them keep every product far inside 128 bits.
Expected<int64_t> CheckedPayloadBytes(const KvTransferLayout& layout) {
  const __int128 total = SumPayloadBytes<__int128>(layout);
  if (total > std::numeric_limits<int64_t>::max() / 2) {
    return DataLoss("KV transfer header describes a payload of more than 2^62 bytes; it is corrupt");
  }
  return static_cast<int64_t>(total);
}

}  // namespace

DType KvStorageDType(kv::KvDtype dtype) {
  switch (dtype) {
    case kv::KvDtype::kF32: return DType::kF32;
    case kv::KvDtype::kF16: return DType::kF16;
    case kv::KvDtype::kBF16: return DType::kBF16;
    case kv::KvDtype::kFp8E4M3: return DType::kF8E4M3;
  }
  return DType::kF32;
}

std::span<const KvPart> KvTransferLayout::parts() const {
  if (dtype == kv::KvDtype::kFp8E4M3) return kFp8Parts;
  return kPlainParts;
}

int64_t KvTransferLayout::RowBytes(KvPart part) const {
  if (part == KvPart::kKeyScales || part == KvPart::kValueScales) return num_kv_heads * int64_t{sizeof(float)};
  return DTypeBytes(KvStorageDType(dtype), num_kv_heads * head_dim);
}

int64_t KvTransferLayout::PayloadBytes() const { return SumPayloadBytes<int64_t>(*this); }

Expected<std::vector<KvCopy>> PairKvSpans(std::span<const KvSourceSpan> src, std::span<const KvDestSpan> dst) {
  auto total = [](auto spans) {
    int64_t n = 0;
    for (const auto& s : spans) n += static_cast<int64_t>(s.bytes.size());
    return n;
  };
  if (total(src) != total(dst)) {
    return InvalidArgument(
        fmt::format("KV transfer: the source spans cover {} bytes, the destination spans {}", total(src), total(dst)));
  }
  std::vector<KvCopy> copies;
  size_t i = 0, j = 0;
  int64_t in_src = 0, in_dst = 0;  // bytes of src[i] / dst[j] already paired
  while (i < src.size() && j < dst.size()) {
    const int64_t n = std::min(static_cast<int64_t>(src[i].bytes.size()) - in_src,
                               static_cast<int64_t>(dst[j].bytes.size()) - in_dst);
    if (n > 0) copies.push_back({src[i].bytes.data() + in_src, dst[j].bytes.data() + in_dst, n});
    in_src += n;
    in_dst += n;
    if (in_src == static_cast<int64_t>(src[i].bytes.size())) ++i, in_src = 0;
    if (in_dst == static_cast<int64_t>(dst[j].bytes.size())) ++j, in_dst = 0;
  }
  return copies;
}

Expected<KvTransferFrame> ParseKvTransferPrefix(std::span<const uint8_t> bytes) {
  if (static_cast<int64_t>(bytes.size()) < kKvTransferPrefixBytes) {
    return DataLoss(fmt::format("KV transfer truncated: {} bytes, less than the {}-byte prefix", bytes.size(),
                                kKvTransferPrefixBytes));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return InvalidArgument("KV transfer: the buffer does not start with \"EMKV\"; it is not an ember KV export");
  }
  uint32_t version = 0;
  uint64_t header_bytes = 0, payload_bytes = 0;
  std::memcpy(&version, bytes.data() + 4, 4);
  std::memcpy(&header_bytes, bytes.data() + 8, 8);
  std::memcpy(&payload_bytes, bytes.data() + 16, 8);
  if (version != kVersion) {
    return Unimplemented(fmt::format("KV transfer format version {}; this ember reads version {}", version, kVersion));
  }
  if (header_bytes < static_cast<uint64_t>(kKvTransferPrefixBytes) || header_bytes % kHeaderAlignment != 0 ||
      header_bytes > (uint64_t{1} << 40) || payload_bytes > (uint64_t{1} << 62)) {
    return DataLoss(fmt::format("KV transfer prefix: header of {} bytes, payload of {} bytes; the prefix is corrupt",
                                header_bytes, payload_bytes));
  }
  return KvTransferFrame{static_cast<int64_t>(header_bytes), static_cast<int64_t>(payload_bytes)};
}

std::vector<uint8_t> SerializeKvLayout(const KvTransferLayout& layout) {
  std::vector<uint8_t> out;
  const int64_t header_bytes = HeaderBytes(layout);
  out.reserve(header_bytes);
  Writer w(&out);
  w.PutBytes(kMagic, sizeof(kMagic));
  w.Put<uint32_t>(kVersion);
  w.Put<uint64_t>(header_bytes);
  w.Put<uint64_t>(layout.PayloadBytes());
  w.Put<uint32_t>(static_cast<uint32_t>(layout.dtype));
  w.Put<uint32_t>(static_cast<uint32_t>(layout.groups.size()));
  for (int64_t v :
       {layout.block_size, layout.num_kv_heads, layout.head_dim, layout.layers_per_group, layout.num_tokens}) {
    w.Put<int64_t>(v);
  }
  for (const KvTransferLayout::Group& g : layout.groups) {
    w.Put<uint32_t>(static_cast<uint32_t>(g.kind));
    w.Put<uint32_t>(static_cast<uint32_t>(g.layers.size()));
    w.Put<int64_t>(g.window);
    for (int32_t layer : g.layers) w.Put<int32_t>(layer);
    w.PutBytes(g.present.data(), g.present.size());
  }
  out.resize(header_bytes, 0);
  return out;
}

Expected<KvTransferLayout> ParseKvLayout(std::span<const uint8_t> bytes, int64_t* header_bytes) {
  EMBER_ASSIGN_OR_RETURN(const KvTransferFrame frame, ParseKvTransferPrefix(bytes));
  if (frame.header_bytes > static_cast<int64_t>(bytes.size())) {
    return DataLoss(
        fmt::format("KV transfer truncated: the header is {} bytes, the buffer {}", frame.header_bytes, bytes.size()));
  }
  Reader r(bytes, kKvTransferPrefixBytes, frame.header_bytes);
  KvTransferLayout layout;
  uint32_t dtype = 0, num_groups = 0;
  EMBER_RETURN_IF_ERROR(r.Get(&dtype, "the KV dtype"));
  EMBER_RETURN_IF_ERROR(r.Get(&num_groups, "the group count"));
  if (dtype > static_cast<uint32_t>(kv::KvDtype::kFp8E4M3)) {
    return DataLoss(fmt::format("KV transfer header: unknown KV dtype code {}", dtype));
  }
  layout.dtype = static_cast<kv::KvDtype>(dtype);
  EMBER_RETURN_IF_ERROR(r.Get(&layout.block_size, "the block size"));
  EMBER_RETURN_IF_ERROR(r.Get(&layout.num_kv_heads, "the KV head count"));
  EMBER_RETURN_IF_ERROR(r.Get(&layout.head_dim, "head_dim"));
  EMBER_RETURN_IF_ERROR(r.Get(&layout.layers_per_group, "the layers per group"));
  EMBER_RETURN_IF_ERROR(r.Get(&layout.num_tokens, "the token count"));
  EMBER_RETURN_IF_ERROR(CheckDimension("the block size", layout.block_size, kMaxDimension));
  EMBER_RETURN_IF_ERROR(CheckDimension("the KV head count", layout.num_kv_heads, kMaxDimension));
  EMBER_RETURN_IF_ERROR(CheckDimension("head_dim", layout.head_dim, kMaxDimension));
  EMBER_RETURN_IF_ERROR(CheckDimension("the layers per group", layout.layers_per_group, kMaxDimension));
  EMBER_RETURN_IF_ERROR(CheckDimension("the token count", layout.num_tokens, kMaxTokens));
  EMBER_RETURN_IF_ERROR(CheckDimension("the group count", num_groups, kMaxDimension));
  for (uint32_t g = 0; g < num_groups; ++g) {
    KvTransferLayout::Group group;
    uint32_t kind = 0, num_layers = 0;
    const std::string where = fmt::format("group {}", g);
    EMBER_RETURN_IF_ERROR(r.Get(&kind, where + "'s attention kind"));
    EMBER_RETURN_IF_ERROR(r.Get(&num_layers, where + "'s layer count"));
    EMBER_RETURN_IF_ERROR(r.Get(&group.window, where + "'s window"));
    if (kind > static_cast<uint32_t>(kv::AttentionKind::kSlidingWindow)) {
      return DataLoss(fmt::format("KV transfer header: {} has unknown attention kind {}", where, kind));
    }
    group.kind = static_cast<kv::AttentionKind>(kind);
    if (num_layers < 1 || num_layers > layout.layers_per_group) {
      return DataLoss(fmt::format("KV transfer header: {} has {} layers, outside [1, {}] (the layers per group)", where,
                                  num_layers, layout.layers_per_group));
    }
    const uint8_t* p = nullptr;
    EMBER_RETURN_IF_ERROR(r.Take(4 * int64_t{num_layers}, where + "'s layer ids", &p));
    group.layers.resize(num_layers);
    std::memcpy(group.layers.data(), p, 4 * size_t{num_layers});
    EMBER_RETURN_IF_ERROR(r.Take(layout.num_entries(), where + "'s present flags", &p));
    group.present.assign(p, p + layout.num_entries());
    layout.groups.push_back(std::move(group));
  }
  if (AlignUp(r.pos()) != frame.header_bytes) {
    return DataLoss(
        fmt::format("KV transfer header: its fields end at byte {}, but the prefix says the header is {} "
                    "bytes; the header is corrupt",
                    r.pos(), frame.header_bytes));
  }
  EMBER_ASSIGN_OR_RETURN(const int64_t payload_bytes, CheckedPayloadBytes(layout));
  if (payload_bytes != frame.payload_bytes) {
    return DataLoss(fmt::format("KV transfer header: its layout describes a {}-byte payload but the prefix says {}",
                                payload_bytes, frame.payload_bytes));
  }
  *header_bytes = frame.header_bytes;
  return layout;
}

Status CheckKvLayoutMatches(const KvTransferLayout& layout, const kv::KvCacheConfig& config) {
  auto mismatch = [](std::string_view what, auto theirs, auto ours) {
    return InvalidArgument(
        fmt::format("KV import: the export has {} {} but this KV store has {}; both instances need "
                    "the same model, --kv-cache-dtype and block size",
                    what, theirs, ours));
  };
  if (layout.dtype != config.dtype) {
    return mismatch("KV dtype", kv::KvDtypeName(layout.dtype), kv::KvDtypeName(config.dtype));
  }
  if (layout.block_size != config.block_size) return mismatch("block size", layout.block_size, config.block_size);
  if (layout.num_kv_heads != config.num_kv_heads) return mismatch("KV heads", layout.num_kv_heads, config.num_kv_heads);
  if (layout.head_dim != config.head_dim) return mismatch("head_dim", layout.head_dim, config.head_dim);
  if (layout.layers_per_group != config.layers_per_group) {
    return mismatch("layers per group", layout.layers_per_group, config.layers_per_group);
  }
  if (layout.groups.size() != config.groups.size()) {
    return mismatch("KV groups", layout.groups.size(), config.groups.size());
  }
  for (size_t g = 0; g < config.groups.size(); ++g) {
    const KvTransferLayout::Group& theirs = layout.groups[g];
    const kv::KvCacheGroupSpec& ours = config.groups[g];
    const bool sliding = ours.kind == kv::AttentionKind::kSlidingWindow;
    if (theirs.kind != ours.kind || (sliding && theirs.window != ours.window)) {
      auto describe = [](kv::AttentionKind kind, int64_t window) {
        return kind == kv::AttentionKind::kFull ? std::string("full attention")
                                                : fmt::format("sliding window {}", window);
      };
      return mismatch(fmt::format("in group {}", g), describe(theirs.kind, theirs.window),
                      describe(ours.kind, ours.window));
    }
    if (static_cast<int64_t>(theirs.present.size()) != layout.num_entries()) {
      return InvalidArgument(fmt::format("KV import: group {} has {} present flags for {} entries", g,
                                         theirs.present.size(), layout.num_entries()));
    }
    if (!std::equal(theirs.layers.begin(), theirs.layers.end(), ours.layers.begin(), ours.layers.end())) {
      return mismatch(fmt::format("in group {} layers", g), fmt::format("[{}]", fmt::join(theirs.layers, ", ")),
                      fmt::format("[{}]", fmt::join(ours.layers, ", ")));
    }
  }
  return Status::Ok();
}

KvTransferLayout KvLayoutFor(const kv::KvCacheConfig& config, int64_t num_tokens, int64_t first_token) {
  KvTransferLayout layout;
  layout.dtype = config.dtype;
  layout.block_size = config.block_size;
  layout.num_kv_heads = config.num_kv_heads;
  layout.head_dim = config.head_dim;
  layout.layers_per_group = config.layers_per_group;
  layout.num_tokens = num_tokens;
  const int64_t entries = layout.num_entries();
  for (const kv::KvCacheGroupSpec& spec : config.groups) {
    KvTransferLayout::Group& group = layout.groups.emplace_back();
    group.kind = spec.kind;
    group.window = spec.window;
    group.layers.assign(spec.layers.begin(), spec.layers.end());
    group.present.assign(entries, 0);
    const int64_t skipped = spec.kind == kv::AttentionKind::kFull
                                ? 0
                                : kv::SlidingWindowSkippedBlocks(spec.window, config.block_size, num_tokens);
    for (int64_t j = std::max(skipped, first_token / config.block_size); j < entries; ++j) group.present[j] = 1;
  }
  return layout;
}

KvExportSpans WithoutLeadingEntries(const KvExportSpans& all, int64_t first_token) {
  KvExportSpans out;
  out.layout = all.layout;
  const int64_t first_entry = first_token / all.layout.block_size;
  for (KvTransferLayout::Group& group : out.layout.groups) {
    std::fill(group.present.begin(), group.present.begin() + std::min<int64_t>(first_entry, group.present.size()), 0);
  }
  int64_t offset = 0;
  for (const KvSourceSpan& span : all.spans) {
    if (span.entry < first_entry) continue;
    KvSourceSpan& kept = out.spans.emplace_back(span);
    kept.offset = offset;
    offset += static_cast<int64_t>(span.bytes.size());
  }
  return out;
}

KvTransferLayout KvLayoutOfConfig(const kv::KvCacheConfig& config) {
  KvTransferLayout layout = KvLayoutFor(config, /*num_tokens=*/1);
  for (KvTransferLayout::Group& group : layout.groups) group.present.assign(1, 0);
  return layout;
}

int64_t KvTransferBytes(const KvTransferLayout& layout) { return HeaderBytes(layout) + layout.PayloadBytes(); }

Status WriteKvTransfer(const KvExportSpans& exported, std::span<uint8_t> out) {
  const int64_t need = KvTransferBytes(exported.layout);
  if (static_cast<int64_t>(out.size()) != need) {
    return InvalidArgument(fmt::format("KV export: the buffer is {} bytes, the export {}", out.size(), need));
  }
  const std::vector<uint8_t> header = SerializeKvLayout(exported.layout);
  std::memcpy(out.data(), header.data(), header.size());
  for (const KvSourceSpan& s : exported.spans) {
    std::memcpy(out.data() + header.size() + s.offset, s.bytes.data(), s.bytes.size());
  }
  return Status::Ok();
}

}  // namespace ember
