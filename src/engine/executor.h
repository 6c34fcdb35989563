// Where the engine core meets the model: the model runner implements Executor (src/runner), the
// tests a fake one. The engine core never includes model/ or kernels/.
#pragma once

#include "engine/scheduler_output.h"
#include "exec/expert_load.h"

namespace ember {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs one step: first drops the state of output.finished_reqs and output.preempted_reqs,
  // then computes the scheduled tokens and samples where a request's tokens are all computed.
  // Called also for an output that schedules nothing but carries finished or preempted ids.
  virtual ModelRunnerOutput Execute(const SchedulerOutput& output) = 0;
  // The tokens routed to each expert of each MoE layer over every step executed so far (the model
  // counts them while it routes; exec/expert_load.h), copied into `out` reusing its memory. Empty
  // for dense models and executors that do not count.
  virtual void ReadExpertLoad(exec::ExpertLoad* out) const { *out = {}; }
};

}  // namespace ember
