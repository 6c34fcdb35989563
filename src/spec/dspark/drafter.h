// DSparkDrafter: the DSpark drafter's forward (reference/muse_spark.md §4.2, DeepSpec's
// Qwen3DSparkModel, vLLM's qwen3_dspark.py), on ember's kernels, for a batch of requests.
//
//   context:  c_j = hidden_norm(fc([h_{l1}(j); ...; h_{lm}(j)]))  for each verified position j,
//             per drafter layer K_j = RoPE_j(k_norm(k_proj(c_j))), V_j = v_proj(c_j), kept in
//             the request's DSparkContext (no input_layernorm on the context: it is normed by
//             hidden_norm already, as in DeepSpec and vLLM);
//   block:    rows [anchor, MASK x (block_size - 1)] at positions anchor .. anchor + block_size - 1,
//             embedded with the target's embedding table; Qwen3 decoder layers whose attention
//             reads the context K/V plus the block's own K/V (block_attention.h); the final norm;
//   logits:   base logits U_k = logit_scale * lm_head(h_k) with the target's lm_head, row k
//             predicting the token at anchor + k + 1 (sample-from-anchor); with a draft
//             vocabulary (UseDraftVocabulary) only its rows, so logits are indexed by draft id.
// The Markov and confidence heads run on top, left to right (markov_head.h).
//
// Every scratch buffer comes from the drafter's Workspace; outputs live in the drafter until the
// next ForwardBlocks. A block's result does not depend on the other blocks of the batch nor on
// how the context was appended (row-independent matmuls), so a proposer may batch freely.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/workspace.h"
#include "model/linear.h"
#include "spec/dspark/block_attention.h"
#include "spec/dspark/context_store.h"
#include "spec/dspark/dspark_config.h"
#include "spec/dspark/dspark_weights.h"

namespace ember::spec::dspark {

// What the drafter borrows from its target (never copied; must outlive the drafter): the token
// embedding as drafters read it (CausalLM::DrafterEmbedToken: Gemma's scale applied, Muse Spark's
// embedding norm not) and its lm_head. Ignored for what the drafter's checkpoint ships itself.
struct SharedTargetWeights {
  // Writes token's hidden_size floats.
  std::function<Status(int32_t token, float* out)> embed;
  const Linear* lm_head = nullptr;  // [V, target hidden]

  // A plain embedding table as the embedding (a target whose module only looks rows up).
  static SharedTargetWeights FromTable(const Linear* table, const Linear* lm_head) {
    SharedTargetWeights w;
    if (table != nullptr) w.embed = [table](int32_t token, float* out) { return table->ReadRow(token, out); };
    w.lm_head = lm_head;
    return w;
  }
};

class DSparkDrafter {
 public:
  // Checks that the shared weights match the config (vocab, hidden size).
  static Expected<std::unique_ptr<DSparkDrafter>> Create(DSparkConfig config, DSparkWeights weights,
                                                         SharedTargetWeights target);

  const DSparkConfig& config() const { return config_; }
  const DSparkWeights& weights() const { return weights_; }
  const BlockAttentionShape& attention_shape(int64_t layer) const { return attention_[layer]; }
  Workspace& workspace() { return workspace_; }

  // Drafts from these token ids only (FR-Spec's frequency-ranked draft vocabulary, from the
  // drafter's draft_vocab.json): copies of the lm_head's and the Markov W2's rows for them, so the
  // largest matmul and the Markov bias cost |ids| / vocab_size of the full ones. Verification is
  // unchanged, so outputs stay lossless; a token outside the ids is never drafted.
  Status UseDraftVocabulary(std::vector<int32_t> ids);
  // Logits are indexed by draft id: draft_vocab_size() of them; TokenOf maps one to its token id.
  // Without a draft vocabulary both are the identity over the full vocabulary.
  int64_t draft_vocab_size() const { return draft_ids_.empty() ? config_.vocab_size : static_cast<int64_t>(draft_ids_.size()); }
  int32_t TokenOf(int64_t draft_id) const { return draft_ids_.empty() ? static_cast<int32_t>(draft_id) : draft_ids_[draft_id]; }
  // The draft id of `token`, or -1 when it is outside the draft vocabulary.
  int64_t DraftIdOf(int32_t token) const { return draft_ids_.empty() ? token : draft_id_of_[token]; }
  // The Markov head's W2 over the draft vocabulary ([draft_vocab_size, rank]).
  const Linear& markov_w2() const { return draft_ids_.empty() ? weights_.markov_w2 : draft_markov_w2_; }

