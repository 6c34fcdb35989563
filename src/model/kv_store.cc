#include "model/kv_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "core/dtype_rows.h"

namespace ember {

namespace {

// Calls visit(group, tensor, entry, part, rows) for every piece of `layout`'s payload, in payload
// order (kv/kv_transfer.h): group, layer of the group, part, present entry.
template <typename Visit>
void ForEachPiece(const KvTransferLayout& layout, Visit visit) {
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    const KvTransferLayout::Group& group = layout.groups[g];
    for (size_t tensor = 0; tensor < group.layers.size(); ++tensor) {
      for (KvPart part : layout.parts()) {
        for (int64_t j = 0; j < layout.num_entries(); ++j) {
          if (!group.present[j]) continue;
          visit(static_cast<int32_t>(g), static_cast<int64_t>(tensor), j, part, layout.RowsOfEntry(j));
        }
      }
    }
  }
}

// Entries before this one are not sent: no query at a position >= num_tokens reads them.
int64_t FirstSentEntry(const kv::KvCacheGroupSpec& group, int64_t block_size, int64_t num_tokens) {
  if (group.kind == kv::AttentionKind::kFull) return 0;
  return kv::SlidingWindowSkippedBlocks(group.window, block_size, num_tokens);
}

std::string Positions(int64_t entry, int64_t block_size) {
  return fmt::format("positions [{}, {})", entry * block_size, (entry + 1) * block_size);
}

}  // namespace

Expected<KvStore> KvStore::Create(kv::KvCacheConfig config) {
  if (config.num_blocks <= 0 || config.block_size <= 0 || config.num_kv_heads <= 0 || config.head_dim <= 0 ||
      config.layers_per_group <= 0) {
    return InvalidArgument(fmt::format(
        "KV store: num_blocks {}, block_size {}, num_kv_heads {}, head_dim {}, layers_per_group {} must all be "
        "positive (set num_blocks from NumBlocksForBudget)",
        config.num_blocks, config.block_size, config.num_kv_heads, config.head_dim, config.layers_per_group));
  }
  if (config.group_of_layer.size() != config.tensor_of_layer.size()) {
    return InvalidArgument("KV store: group_of_layer and tensor_of_layer differ in length");
  }
  for (size_t l = 0; l < config.tensor_of_layer.size(); ++l) {
    if (config.tensor_of_layer[l] < 0 || config.tensor_of_layer[l] >= config.layers_per_group ||
        config.group_of_layer[l] < 0 || config.group_of_layer[l] >= static_cast<int>(config.groups.size())) {
      return InvalidArgument(fmt::format("KV store: layer {} maps to tensor {} of group {}", l,
                                         config.tensor_of_layer[l], config.group_of_layer[l]));
    }
  }
  KvStore store(std::move(config));
  const kv::KvCacheConfig& c = store.config_;
  store.dtype_ = KvStorageDType(c.dtype);
  const int64_t rows = c.num_blocks * c.block_size * c.num_kv_heads;
  const auto bytes = static_cast<size_t>(DTypeBytes(store.dtype_, rows * c.head_dim));
  store.tensors_.resize(c.layers_per_group);
  for (Tensor& t : store.tensors_) {
    t.keys = ZeroedArray<uint8_t>(bytes);
    t.values = ZeroedArray<uint8_t>(bytes);
    if (c.dtype == kv::KvDtype::kFp8E4M3) {
      t.key_scales = ZeroedArray<float>(static_cast<size_t>(rows));
      t.value_scales = ZeroedArray<float>(static_cast<size_t>(rows));
    }
  }
  return store;
}

int64_t KvStore::bytes() const {
  int64_t total = 0;
  for (const Tensor& t : tensors_) {
    total += static_cast<int64_t>(t.keys.size() + t.values.size() +
                                  (t.key_scales.size() + t.value_scales.size()) * sizeof(float));
  }
  return total;
}

