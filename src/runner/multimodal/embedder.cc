#include "runner/multimodal/embedder.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace ember {

MultiModalEmbedder::MultiModalEmbedder(const MultiModalEncoder* encoder, int64_t cache_bytes)
    : encoder_(encoder), cache_(cache_bytes) {}

Expected<EncoderCache::Features> MultiModalEmbedder::FeaturesOf(const MultiModalFeature& feature,
                                                               MultiModalStepStats& stats) {
  if (EncoderCache::Features cached = cache_.Find(feature.hash)) {
    ++stats.cache_hits;
    return cached;
  }
  if (encoder_ == nullptr || !encoder_->Accepts(feature.modality) || feature.input == nullptr) {
    return InvalidArgument(fmt::format("this model has no {} encoder loaded", ModalityName(feature.modality)));
  }
  const auto start = std::chrono::steady_clock::now();
  Expected<std::vector<float>> rows = encoder_->Encode(*feature.input);
  stats.encode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!rows.ok()) return rows.status();
  const int64_t expected = feature.num_embeds() * encoder_->hidden_size();
  if (static_cast<int64_t>(rows->size()) != expected) {
    return Internal(fmt::format("the {} encoder produced {} values for {} placeholder positions of width {}",
                                ModalityName(feature.modality), rows->size(), feature.num_embeds(),
                                encoder_->hidden_size()));
  }
  ++stats.items_encoded;
  auto features = std::make_shared<const std::vector<float>>(std::move(*rows));
  cache_.Insert(feature.hash, features);
  return features;
}

Status MultiModalEmbedder::AddEmbeddings(const std::vector<const RunnerRequest*>& requests, ForwardBatch& batch,
                                         MultiModalStepStats& stats) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const RunnerRequest& r = *requests[i];
    if (r.mm_features.empty()) continue;
    const int64_t row0 = batch.query_start_loc[i];
    const int64_t first = batch.positions[row0];
    const int64_t end = first + (batch.query_start_loc[i + 1] - row0);
    for (const MultiModalFeature& f : r.mm_features) {
      const int64_t lo = std::max(first, f.offset);
      const int64_t hi = std::min(end, f.offset + f.length);
      if (lo >= hi) continue;
      Expected<EncoderCache::Features> features = FeaturesOf(f, stats);
      if (!features.ok()) return features.status();
      const int64_t hidden = encoder_->hidden_size();
      int64_t feature_row = f.EmbedsBefore(lo);
      for (int64_t p = lo; p < hi; ++p) {
        if (!f.IsEmbed(p)) continue;
        batch.embedding_rows.push_back(static_cast<int32_t>(row0 + p - first));
        const float* src = (*features)->data() + feature_row * hidden;
        batch.input_embeddings.insert(batch.input_embeddings.end(), src, src + hidden);
        ++feature_row;
        ++stats.embeddings;
      }
    }
  }
  return Status::Ok();
}

}  // namespace ember
