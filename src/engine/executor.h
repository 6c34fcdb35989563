// Where the engine core meets the model: the model runner implements Executor (src/runner), the
// tests a fake one. The engine core never includes model/ or kernels/.
#pragma once

#include "engine/scheduler_output.h"
#include "exec/expert_load.h"
#include "kv/kv_transfer.h"

#include <span>
#include <vector>

namespace ember {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs one step: first drops the state of output.finished_reqs and output.preempted_reqs,
  // then computes the scheduled tokens and samples where a request's tokens are all computed.
  // Called also for an output that schedules nothing but carries finished or preempted ids.
  virtual ModelRunnerOutput Execute(const SchedulerOutput& output) = 0;
  // The tokens routed to each expert of each MoE layer over every step executed so far (the model
  // counts them while it routes; exec/expert_load.h), copied into `out` reusing its memory. Empty
  // for dense models and executors that do not count.
  virtual void ReadExpertLoad(exec::ExpertLoad* out) const { *out = {}; }

  // Prefill/decode disaggregation: a request's KV in this process's memory, over the blocks the KV
  // manager gave it (`block_tables[g]` per KV group): its first `num_tokens` positions to export
  // (KvStore::ExportSpans), and where an export of them lands, except the `first_token` positions
  // the request already holds (KvStore::ImportSpansFor). Executors whose KV is spread over
  // processes (tensor, pipeline or data parallelism) do not move KV: Unimplemented.
  virtual Expected<KvExportSpans> ExportKvSpans(std::span<const std::vector<int32_t>> block_tables,
                                                int64_t num_tokens) const {
    (void)block_tables, (void)num_tokens;
    return Unimplemented("this executor cannot export KV: disaggregation runs single-process instances");
  }
  virtual Expected<KvImportSpans> ImportKvSpans(std::span<const std::vector<int32_t>> block_tables, int64_t num_tokens,
                                                int64_t first_token) {
    (void)block_tables, (void)num_tokens, (void)first_token;
    return Unimplemented("this executor cannot import KV: disaggregation runs single-process instances");
  }
};

}  // namespace ember
