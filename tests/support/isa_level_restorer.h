// Puts the kernel level and the global thread count back after a test that changes them, so the
// next test in the same binary runs under the level the suite started with.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/isa.h"
#include "core/thread_pool.h"

namespace ember::test {

class IsaLevelRestorer {
 public:
  IsaLevelRestorer() : saved_(IsaName(ActiveIsa())) {}
  ~IsaLevelRestorer() {
    EXPECT_TRUE(SelectIsa(saved_).ok()) << "could not restore kernel level " << saved_;
    ThreadPool::SetGlobalThreads(0);
  }
  IsaLevelRestorer(const IsaLevelRestorer&) = delete;
  IsaLevelRestorer& operator=(const IsaLevelRestorer&) = delete;

 private:
  std::string saved_;
};

}  // namespace ember::test
