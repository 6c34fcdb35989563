// The two bodies of a disaggregated request, from the client's original (vLLM's disaggregated
// proxy, toy_proxy_server.py for the NixlConnector): phase 1 asks a prefill instance for one
// token and the KV-transfer handle; phase 2 sends the original request to a decode instance with
// that handle, so it pulls the prompt's KV instead of computing it. Pure functions: unit-tested.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace ember::router {

// ordered_json keeps the client's field order, so a decode instance sees the body as sent.
using Json = nlohmann::ordered_json;

// Phase 1: max_tokens 1 (and max_completion_tokens 1 for chat), stream false, no
// stream_options, n 1 (and no best_of / min_tokens, which would contradict them), and
// kv_transfer_params {"do_remote_decode": true, "do_remote_prefill": false}.
Json PrefillBody(const Json& original, bool chat);

// Phase 2: the original with kv_transfer_params set to what the prefill instance returned.
Json DecodeBody(const Json& original, const Json& kv_transfer_params);

// Phase 1 failed: the original without kv_transfer_params (the decode instance computes the
// prompt itself); a client's own kv_transfer_params never reach an instance.
Json FallbackBody(const Json& original);

// The prefill answer's top-level "kv_transfer_params" when it is an object; null otherwise.
Json KvTransferParams(const Json& prefill_response);

// Its "num_bytes" when an unsigned integer (for the router's metrics); 0 otherwise.
uint64_t KvTransferBytes(const Json& kv_transfer_params);

}  // namespace ember::router
