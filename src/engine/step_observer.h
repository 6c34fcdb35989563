// Something the engine core tells when a step's execution starts and ends (the step watchdog,
// engine/step_watchdog.h). Called on the engine thread, around Executor::Execute.
#pragma once

#include <string>
#include <vector>

#include "engine/scheduler_output.h"

namespace ember {

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // `request_ids[i]` is the API id of step.scheduled_reqs[i]; the strings stay valid until
  // OnStepEnd (no request is freed while its step executes).
  virtual void OnStepBegin(const SchedulerOutput& step, const std::vector<const std::string*>& request_ids) = 0;
  virtual void OnStepEnd() = 0;
};

}  // namespace ember