void KvStore::WriteRows(const float* src, int64_t count, const int64_t* slot_mapping, uint8_t* dst,
                        float* scales) const {
  const int64_t heads = config_.num_kv_heads;
  const int64_t d = config_.head_dim;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t slot = slot_mapping[i];
    if (slot < 0) continue;
    EMBER_CHECK(slot < num_slots(), "KV slot {} outside {} slots", slot, num_slots());
    for (int64_t h = 0; h < heads; ++h) {
      const float* x = src + (i * heads + h) * d;
      const int64_t row = slot * heads + h;
      switch (dtype_) {
        case DType::kF32: std::memcpy(dst + row * d * 4, x, static_cast<size_t>(d) * 4); break;
        case DType::kF16: F32ToF16Row(x, d, reinterpret_cast<uint16_t*>(dst) + row * d); break;
        case DType::kBF16: {
          auto* out = reinterpret_cast<uint16_t*>(dst) + row * d;
          for (int64_t j = 0; j < d; ++j) out[j] = F32ToBF16(x[j]);
          break;
        }
        case DType::kF8E4M3: {
          float amax = 0.0f;
          for (int64_t j = 0; j < d; ++j) amax = std::max(amax, std::fabs(x[j]));
          // amax maps to e4m3's largest finite value; an all-zero row keeps scale 0 and zero codes.
          const float scale = amax / 448.0f;
          scales[row] = scale;
          uint8_t* out = dst + row * d;
          for (int64_t j = 0; j < d; ++j) out[j] = scale > 0.0f ? F32ToF8E4M3(x[j] / scale, /*saturate=*/true) : 0;
          break;
        }
        default: EMBER_CHECK(false, "KV dtype {}", DTypeName(dtype_));
      }
    }
  }
}

void KvStore::Write(int64_t layer, const float* k, const float* v, int64_t count, const int64_t* slot_mapping) {
  EMBER_CHECK(layer >= 0 && layer < static_cast<int64_t>(config_.tensor_of_layer.size()), "layer {}", layer);
  Tensor& t = tensors_[config_.tensor_of_layer[layer]];
  WriteRows(k, count, slot_mapping, t.keys.data(), t.key_scales.data());
  WriteRows(v, count, slot_mapping, t.values.data(), t.value_scales.data());
}

kernels::PagedKvView KvStore::View(int64_t layer) const {
  EMBER_CHECK(layer >= 0 && layer < static_cast<int64_t>(config_.tensor_of_layer.size()), "layer {}", layer);
  const Tensor& t = tensors_[config_.tensor_of_layer[layer]];
  kernels::PagedKvView view;
  view.dtype = dtype_;
  view.keys = t.keys.data();
  view.values = t.values.data();
  view.key_scales = t.key_scales.empty() ? nullptr : t.key_scales.data();
  view.value_scales = t.value_scales.empty() ? nullptr : t.value_scales.data();
  view.num_blocks = config_.num_blocks;
  view.block_size = config_.block_size;
  view.num_kv_heads = config_.num_kv_heads;
  view.head_dim = config_.head_dim;
  return view;
}

template <typename Store>
auto KvStore::PartBytes(Store& store, int64_t tensor, KvPart part, int32_t block, int64_t rows) {
  auto& t = store.tensors_[tensor];
  const kv::KvCacheConfig& c = store.config_;
  const int64_t first_row = int64_t{block} * c.block_size * c.num_kv_heads;  // (slot, KV head) rows before it
  const int64_t num_rows = rows * c.num_kv_heads;
  using Byte = std::conditional_t<std::is_const_v<Store>, const uint8_t, uint8_t>;
  if (part == KvPart::kKeys || part == KvPart::kValues) {
    auto& bytes = part == KvPart::kKeys ? t.keys : t.values;
    return std::span<Byte>(bytes.data() + DTypeBytes(store.dtype_, first_row * c.head_dim),
                           static_cast<size_t>(DTypeBytes(store.dtype_, num_rows * c.head_dim)));
  }
  auto& scales = part == KvPart::kKeyScales ? t.key_scales : t.value_scales;
  return std::span<Byte>(reinterpret_cast<Byte*>(scales.data() + first_row),
                         static_cast<size_t>(num_rows) * sizeof(float));
}

