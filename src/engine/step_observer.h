// Something the engine core tells when a step's execution starts and ends (the step watchdog,
// engine/step_watchdog.h). Called on the engine thread, around Executor::Execute.
#pragma once

#include "engine/scheduler_output.h"

namespace ember {

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void OnStepBegin(const SchedulerOutput& step) = 0;
  virtual void OnStepEnd() = 0;
};

}  // namespace ember
