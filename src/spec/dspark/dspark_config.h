// DSparkConfig: a DSpark drafter's config.json (the Qwen3-style drafter of DeepSpec and vLLM's
// qwen3_dspark.py; src/spec/dspark/checkpoint_layout.md lists the fields and where each is read).
//
// Parsing checks the config on its own (positive sizes, heads that divide, taps increasing, a
// mask token inside the vocabulary); CheckFitsTarget checks it against the target it is to draft
// for. Both name the field and say what to change, because a drafter that does not fit its target
// would otherwise draft garbage silently (verification keeps the output right, so only speed
// would show it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::spec::dspark {

enum class MarkovHeadType : uint8_t {
  kNone,     // markov_rank 0: the base logits are the draft logits
  kVanilla,  // logits + W2 · W1[previous token]
  kGated,    // logits + g ⊙ (W2 · W1[previous token]), g from the hidden state and the embedding
};

struct DSparkConfig {
  // The drafter's transformer (Qwen3 decoder layers: q/k norms, RoPE rotate-half, SwiGLU).
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 1000000.0;
  // Per drafter layer: keys per query including itself over the context (-1: every context
  // position before the anchor), and whether the block is causal (slot j visible to slot k only
  // if j <= k) rather than bidirectional. Resolved as vLLM's _resolve_layer_attention does.
  std::vector<int64_t> layer_window;
  std::vector<bool> layer_causal;
  int64_t max_position_embeddings = 0;

  // The vocabulary the embedding and lm_head it borrows from the target cover.
  int64_t vocab_size = 0;
  // The width of each tapped target hidden state (the target's hidden_size).
  int64_t target_hidden_size = 0;
  // Target layers whose outputs are the context features, increasing (output of layer l is
  // transformers' hidden_states[l + 1]).
  std::vector<int32_t> target_layer_ids;
  // Positions per block: the anchor plus block_size - 1 mask tokens, each predicting the token
  // after it (sample-from-anchor), so a block drafts up to block_size tokens.
  int32_t block_size = 0;
  int32_t mask_token_id = -1;
  // Multiplies the draft logits (and the Markov bias), as vLLM's LogitsProcessor scale.
  float logit_scale = 1.0f;

  // Target depth the taps were trained against (DeepSpec's num_target_layers); 0: not stated.
  int64_t num_target_layers = 0;

  int64_t markov_rank = 0;
  MarkovHeadType markov_head_type = MarkovHeadType::kNone;
  bool enable_confidence_head = false;
  bool confidence_head_with_markov = false;
  // Sequential Temperature Scaling (calibration.json beside the weights): c_k = sigmoid(z_k / T_k).
  // One per block position; all 1 when the drafter ships no calibration.
  std::vector<float> confidence_temperatures;

  // The draft vocabulary (draft_vocab.json beside the weights, written by scripts/train_dspark.py):
  // token ids, most frequent first, in the drafter's training answers. The drafter may draft from
  // the first N of them only (FR-Spec's frequency-ranked draft vocabulary): its lm_head and Markov
  // bias then cost N / vocab_size of the full ones. Empty: none shipped.
  std::vector<int32_t> draft_vocab;
  // How often each draft_vocab id occurred in those answers (its "counts"; empty when the file
  // gives none): what the default draft vocabulary size is chosen from (DefaultDraftVocabSize).
  std::vector<int64_t> draft_vocab_counts;

  // The most context positions any layer reads back from a block's anchor: the widest window,
  // or -1 when some layer reads the whole context.
  int64_t context_window() const;
  int64_t kv_width() const { return num_kv_heads * head_dim; }
  int64_t q_width() const { return num_heads * head_dim; }
};

// The draft vocabulary a drafter drafts from when the speculative config does not say
// (draft_vocab_size left out): the fewest of its most frequent ids whose counts cover
// kDefaultDraftVocabCoverage of all its training answers' tokens; all it lists without counts.
// For the committed SmolLM2 drafter that is 3,729 of 19,151 ids (session 26's: 3,819 of 18,443).
// With 4,096 ids session 26's drafting step at 1 request took 1.24 instead of 1.73 ms on a Zen 3
// EPYC, and the chat benchmark's acceptance per position did not move (0.54 / 0.30 against
// 0.55 / 0.30 drafting 2 tokens; bench/results/dspark_s31). A
// token outside the list can no longer be drafted, and those are the tokens a drafter rarely guesses.
inline constexpr double kDefaultDraftVocabCoverage = 0.95;
int64_t DefaultDraftVocabSize(const DSparkConfig& config);
// The share of the training answers' tokens that the first n draft_vocab ids cover; nullopt when
// the drafter gives no counts.
std::optional<double> DraftVocabCoverage(const DSparkConfig& config, int64_t n);

// Parses config.json text; `where` names it in errors (the path).
Expected<DSparkConfig> ParseDSparkConfig(const std::string& json_text, const std::string& where);
// Reads and parses `<dir>/config.json`, and `<dir>/calibration.json` and `<dir>/draft_vocab.json`
// when present.
Expected<DSparkConfig> LoadDSparkConfig(const std::string& dir);

// What the drafter needs to know about its target.
struct DSparkTargetInfo {
  std::string architecture;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t num_layers = 0;
};

// InvalidArgument naming the field when the drafter cannot draft for `target`: hidden size,
// vocabulary, a tap beyond the target's layers, a mask token outside the vocabulary.
Status CheckFitsTarget(const DSparkConfig& config, const DSparkTargetInfo& target);

}  // namespace ember::spec::dspark
