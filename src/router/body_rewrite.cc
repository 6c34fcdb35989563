#include "router/body_rewrite.h"

#include <algorithm>
#include <cstdint>

namespace ember::router {

Json PrefillBody(const Json& original, bool chat) {
  Json body = original;
  body["max_tokens"] = 1;
  if (chat) body["max_completion_tokens"] = 1;
  body["stream"] = false;
  body.erase("stream_options");  // only allowed with stream: true
  body["n"] = 1;
  // best_of must equal n, and min_tokens at most max_tokens: kept, they would fail phase 1.
  body.erase("best_of");
  body.erase("min_tokens");
  body["kv_transfer_params"] = Json{{"do_remote_decode", true}, {"do_remote_prefill", false}};
  return body;
}

Json DecodeBody(const Json& original, const Json& kv_transfer_params) {
  Json body = original;
  body["kv_transfer_params"] = kv_transfer_params;
  return body;
}

Json FallbackBody(const Json& original) {
  Json body = original;
  body.erase("kv_transfer_params");
  return body;
}

Json KvTransferParams(const Json& prefill_response) {
  if (!prefill_response.is_object()) return nullptr;
  auto it = prefill_response.find("kv_transfer_params");
  if (it == prefill_response.end() || !it->is_object()) return nullptr;
  return *it;
}

uint64_t KvTransferBytes(const Json& kv_transfer_params) {
  if (!kv_transfer_params.is_object()) return 0;
  auto it = kv_transfer_params.find("num_bytes");
  if (it == kv_transfer_params.end() || !it->is_number_integer()) return 0;
  return it->is_number_unsigned() ? it->get<uint64_t>()
                                  : static_cast<uint64_t>(std::max<int64_t>(0, it->get<int64_t>()));
}

}  // namespace ember::router
