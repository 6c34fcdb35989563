// Measures how long one engine step takes for n tokens on this machine and model: the cost model
// adaptive speculative decoding plans with (engine/spec_decode.h). Each point runs the real
// forward over one synthetic request of n tokens with every row's logits (a verification step
// asks for all of them), on blocks of the KV store nobody holds yet. A point is the fastest of
// its runs (the narrowest ones get more, after the others are measured), and no point is
// cheaper than a narrower one (KeepNonDecreasing).
//
// The points are kept as measured, not replaced by a line: on a CPU the first extra rows of a
// step share its pass over the weights (the packed GEMMs' 4-row tiles), so a 2-token step costs
// far less than the slope of wide steps says. Fitted with one line (1 to 8 tokens, SmolLM2 Q4_1
// on the 2-core EPYC), the second token was priced +2.2 to +4.5 ms on a 4.2-5.5 ms step where it
// costs about +1-1.5 ms; adaptive DSpark then verified a draft only above ~60-90% confidence,
// and a fresh server's first plans verified nothing, which left it probing (bench/results/dspark_s32).
#pragma once

#include <cstdint>

#include "engine/spec_decode.h"
#include "model/causal_lm.h"
#include "model/kv_store.h"

namespace ember {

struct StepCostOptions {
  int64_t max_tokens = 64;        // the widest step worth planning (max_num_seqs x (1 + k), capped)
  double time_budget_s = 3.0;     // stop adding points past this (the last slope extrapolates)
  double refine_budget_s = 1.0;   // then at most this long measuring the narrowest points again
};

// Call before the engine serves anything: it overwrites KV blocks the pool has not handed out.
Expected<StepCostModel> MeasureStepCost(CausalLM& model, KvStore& kv, const StepCostOptions& options);

// Raises each point to at least the one before it: a point measured in a quiet moment must not
// make a wider step look cheaper than a narrower one, the error that invites verification that
// does not pay. (Lowering the earlier point instead would price the narrow steps below what they
// were measured to cost.)
void KeepNonDecreasing(StepCostModel* cost);

}  // namespace ember
