// Workspace: the scratch arena of one model's forward steps, so that a steady-state step makes
// no heap allocation. Activations of a step (the residual stream, q/k/v, MLP and MoE buffers,
// the rows the head reads) are taken from one block, reserved at load time from the engine's
// limits (CausalLM::ReserveWorkspace: max_num_batched_tokens), and given back when the scope
// that took them ends, in LIFO order as the forward's nesting of layer and block goes.
//
// A step that needs more than the reservation still runs: what does not fit comes from the heap
// for that step, and when the step's outermost scope ends the block grows to the step's peak, so
// the next such step fits. That path allocates and logs a warning once per workspace: a model's
// WorkspaceBytes estimate fell short (tests/alloc and the block tests check it never does).
//
// One thread at a time: a model's Forward is called by the engine thread only; a second thread
// opening an outermost scope while another is open fails a check.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ember {

class Workspace {
 public:
  // Every Take is aligned to this (a cache line; the widest vector load).
  static constexpr int64_t kAlignment = 64;

  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Makes the block hold at least `bytes` (one allocation; never shrinks). Not while a scope is
  // open. ResourceExhausted, with the workspace unchanged, when the host cannot give that much.
  Status Reserve(int64_t bytes);
  int64_t capacity() const { return capacity_; }
  // The most bytes any step took at once.
  int64_t high_water() const { return high_water_; }
  // How many steps needed more than the block held.
  int64_t overflowed_steps() const { return overflowed_steps_; }

  // Everything taken while a Scope lives is given back when it ends. Scopes nest.
  class Scope {
   public:
    explicit Scope(Workspace& workspace);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Workspace& workspace_;
    int64_t saved_used_;
  };

  // `count` uninitialised elements of T, aligned to kAlignment, valid until the innermost open
  // scope ends. Only inside a scope.
  template <typename T>
  T* Take(int64_t count) {
    return static_cast<T*>(TakeBytes(BytesFor<T>(count)));
  }
  // The same, zero-filled.
  template <typename T>
  T* TakeZeroed(int64_t count) {
    T* p = Take<T>(count);
    std::fill_n(reinterpret_cast<std::byte*>(p), count * static_cast<int64_t>(sizeof(T)), std::byte{0});
    return p;
  }
  // A host tensor of `shape`, uninitialised.
  Tensor TakeTensor(DType dtype, Shape shape);

  // The bytes Take<T>(count) uses: what WorkspaceBytes estimates add up.
  template <typename T>
  static constexpr int64_t BytesFor(int64_t count) {
    return RoundUp(count * static_cast<int64_t>(sizeof(T)));
  }
  static constexpr int64_t RoundUp(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

 private:
  struct FreeAligned {
    void operator()(std::byte* p) const;
  };
  using Block = std::unique_ptr<std::byte[], FreeAligned>;
  // Null when the host has no memory for it.
  static Block TryAllocate(int64_t bytes);
  // The same for the mid-step paths, which have no caller to report to: throws std::bad_alloc.
  static Block Allocate(int64_t bytes);

  void* TakeBytes(int64_t bytes);
  void Open();
  void Close(int64_t saved_used);

  Block block_;
  int64_t capacity_ = 0;
  int64_t used_ = 0;  // bytes taken by open scopes, counting those that overflowed
  int64_t high_water_ = 0;
  int64_t overflowed_steps_ = 0;
  bool reserved_ = false;  // Reserve was called: a step that does not fit is worth a warning
  bool warned_ = false;
  std::vector<Block> overflow_;  // this step's takes that did not fit in block_
  int depth_ = 0;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace ember
