// Speculative decoding as a server's Prometheus /metrics counts it (ember's `ember:spec_decode_*`
// or vLLM's `vllm:spec_decode_*`): scraped before and after a load level, the difference is that
// level's tokens per verification step, acceptance per draft position and the verification
// lengths the server chose. A server without these counters (llama-server) yields nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/ember/bench/serve_client.h"

namespace ember::tools::bench {

struct SpecDecodeCounts {
  double num_drafts = 0;         // verification passes with draft tokens
  double num_draft_tokens = 0;   // draft tokens verified
  double num_accepted_tokens = 0;
  std::vector<double> accepted_per_position;  // [i]: drafts whose position i (0-based) was accepted
  std::vector<double> drafts_per_length;      // [i]: drafts verified with i + 1 tokens (ember only)
  // ember only: the proposer's drafting time and its intake of the target's hidden states.
  double propose_seconds = 0;
  double hidden_states_seconds = 0;
};

// The counters in a Prometheus text exposition; nullopt when it has no spec-decode drafts counter.
std::optional<SpecDecodeCounts> ParseSpecDecodeMetrics(std::string_view text);

// GET /metrics and parse it; nullopt when the server has no /metrics or no such counters.
std::optional<SpecDecodeCounts> ScrapeSpecDecode(const ServerTarget& target);

// after - before, summarised: counts, acceptance rate, mean acceptance length (1 + accepted per
// draft: tokens per verification step, vLLM's definition), acceptance per position (accepted /
// drafts), the share of drafts per verified length and the proposer's seconds. Null when no draft
// was verified and the proposer took no time (a server without speculation).
nlohmann::ordered_json SummarizeSpecDecode(const SpecDecodeCounts& before, const SpecDecodeCounts& after);

}  // namespace ember::tools::bench
