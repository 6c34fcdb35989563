// Measures how long one engine step takes for n tokens on this machine and model: the cost model
// adaptive speculative decoding plans with (engine/spec_decode.h). Each point runs the real
// forward over one synthetic request of n tokens with every row's logits (a verification step
// asks for all of them), on blocks of the KV store nobody holds yet; the points are then replaced
// by their least-squares line, which one noisy point cannot bend.
#pragma once

#include <cstdint>

#include "engine/spec_decode.h"
#include "model/causal_lm.h"
#include "model/kv_store.h"

namespace ember {

struct StepCostOptions {
  int64_t max_tokens = 64;        // the widest step worth planning (max_num_seqs x (1 + k), capped)
  double time_budget_s = 3.0;     // stop adding points past this (the last slope extrapolates)
};

// Call before the engine serves anything: it overwrites KV blocks the pool has not handed out.
Expected<StepCostModel> MeasureStepCost(CausalLM& model, KvStore& kv, const StepCostOptions& options);

}  // namespace ember
