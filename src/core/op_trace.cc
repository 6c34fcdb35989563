#include "core/op_trace.h"

#include <fmt/format.h>

namespace ember {
namespace {
thread_local OpTrace* t_trace = nullptr;
}  // namespace

std::string OpTrace::Describe() const {
  const char* name = op.load(std::memory_order_relaxed);
  const int32_t l = layer.load(std::memory_order_relaxed);
  if (name == nullptr) return "outside the model";
  return l >= 0 ? fmt::format("layer {} {}", l, name) : std::string(name);
}

void SetThreadOpTrace(OpTrace* trace) { t_trace = trace; }

ScopedOp::ScopedOp(const char* op, int64_t layer) : trace_(t_trace) {
  if (trace_ == nullptr) return;
  previous_op_ = trace_->op.load(std::memory_order_relaxed);
  previous_layer_ = trace_->layer.load(std::memory_order_relaxed);
  trace_->op.store(op, std::memory_order_relaxed);
  if (layer >= 0) trace_->layer.store(static_cast<int32_t>(layer), std::memory_order_relaxed);
}

ScopedOp::~ScopedOp() {
  if (trace_ == nullptr) return;
  trace_->op.store(previous_op_, std::memory_order_relaxed);
  trace_->layer.store(previous_layer_, std::memory_order_relaxed);
}

}  // namespace ember
