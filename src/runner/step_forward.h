// One step's forward pass over the model, as one batch or, when the model runs in pipeline stages,
// as micro-batches that keep the stages busy at once (GPipe's schedule within a step).
//
// With P stages a step's requests split into up to P micro-batches of consecutive requests,
// balanced by tokens. Every rank runs the same split (it depends only on the SchedulerOutput), so
// stage s forwards micro-batch i while stage s + 1 forwards micro-batch i - 1. The logits travel
// once, after the last micro-batch (CausalLM::SendLogits / ReceiveLogits). Batch invariance makes
// this lossless: a request's rows get the bits they get in one batch, whichever requests share its
// micro-batch. A step splits only when it has several requests, no prompt-logprob rows (which
// follow all sampled rows in the step's logits) and no hidden-state taps.
#pragma once

#include <vector>

#include "core/status.h"
#include "engine/scheduler_output.h"
#include "model/causal_lm.h"
#include "model/forward_output.h"
#include "model/kv_store.h"
#include "runner/batch_builder.h"
#include "runner/request_state.h"

namespace ember {

class StepForward {
 public:
  // Runs `built` (the whole step over `inputs`, scheduled as in `output`) on `model`. On the rank
  // that samples, `out` gets the logits in `built`'s row order; a rank that sends the logits sends
  // them. Returns how many micro-batches ran.
  Expected<int> Run(CausalLM& model, KvStore& kv, const std::vector<const RunnerRequest*>& inputs,
                    const SchedulerOutput& output, const BuiltBatch& built, ForwardOutput* out);

 private:
  std::vector<BuiltBatch> parts_;
  std::vector<ForwardOutput> outs_;  // reused across steps
};

}  // namespace ember
