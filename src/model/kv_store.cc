#include "model/kv_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"

namespace ember {

DType KvStorageDType(kv::KvDtype dtype) {
  switch (dtype) {
    case kv::KvDtype::kF32: return DType::kF32;
    case kv::KvDtype::kF16: return DType::kF16;
    case kv::KvDtype::kBF16: return DType::kBF16;
    case kv::KvDtype::kFp8E4M3: return DType::kF8E4M3;
  }
  return DType::kF32;
}

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
    t.keys.assign(bytes, 0);
    t.values.assign(bytes, 0);
    if (c.dtype == kv::KvDtype::kFp8E4M3) {
      t.key_scales.assign(rows, 0.0f);
      t.value_scales.assign(rows, 0.0f);
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
        case DType::kF16:
        case DType::kBF16: {
          auto* out = reinterpret_cast<uint16_t*>(dst) + row * d;
          for (int64_t j = 0; j < d; ++j) out[j] = dtype_ == DType::kF16 ? F32ToF16(x[j]) : F32ToBF16(x[j]);
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

}  // namespace ember
