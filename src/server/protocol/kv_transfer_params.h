// vLLM's `kv_transfer_params` request and response field (prefill/decode disaggregation): the
// router asks a producer for {"do_remote_decode": true}; the producer's response carries where the
// prompt's KV waits; the router passes that object on to a consumer as this request field.
// Identifiers that do not fit a JSON double (transfer id, prompt hash) travel as hex strings.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/kv_transfer_params.h"
#include "server/protocol/api_error.h"

namespace ember::server {

// The request field: {"do_remote_decode": true} or a producer's answer with "do_remote_prefill".
// Fields ember does not use (vLLM's remote_block_ids, ...) are ignored; wrong types are a 400.
std::optional<ApiError> ParseKvTransferParams(const nlohmann::json& value, KvTransferRequest* out);

// A producer's answer for the response: what a consumer needs to pull the KV.
nlohmann::json KvTransferParamsJson(const RemoteKv& where);

}  // namespace ember::server
