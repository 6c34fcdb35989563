#include "core/workspace.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include <fmt/format.h>

#include "core/check.h"
#include "core/logging.h"

namespace ember {

void Workspace::FreeAligned::operator()(std::byte* p) const { std::free(p); }

Workspace::Block Workspace::TryAllocate(int64_t bytes) {
  return Block(static_cast<std::byte*>(
      std::aligned_alloc(kAlignment, static_cast<size_t>(RoundUp(std::max<int64_t>(bytes, kAlignment))))));
}

Workspace::Block Workspace::Allocate(int64_t bytes) {
  Block block = TryAllocate(bytes);
  if (!block) throw std::bad_alloc();
  return block;
}

Status Workspace::Reserve(int64_t bytes) {
  EMBER_CHECK(depth_ == 0, "Workspace::Reserve inside an open scope");
  EMBER_CHECK(bytes >= 0, "Workspace::Reserve of {} bytes", bytes);
  bytes = RoundUp(bytes);
  reserved_ = true;
  if (bytes <= capacity_) return Status::Ok();
  Block block = TryAllocate(bytes);
  if (!block) {
    return ResourceExhausted(fmt::format("the step workspace needs {:.1f} MiB and the host cannot allocate it",
                                         bytes / 1048576.0));
  }
  block_ = std::move(block);
  capacity_ = bytes;
  return Status::Ok();
}

Tensor Workspace::TakeTensor(DType dtype, Shape shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.data = TakeBytes(RoundUp(DTypeBytes(dtype, shape.NumElements())));
  return t;
}

void* Workspace::TakeBytes(int64_t bytes) {
  EMBER_CHECK(depth_ > 0, "Workspace::Take outside a scope");
  EMBER_CHECK(bytes >= 0, "Workspace::Take of {} bytes", bytes);
  void* p;
  if (used_ + bytes <= capacity_) {
    p = block_.get() + used_;
  } else {
    overflow_.push_back(Allocate(bytes));
    p = overflow_.back().get();
  }
  used_ += bytes;
  high_water_ = std::max(high_water_, used_);
  return p;
}

Workspace::Scope::Scope(Workspace& workspace) : workspace_(workspace), saved_used_(workspace.used_) {
  workspace_.Open();
}

Workspace::Scope::~Scope() { workspace_.Close(saved_used_); }

void Workspace::Open() {
  const std::thread::id me = std::this_thread::get_id();
  if (owner_.load(std::memory_order_relaxed) != me) {
    std::thread::id none;
    EMBER_CHECK(owner_.compare_exchange_strong(none, me), "Workspace: two threads run steps of one model at once");
  }
  ++depth_;
}

void Workspace::Close(int64_t saved_used) {
  used_ = saved_used;
  if (--depth_ > 0) return;
  if (!overflow_.empty()) {
    // The step did not fit: grow to its peak so the next one does.
    overflow_.clear();
    ++overflowed_steps_;
    if (reserved_ && !warned_) {
      EMBER_LOG_WARN("step workspace: a step needed {:.1f} MiB, {:.1f} MiB were reserved; grown (the model's "
                     "WorkspaceBytes estimate is short, please report it)",
                     high_water_ / 1048576.0, capacity_ / 1048576.0);
      warned_ = true;
    }
    block_ = Allocate(high_water_);
    capacity_ = RoundUp(high_water_);
  }
  owner_.store(std::thread::id{}, std::memory_order_relaxed);
}

}  // namespace ember