template <typename Store>
auto KvStore::SpansOf(Store& store, std::span<const std::vector<int32_t>> block_tables, int64_t num_tokens,
                      int64_t first_token) -> Expected<BasicKvSpans<std::conditional_t<std::is_const_v<Store>, const uint8_t, uint8_t>>> {
  using Byte = std::conditional_t<std::is_const_v<Store>, const uint8_t, uint8_t>;
  const std::string_view what = std::is_const_v<Store> ? "KV export" : "KV import";
  const kv::KvCacheConfig& c = store.config_;
  if (block_tables.size() != c.groups.size()) {
    return InvalidArgument(
        fmt::format("{}: {} block tables for {} KV groups", what, block_tables.size(), c.groups.size()));
  }
  if (num_tokens <= 0) return InvalidArgument(fmt::format("{}: {} tokens; move at least one", what, num_tokens));
  if (first_token < 0 || first_token % c.block_size != 0 || first_token >= num_tokens) {
    return InvalidArgument(fmt::format("{}: the receiver's {} held tokens must be a multiple of the block size {} "
                                       "below the {} moved",
                                       what, first_token, c.block_size, num_tokens));
  }
  BasicKvSpans<Byte> out;
  out.layout = KvLayoutFor(c, num_tokens, first_token);
  const KvTransferLayout& layout = out.layout;
  const int64_t entries = layout.num_entries();
  for (size_t g = 0; g < c.groups.size(); ++g) {
    const std::vector<int32_t>& table = block_tables[g];
    if (static_cast<int64_t>(table.size()) < entries) {
      return InvalidArgument(fmt::format("{}: group {}'s block table has {} entries; {} tokens need {}", what, g,
                                         table.size(), num_tokens, entries));
    }
    for (int64_t j = 0; j < entries; ++j) {
      if (!layout.groups[g].present[j]) continue;
      if (table[j] == kv::kNullBlock || table[j] < 0 || table[j] >= c.num_blocks) {
        return InvalidArgument(
            fmt::format("{}: group {} entry {} ({}) is block {}, but the next query reads it: it must "
                        "be one of blocks 1..{} of this store",
                        what, g, j, Positions(j, c.block_size), table[j], c.num_blocks - 1));
      }
    }
  }
  int64_t offset = 0;
  ForEachPiece(layout, [&](int32_t g, int64_t tensor, int64_t j, KvPart part, int64_t rows) {
    const std::span<Byte> bytes = PartBytes(store, tensor, part, block_tables[g][j], rows);
    out.spans.push_back({g, layout.groups[g].layers[tensor], j, part, offset, bytes});
    offset += static_cast<int64_t>(bytes.size());
  });
  return out;
}

Expected<KvExportSpans> KvStore::ExportSpans(std::span<const std::vector<int32_t>> block_tables, int64_t num_tokens,
                                             int64_t first_token) const {
  return SpansOf(*this, block_tables, num_tokens, first_token);
}

Expected<KvImportSpans> KvStore::ImportSpansFor(std::span<const std::vector<int32_t>> block_tables,
                                                int64_t num_tokens, int64_t first_token) {
  EMBER_ASSIGN_OR_RETURN(KvImportSpans spans, SpansOf(*this, block_tables, num_tokens, first_token));
  std::vector<uint8_t> used(config_.num_blocks, 0);
  for (const KvDestSpan& s : spans.spans) {
    if (s.part != KvPart::kKeys || s.layer != spans.layout.groups[s.group].layers[0]) continue;
    const int32_t block = block_tables[s.group][s.entry];
    if (used[block]++) {
      return InvalidArgument(fmt::format("KV import: block {} appears twice in the destination block tables", block));
    }
  }
  return spans;
}

