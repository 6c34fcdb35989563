// vLLM's kv_transfer_params as the engine carries them: what a request says about its KV under
// prefill/decode disaggregation (engine/kv_connector.h has the flow). Plain values: the server
// fills them from a request's JSON and writes a producer's answer back.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace ember {

// Where a request's prompt KV waits: a producer's answer (its response's kv_transfer_params) and
// the consumer's input (the same object, passed on by the router).
struct RemoteKv {
  std::string engine_id;     // the producer's id, for logs and mismatched-peer errors
  std::string host;          // the producer's KV transport address
  int32_t port = 0;
  uint64_t transfer_id = 0;  // what the producer holds the blocks under
  int64_t num_tokens = 0;    // prompt positions [0, num_tokens) held: all but the last prompt token
  uint64_t tokens_hash = 0;  // of those prompt token ids (KvTokensHash): a different prompt never matches
  int64_t num_bytes = 0;     // payload bytes held (all of it; a consumer with a prefix hit pulls less)
};

// What one request asks of the connector.
struct KvTransferRequest {
  // Producer: after this request (the router sends max_tokens 1), hold its prompt's KV for a
  // consumer and return where it waits.
  bool do_remote_decode = false;
  // Consumer: pull the prompt's KV from there instead of computing it.
  std::optional<RemoteKv> remote_prefill;
  // Consumer: how many requests pull the same held KV (a request's n choices), so the producer
  // keeps it until the last one pulled.
  int32_t num_pulls = 1;
};

// The hash a producer and a consumer compare so that KV is only ever moved into the same prompt.
uint64_t KvTokensHash(std::span<const int32_t> tokens);

}  // namespace ember
