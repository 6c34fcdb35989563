// `--speculative-config`: vLLM's JSON shape, e.g.
//   {"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4,"prompt_lookup_min":2}
//   {"method":"suffix","num_speculative_tokens":8}
//   {"method":"draft_model","model":"/path/draft.gguf","num_speculative_tokens":4}
// Parse() rejects unknown methods, unknown fields and out-of-range values with a message naming
// the field, so a typo is a startup error rather than speculation silently off.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ember::spec {

inline constexpr int32_t kMaxSpeculativeTokens = 16;

enum class Method : uint8_t { kNgram, kSuffix, kDraftModel };
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

  // draft_model: a model file with the target's vocabulary.
  std::string model;
};

// Parses the JSON text of --speculative-config. Errors name the field and the allowed range.
Expected<SpeculativeConfig> ParseSpeculativeConfig(std::string_view json);

}  // namespace ember::spec
