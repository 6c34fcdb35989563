#include "core/check.h"

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(CheckDeathTest, AFailedCheckPrintsItsConditionAndMessage) {
  const int value = 42;
  EXPECT_DEATH(EMBER_CHECK(value == 7, "value is {}, expected {}", value, 7), "value == 7 — value is 42, expected 7");
  EXPECT_DEATH(EMBER_CHECK(value < 0), "check failed at .*check_test.cc:[0-9]+: value < 0");
}

TEST(CheckDeathTest, APassingCheckDoesNothing) {
  int evaluated = 0;
  EMBER_CHECK(++evaluated == 1, "never printed {}", evaluated);
  EXPECT_EQ(evaluated, 1);
}

}  // namespace
}  // namespace ember