Expected<std::vector<KvDestSpan>> KvStore::ImportSpans(const KvTransferLayout& layout,
                                                       std::span<const std::vector<int32_t>> block_tables) {
  EMBER_RETURN_IF_ERROR(CheckKvLayoutMatches(layout, config_));
  const kv::KvCacheConfig& c = config_;
  if (block_tables.size() != c.groups.size()) {
    return InvalidArgument(
        fmt::format("KV import: {} block tables for {} KV groups", block_tables.size(), c.groups.size()));
  }
  const int64_t entries = layout.num_entries();
  std::vector<uint8_t> used(c.num_blocks, 0);
  for (size_t g = 0; g < c.groups.size(); ++g) {
    const std::vector<uint8_t>& present = layout.groups[g].present;
    const std::vector<int32_t>& table = block_tables[g];
    const int64_t first_read = FirstSentEntry(c.groups[g], c.block_size, layout.num_tokens);
    for (int64_t j = 0; j < entries; ++j) {
      if (!present[j]) {
        if (j < first_read) continue;
        return InvalidArgument(
            fmt::format("KV import: the export lacks group {} entry {} ({}), which the next query reads; "
                        "decoding would read stale KV",
                        g, j, Positions(j, c.block_size)));
      }
      if (j >= static_cast<int64_t>(table.size())) {
        return InvalidArgument(fmt::format("KV import: group {}'s block table has {} entries; the export's {} "
                                           "tokens need {}",
                                           g, table.size(), layout.num_tokens, entries));
      }
      const int32_t block = table[j];
      if (block == kv::kNullBlock || block < 0 || block >= c.num_blocks) {
        return InvalidArgument(
            fmt::format("KV import: group {} entry {} ({}) is block {}; the export holds it, so it must be "
                        "one of blocks 1..{} of this store",
                        g, j, Positions(j, c.block_size), block, c.num_blocks - 1));
      }
      if (used[block]++) {
        return InvalidArgument(fmt::format("KV import: block {} appears twice in the destination block tables", block));
      }
    }
  }
  std::vector<KvDestSpan> spans;
  int64_t offset = 0;
  ForEachPiece(layout, [&](int32_t g, int64_t tensor, int64_t j, KvPart part, int64_t rows) {
    const std::span<uint8_t> bytes = PartBytes(*this, tensor, part, block_tables[g][j], rows);
    spans.push_back({g, layout.groups[g].layers[tensor], j, part, offset, bytes});
    offset += static_cast<int64_t>(bytes.size());
  });
  return spans;
}

Expected<std::vector<uint8_t>> KvStore::Export(std::span<const std::vector<int32_t>> block_tables,
                                               int64_t num_tokens) const {
  EMBER_ASSIGN_OR_RETURN(const KvExportSpans exported, ExportSpans(block_tables, num_tokens));
  std::vector<uint8_t> bytes(KvTransferBytes(exported.layout));
  EMBER_RETURN_IF_ERROR(WriteKvTransfer(exported, bytes));
  return bytes;
}

Expected<KvTransferLayout> KvStore::Import(std::span<const uint8_t> bytes,
                                           std::span<const std::vector<int32_t>> block_tables) {
  int64_t header_bytes = 0;
  EMBER_ASSIGN_OR_RETURN(KvTransferLayout layout, ParseKvLayout(bytes, &header_bytes));
  const int64_t payload = static_cast<int64_t>(bytes.size()) - header_bytes;
  if (payload < layout.PayloadBytes()) {
    return DataLoss(fmt::format("KV import truncated: the payload needs {} bytes after the {}-byte header, the "
                                "buffer holds {}",
                                layout.PayloadBytes(), header_bytes, payload));
  }
  if (payload > layout.PayloadBytes()) {
    return InvalidArgument(fmt::format("KV import: {} bytes follow the {}-byte payload; the buffer is not one export",
                                       payload - layout.PayloadBytes(), layout.PayloadBytes()));
  }
  EMBER_ASSIGN_OR_RETURN(const std::vector<KvDestSpan> spans, ImportSpans(layout, block_tables));
  for (const KvDestSpan& s : spans) std::memcpy(s.bytes.data(), bytes.data() + header_bytes + s.offset, s.bytes.size());
  return layout;
}

}  // namespace ember