  // Quantizes the drafter's own matmuls (fc and every layer's projections) to Q8_0 for the
  // integer dot products (speculative config "quantization": "q8_0"): about 3x faster at a
  // block's 7 rows on AVX-512 VNNI than bf16 weights widened to f32, at the cost of Q8_0's
  // rounding (activations too are quantized per row), so drafts may differ from the bf16
  // drafter's; verification keeps outputs lossless either way.
  Status QuantizeLinearsQ8_0();

  // A new, empty context store shaped for this drafter.
  DSparkContext NewContext() const;
  // Width of one position's concatenated tap features: taps * target_hidden_size.
  int64_t feature_width() const;

  // Projects `count` positions' concatenated tap features [count, feature_width()] (the target's
  // hidden states of positions context.end() ..) and appends their K/V to `context`.
  void AppendContext(const float* features, int64_t count, DSparkContext& context);
  // The same projection for rows of any requests at once (row i at sequence position
  // positions[i]), into k and v laid out [num_layers, count, kv_width]: one matmul per weight for
  // a whole step's rows instead of one per request. Rows are independent, so each is bitwise
  // what AppendContext computes for it.
  void ProjectContext(const float* features, int64_t count, const int64_t* positions, float* k, float* v);

  struct Block {
    const DSparkContext* context = nullptr;  // must satisfy context->CanDraftAt(anchor_position)
    int32_t anchor_token = 0;
    int64_t anchor_position = 0;
    // Rows whose base logits are wanted (the first num_logits block positions), 0..block_size.
    int32_t num_logits = 0;
  };
  // Runs the backbone over every block and the lm_head over the rows asked for (the last layer's
  // queries, o_proj and MLP too: only for those rows).
  void ForwardBlocks(std::span<const Block> blocks);
  // After ForwardBlocks: the final-normed hidden state of block `b`'s position k (hidden_size)
  // and its base logits (draft_vocab_size()), for k < num_logits: the last layer computes no
  // other slot's output.
  std::span<const float> Hidden(size_t b, int64_t k) const;
  std::span<const float> BaseLogits(size_t b, int64_t k) const;

  // The workspace a context append of `rows` positions and a block forward of `blocks` blocks
  // over contexts of up to `context_size` positions take, at most.
  int64_t WorkspaceBytes(int64_t rows, int64_t blocks, int64_t context_size) const;

 private:
  DSparkDrafter(DSparkConfig config, DSparkWeights weights, SharedTargetWeights target);
  // One decoder layer over the residual stream of every slot ([blocks * block_size, hidden]):
  // keys and values from every slot; queries, o_proj and the MLP from every slot into `out` (which
  // may be `residual`), or with wanted_only from each block's first num_logits slots only, into
  // `out` as [sum num_logits, hidden] (block b's from row logits_row_[b]).
  void Layer(const DSparkLayerWeights& layer, int64_t index, std::span<const Block> blocks, bool wanted_only,
             const int64_t* positions, const float* residual, float* out);

  DSparkConfig config_;
  DSparkWeights weights_;
  SharedTargetWeights target_;
  // UseDraftVocabulary's: the ids, the inverse map (-1 outside) and the gathered rows.
  std::vector<int32_t> draft_ids_;
  std::vector<int32_t> draft_id_of_;
  Linear draft_lm_head_;
  Linear draft_markov_w2_;
  std::vector<BlockAttentionShape> attention_;  // per layer
  std::vector<float> inv_freq_;
  Workspace workspace_;
  // ForwardBlocks' outputs.
  std::vector<float> hidden_;  // [sum num_logits, hidden]
  std::vector<float> logits_;  // [sum num_logits, draft_vocab_size()]
  std::vector<int64_t> logits_row_;  // per block, its first row in logits_
};

}  // namespace ember::spec::dspark
