// The startup step cost model's shape rule (MeasureStepCost itself times real forwards and is
// exercised by every adaptive-speculation test that starts an engine).
#include "runner/step_cost.h"

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(StepCost, NoPointIsCheaperThanANarrowerOne) {
  StepCostModel cost{{1, 2, 3, 4, 6}, {5e-3, 6e-3, 5.5e-3, 8e-3, 7e-3}};
  KeepNonDecreasing(&cost);
  EXPECT_EQ(cost.seconds, (std::vector<double>{5e-3, 6e-3, 6e-3, 8e-3, 8e-3}));
  // Measured points that already rise are kept as they are: the cheap second token of a CPU step
  // (its rows share one pass over the weights) stays cheap.
  StepCostModel rising{{1, 2, 4, 8}, {5e-3, 5.9e-3, 8.4e-3, 15.4e-3}};
  KeepNonDecreasing(&rising);
  EXPECT_EQ(rising.seconds, (std::vector<double>{5e-3, 5.9e-3, 8.4e-3, 15.4e-3}));
}

}  // namespace
}  // namespace ember
