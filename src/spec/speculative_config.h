// `--speculative-config`: vLLM's JSON shape, e.g.
//   {"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4,"prompt_lookup_min":2}
//   {"method":"suffix","num_speculative_tokens":8}
//   {"method":"draft_model","model":"/path/draft.gguf","num_speculative_tokens":4}
//   {"method":"dspark","model":"/path/drafter","num_speculative_tokens":7,
//    "draft_sample_method":"greedy","enable_adaptive_verification":true}
// Parse() rejects unknown methods, unknown fields and out-of-range values with a message naming
// the field, so a typo is a startup error rather than speculation silently off.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ember::spec {

inline constexpr int32_t kMaxSpeculativeTokens = 16;

enum class Method : uint8_t { kNgram, kSuffix, kDraftModel, kDSpark };

// dspark's draft_sample_method: argmax drafts (verified one-hot), or drafts sampled from the
// drafter's softmax(l / T) at the request's temperature and verified with min(1, p/q) (greedy
// requests draft the argmax either way).
enum class DraftSampleMethod : uint8_t { kGreedy, kProbabilistic };
std::string_view MethodName(Method method);

struct SpeculativeConfig {
  Method method = Method::kNgram;
  // The most tokens verified per request per step; adaptive speculation may use fewer.
  int32_t num_speculative_tokens = 0;
  // Off: always verify num_speculative_tokens (when the proposer has that many). For experiments
  // and for tests that need a fixed width; the default measures what pays.
  bool adaptive = true;

  // ngram (prompt lookup): match the last n tokens, n from prompt_lookup_max down to _min.
  int32_t prompt_lookup_min = 1;
  int32_t prompt_lookup_max = 4;

  // suffix decoding (vLLM's `suffix`, ArcticInference): a suffix tree per request and one over
  // the outputs of recent requests. JSON names as vLLM's: suffix_decoding_max_tree_depth, ...
  int32_t suffix_max_tree_depth = 24;          // longest pattern + continuation kept
  int32_t suffix_max_cached_requests = 10000;  // completed requests kept in the global tree
  float suffix_max_spec_factor = 1.0f;         // draft at most factor * match length tokens
  float suffix_min_token_prob = 0.1f;          // stop a draft at a continuation rarer than this

  // draft_model: a model file with the target's vocabulary; dspark: the drafter's directory.
  std::string model;

  // dspark (DSpark's block drafter, spec/dspark): `num_speculative_tokens` at most its block size.
  DraftSampleMethod draft_sample_method = DraftSampleMethod::kGreedy;
  // > 0: a draft ends before its first position whose confidence is below this (llama.cpp's
  // --spec-draft-conf-min). vLLM's `enable_adaptive_verification` sets `adaptive` above.
  float draft_confidence_threshold = 0.0f;
  // Draft from the N most frequent tokens of the drafter's draft_vocab.json (FR-Spec): -1 (left
  // out) those covering 95% of its training answers' tokens (dspark::DefaultDraftVocabSize; all
  // it lists when it gives no counts, the full vocabulary without the file), 0 the full vocabulary.
  int32_t draft_vocab_size = -1;
  // vLLM's speculative_config "quantization": "q8_0" (the default) quantizes the drafter's own
  // matmuls to GGUF Q8_0 at load; "none" keeps its weights as given (what its torch reference
  // computes). Q8_0 by default because a drafting step reads all of the drafter's weights for a
  // few rows: the SmolLM2 drafter's step at 1 request took 1.4 ms instead of 2.3 ms (its target's
  // step: 3.8 ms), with the same acceptance (1.86 against 1.85 tokens per verification step on
  // its held-out prompts, DSparkSpecDecode.SmolLM2TrainedDrafter*).
  std::string quantization = "q8_0";
};

// Parses the JSON text of --speculative-config. Errors name the field and the allowed range.
Expected<SpeculativeConfig> ParseSpeculativeConfig(std::string_view json);

}  // namespace ember::spec
