// The KV connector over UCX (libucx from Debian; what NIXL, vLLM's transfer library, is built on).
//
// A producer listens on kv_ip:kv_port. A consumer connects to the producer a request names, and
// the two first compare their KV layouts (dtype, block size, heads, head_dim, groups and their
// layers: KvLayoutOfConfig, CheckKvLayoutMatches), so a mismatched pair is refused before any KV
// moves. Then per request:
//   1. the consumer posts one tagged receive whose buffers are the layout header and the request's
//      own KV blocks (KvStore::ImportSpansFor, coalesced: about groups x layers x parts pieces),
//   2. sends a PULL active message (transfer id, prefix it already holds, prompt hash),
//   3. the producer answers with one tagged send gathered straight from its KV blocks (header,
//      then the payload: every entry of full-attention groups, the in-window entries of sliding
//      groups, none the consumer holds), which UCX moves with its rendezvous protocol,
//   4. the consumer checks the header it received is the one it expected, byte for byte.
// So a request moves in one message whatever its length, and neither side copies the KV through a
// staging buffer. Every UCX call runs on the connector's own thread; the engine thread only queues
// commands and takes events (engine/kv_connector.h), and timeouts bound every wait.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "disagg/kv_transfer_config.h"
#include "engine/kv_connector.h"
#include "kv/spec.h"

namespace ember::disagg {

class UcxKvConnector final : public KvConnector {
 public:
  // Starts UCX and the connector's thread; a producer binds its listener here (an address in use
  // is an error naming it). `kv_config` is this instance's KV cache (with num_blocks).
  static Expected<std::unique_ptr<UcxKvConnector>> Create(const KvTransferConfig& config,
                                                          const kv::KvCacheConfig& kv_config);
  ~UcxKvConnector() override;

  bool is_producer() const override;
  bool is_consumer() const override;
  Expected<RemoteKv> Hold(RequestIndex index, KvExportSpans spans, uint64_t tokens_hash) override;
  void StartPull(RequestIndex index, const RemoteKv& from, int64_t first_token, int32_t num_pulls,
                 KvImportSpans into) override;
  void ReleaseRemote(const RemoteKv& from) override;
  void CancelPull(RequestIndex index) override;
  Events TakeEvents() override;
  void SetWake(std::function<void()> wake) override;
  KvTransferStats Stats() const override;

  // The producer's listening address as consumers are told it ("" / 0 for a consumer).
  const std::string& host() const;
  int32_t port() const;
  const std::string& engine_id() const;

  // Tests only: the connector's thread stops at the next queued command until the returned
  // function is called (which must happen before destruction). Commands queued and messages
  // received meanwhile wait for it, so a test can make a pull arrive while its hold is queued.
  std::function<void()> PauseForTesting();

  class Impl;

 private:
  explicit UcxKvConnector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::disagg
