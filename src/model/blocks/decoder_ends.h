// The two ends every decoder shares, written once for DenseDecoder and MuseSparkModel:
// - EmbedInputs: each row's token embedding (scaled or normed as the architecture's embedding
//   module does), or the embedding the batch gives for that row (multimodal features);
// - HiddenStateTap: copies the residual stream after the layers the batch asked for;
// - RunHead: the rows the caller wants, the final norm, the output head, the logit scale and
//   tanh softcap.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/blocks/step_context.h"
#include "model/causal_lm.h"
#include "model/forward_batch.h"
#include "model/forward_output.h"
#include "model/linear.h"
#include "model/tensor_parallel.h"

namespace ember {

// The block of the vocabulary a rank's embedding table and lm_head hold (model/tensor_parallel.h's
// VocabShard): all of it in one process or when the tensor-parallel size does not divide it.
struct VocabSlice {
  ShardRange shard;
  int64_t vocab_size = 0;
  bool sharded() const { return shard.count < vocab_size; }
  static VocabSlice Whole(int64_t vocab_size) { return {{0, vocab_size}, vocab_size}; }
};

// What an architecture's token embedding module does after the table lookup. transformers does
// it inside the module (Gemma 3's scaled embedding, Muse Spark's normed embedding), so it applies
// to token rows only: an embedding given for a row (inputs_embeds) is used as it is.
struct TokenEmbedding {
  float scale = 1.0f;         // Gemma: sqrt(hidden)
  float norm_eps = -1.0f;     // >= 0: then a weightless RMSNorm (Muse Spark)
};

// out [hidden] = `token`'s embedding as the embedding module gives it (EmbedInputs' token rows).
Status EmbedToken(const Linear& table, const TokenEmbedding& embedding, int32_t token, int64_t hidden, float* out);

// residual [num_tokens, hidden] = the token embedding of each row of batch.token_ids, except
// rows in batch.embedding_rows, copied from batch.input_embeddings. With a sharded vocabulary each
// rank looks up the tokens its block holds (zeros elsewhere, given rows on rank 0 only) and one
// AllReduceSum over `comm` assembles the rows: x + 0 = x, so every row has the bits one process
// gives it; the scale and norm run after, on whole rows.
Status EmbedInputs(const Linear& table, const TokenEmbedding& embedding, const VocabSlice& vocab,
                   const ForwardBatch& batch, int64_t hidden, exec::Communicator& comm, float* residual);

class HiddenStateTap {
 public:
  // Sizes out->hidden_states for the layers `batch` asks for.
  HiddenStateTap(const ForwardBatch& batch, int64_t hidden, ForwardOutput* out);
  // Call after each decoder layer with the residual stream [num_tokens, hidden].
  void AfterLayer(int64_t layer, const float* residual);

 private:
  const std::vector<int32_t>& layers_;
  size_t next_ = 0;
  int64_t block_floats_;
  float* out_;
};

struct HeadOptions {
  float norm_eps = 1e-6f;
  const float* final_gain = nullptr;  // [hidden], ready to multiply
  float logit_scale = 1.0f;           // Muse Spark's output multiplier
  float logit_softcap = 0.0f;         // cap * tanh(x / cap); 0 = none
};

// out->logits [logits_indices.size(), vocab_size] for the rows of residual [num_tokens, lm_head
// cols] that step.batch.logits_indices asks for. With a sharded vocabulary each rank scores its
// block and an AllGather over step.comm assembles whole rows on every rank (each logit is the
// same dot product one process computes, so the bits are the same).
void RunHead(const HeadOptions& options, const Linear& lm_head, const VocabSlice& vocab, const StepContext& step,
             const float* residual, ForwardOutput* out);
// The most workspace RunHead takes for `rows` logits rows.
int64_t HeadWorkspaceBytes(int64_t rows, int64_t hidden, const VocabSlice& vocab);

// Pipeline parallelism (PipelineStage): the residual stream [count floats] from the stage before
// and to the next; the last stage's logits to the sampling rank, which receives `rows` x `vocab`
// of them into out->logits. Blocking point-to-point messages over stage.comm.
void ReceiveResidual(const PipelineStage& stage, float* residual, int64_t count);
void SendResidual(const PipelineStage& stage, const float* residual, int64_t count);
void SendLogits(const PipelineStage& stage, const ForwardOutput& out);
void ReceiveLogits(const PipelineStage& stage, int64_t rows, int64_t vocab, ForwardOutput* out);

// The most workspace a decoder's step of `tokens` tokens takes: the residual stream and the
// positions for the whole step, beside the larger of one layer (its normed input and branch
// output, plus `largest_block_bytes`, the most any of its blocks takes) and the head.
int64_t DecoderWorkspaceBytes(int64_t tokens, int64_t logit_rows, int64_t hidden, int64_t largest_block_bytes,
                              const VocabSlice& vocab);

}  // namespace ember
