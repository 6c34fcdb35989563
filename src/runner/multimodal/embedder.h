// Puts encoder features into a step's batch: for every scheduled position that is an embedding
// position of one of its request's multimodal inputs, the batch gets that feature row as its input
// embedding (ForwardBatch::embedding_rows). Each input is encoded once, when a step first reaches
// its placeholders, and kept in the encoder cache by content hash, so the rest of a chunked
// prefill, a recompute after preemption and later requests with the same content reuse it.
#pragma once

#include <vector>

#include "core/status.h"
#include "engine/scheduler_output.h"
#include "model/forward_batch.h"
#include "runner/multimodal/encoder.h"
#include "runner/multimodal/encoder_cache.h"
#include "runner/request_state.h"

namespace ember {

class MultiModalEmbedder {
 public:
  // `encoder` (null: the model takes no media) outlives the embedder.
  MultiModalEmbedder(const MultiModalEncoder* encoder, int64_t cache_bytes);

  // `requests` are the step's in batch order, `batch` built from them (its positions and
  // query_start_loc say which positions each computes). Adds embedding rows and counts the work
  // in `stats`. An input the encoder refuses, or features of the wrong size, fail the step: the
  // frontend checked both before admitting the request.
  Status AddEmbeddings(const std::vector<const RunnerRequest*>& requests, ForwardBatch& batch,
                       MultiModalStepStats& stats);

  const EncoderCacheStats& cache_stats() const { return cache_.stats(); }

 private:
  Expected<EncoderCache::Features> FeaturesOf(const MultiModalFeature& feature, MultiModalStepStats& stats);

  const MultiModalEncoder* encoder_;
  EncoderCache cache_;
};

}  // namespace ember
