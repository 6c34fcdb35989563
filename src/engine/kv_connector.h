// Prefill/decode disaggregation as the engine core sees it (vLLM's KV connector, scheduler side):
// what a request says about its KV (kv_transfer_params), and the connector that moves KV between
// instances. A producer ("kv_producer") finishes a request's prefill and, instead of freeing its
// blocks, holds them for a consumer to pull; a consumer ("kv_consumer") admits a request whose
// prompt KV a producer holds, pulls it into blocks it allocated, and decodes from there. The
// transport lives in src/disagg (UCX); the engine core only hands it spans of the KV memory and
// applies what it reports, on the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/kv_transfer_params.h"
#include "engine/scheduler_output.h"
#include "kv/kv_transfer.h"

namespace ember {

// Counters for /metrics.
struct KvTransferStats {
  int64_t held = 0;                 // producer: requests whose KV waits for a consumer now
  int64_t pulls_in_flight = 0;      // consumer
  int64_t bytes_sent = 0;           // since start
  int64_t bytes_received = 0;
  int64_t transfers_sent = 0;       // payload messages
  int64_t transfers_received = 0;
  int64_t pulls_failed = 0;         // consumer: pulls that fell back to computing the prompt
  int64_t holds_expired = 0;        // producer: holds nobody pulled in time
};

class KvConnector {
 public:
  struct PullDone {
    RequestIndex index = 0;
    Status status;          // not ok: nothing usable arrived (the request computes its prompt itself)
    int64_t bytes = 0;      // payload bytes received
  };
  struct Events {
    std::vector<RequestIndex> released;  // producer: holds pulled, expired or refused: free their blocks
    std::vector<PullDone> pulls;         // consumer: pulls that ended, successful or not
  };

  virtual ~KvConnector() = default;
  virtual bool is_producer() const = 0;
  virtual bool is_consumer() const = 0;

  // Producer, engine thread: keeps `spans` (the request's prompt KV, valid until `index` comes
  // back in Events::released) for consumers to pull. Returns where it waits.
  virtual Expected<RemoteKv> Hold(RequestIndex index, KvExportSpans spans, uint64_t tokens_hash) = 0;
  // Consumer, engine thread: pulls prompt positions [first_token, from.num_tokens) of `from` into
  // `into` (KvStore::ImportSpansFor of the request's blocks); the result comes out of TakeEvents.
  virtual void StartPull(RequestIndex index, const RemoteKv& from, int64_t first_token, int32_t num_pulls,
                         KvImportSpans into) = 0;
  // Consumer, engine thread: a request that brought `from` will not pull it (its prefix cache held
  // all of it, or it went away first): the producer may free it now instead of at its timeout.
  virtual void ReleaseRemote(const RemoteKv& from) = 0;
  // Consumer, engine thread: the request went away. Its PullDone still comes, and only then may its
  // blocks be given to anyone else (the transport may be writing them until then).
  virtual void CancelPull(RequestIndex index) = 0;
  // Engine thread: what happened since the last call.
  virtual Events TakeEvents() = 0;
  // Called from the connector's own thread whenever TakeEvents has something: wakes the engine loop.
  virtual void SetWake(std::function<void()> wake) = 0;
  virtual KvTransferStats Stats() const = 0;
};

}  // namespace ember
