// Where a thread's computation is right now, so that a watchdog on another thread can name it
// when a step hangs: the innermost ScopedOp's label and the layer it runs in.
//
// The engine thread points its trace at an OpTrace the watchdog owns (SetThreadOpTrace); on any
// other thread there is no trace and a ScopedOp costs one thread-local load. The labels are
// string literals, so publishing one is a relaxed pointer store.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace ember {

struct OpTrace {
  std::atomic<const char*> op{nullptr};
  std::atomic<int32_t> layer{-1};

  // "layer 12 attention.o_proj", "lm_head", or "outside the model".
  std::string Describe() const;
};

// The trace this thread's ScopedOps report into (nullptr: none, the default).
void SetThreadOpTrace(OpTrace* trace);

class ScopedOp {
 public:
  // `op` must be a string literal (it is read later from another thread). A negative `layer`
  // keeps the enclosing op's layer.
  explicit ScopedOp(const char* op, int64_t layer = -1);
  ~ScopedOp();
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpTrace* trace_;
  const char* previous_op_ = nullptr;
  int32_t previous_layer_ = -1;
};

}  // namespace ember
