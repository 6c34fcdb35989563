// One sequence through the batched, paged Forward: what tools (generate, chat, perplexity,
// bench) and tests that run a single prompt use instead of building a ForwardBatch by hand.
//
// Owns a KvStore sized for `capacity` tokens with a trivial block table: KV group g owns blocks
// 1 + g * blocks_per_group ... in order (block 0 is the null block), so nothing is ever freed or
// shared. The engine uses src/kv's block manager instead.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/causal_lm.h"

namespace ember {

class Sequence {
 public:
  // A sequence of up to `capacity` tokens (clamped to the model's max_position_embeddings) with
  // K/V stored as `dtype`.
  static Expected<Sequence> Create(CausalLM* model, int64_t capacity, kv::KvDtype dtype, int64_t block_size = 16);

  int64_t num_tokens() const { return num_tokens_; }
  int64_t capacity() const { return capacity_; }
  const KvStore& kv() const { return kv_; }

  // Runs `count` tokens at positions num_tokens() .. + count - 1 as one step and keeps their K/V.
  // Writes vocab_size logits per row into `logits`: for every token when all_logits, else for the
  // last one only.
  Status Append(const int32_t* tokens, int64_t count, bool all_logits, std::vector<float>* logits);
  // Forgets every token (the memory is kept).
  void Clear() { num_tokens_ = 0; }

 private:
  Sequence(CausalLM* model, KvStore kv, int64_t capacity);

  CausalLM* model_;
  KvStore kv_;
  int64_t capacity_;
  int64_t blocks_per_group_;
  int64_t num_tokens_ = 0;
  ForwardBatch batch_;  // reused across steps
  ForwardOutput output_;
};

}  // namespace ember
