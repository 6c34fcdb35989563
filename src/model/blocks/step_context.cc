#include "model/blocks/step_context.h"

#include <algorithm>

namespace ember {

StepContext::StepContext(const ForwardBatch& b, KvStore& store, exec::Communicator& c, Workspace& w)
    : batch(b), kv(store), comm(c), workspace(w), positions(nullptr) {
  int64_t* widened = w.Take<int64_t>(b.num_tokens());
  std::copy(b.positions.begin(), b.positions.end(), widened);
  positions = widened;
}

}  // namespace ember
