// What every block of one forward step shares: the batch (already checked by CheckForwardBatch),
// its positions widened for RoPE, the KV store, the tensor-/expert-parallel group, and the step's
// workspace every block takes its activations from (core/workspace.h).
#pragma once

#include <cstdint>

#include "core/workspace.h"
#include "exec/communicator.h"
#include "model/forward_batch.h"
#include "model/kv_store.h"

namespace ember {

struct StepContext {
  // Takes the widened positions from `workspace`: construct it inside the step's outermost scope.
  StepContext(const ForwardBatch& batch, KvStore& kv, exec::Communicator& comm, Workspace& workspace);

  int64_t num_tokens() const { return batch.num_tokens(); }
  // Bytes the constructor takes from the workspace for a step of `tokens` tokens.
  static int64_t WorkspaceBytes(int64_t tokens) { return Workspace::BytesFor<int64_t>(tokens); }

  const ForwardBatch& batch;
  KvStore& kv;
  exec::Communicator& comm;
  Workspace& workspace;
  const int64_t* positions;  // [num_tokens]
};

}  // namespace ember
