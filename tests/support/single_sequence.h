// Direct forward access for tests that compare a model's logits with references (golden
// fixtures, recorded hashes, KV dtype drift): one sequence through CausalLM::Forward with a
// ForwardBatch built by hand, no engine in between. Tools never use this: they run models
// through the engine (runner/local_engine.h).
//
// Owns a KvStore sized for `capacity` tokens with a trivial block table: KV group g owns blocks
// 1 + g * blocks_per_group ... in order (block 0 is the null block), so nothing is ever freed or
// shared. The logits are bitwise those the engine computes for the same tokens (batch
// invariance: tests/unit/model/batch_invariance_test.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/causal_lm.h"

namespace ember::test {

class SingleSequence {
 public:
  // A sequence of up to `capacity` tokens (clamped to the model's max_position_embeddings) with
  // K/V stored as `dtype`.
  static Expected<SingleSequence> Create(CausalLM* model, int64_t capacity, kv::KvDtype dtype,
                                         int64_t block_size = 16);

  int64_t num_tokens() const { return num_tokens_; }
  const KvStore& kv() const { return kv_; }

  // Runs `count` tokens at positions num_tokens() .. + count - 1 as one step and keeps their K/V.
  // Writes vocab_size logits per row into `logits`: for every token when all_logits, else for the
  // last one only.
  Status Append(const int32_t* tokens, int64_t count, bool all_logits, std::vector<float>* logits);

  // Layers whose hidden states the following Appends return in hidden_states(): [layers, count,
  // hidden_size] for the last Append's tokens (ForwardOutput::hidden_states).
  void set_hidden_state_layers(std::vector<int32_t> layers) { batch_.hidden_state_layers = std::move(layers); }
  const std::vector<float>& hidden_states() const { return output_.hidden_states; }

  // For the next Append only: rows (indices into its tokens, increasing) that take `embeddings`
  // ([rows.size(), hidden_size]) in place of their tokens' embeddings (ForwardBatch::embedding_rows).
  void set_input_embeddings(std::vector<int32_t> rows, std::vector<float> embeddings) {
    batch_.embedding_rows = std::move(rows);
    batch_.input_embeddings = std::move(embeddings);
  }

 private:
  SingleSequence(CausalLM* model, KvStore kv, int64_t capacity);

  CausalLM* model_;
  KvStore kv_;
  int64_t capacity_;
  int64_t num_tokens_ = 0;
  ForwardBatch batch_;  // block tables fixed at creation; the rest rebuilt per step
  ForwardOutput output_;
};

}  // namespace ember::test
