// `--kv-transfer-config`: vLLM's JSON for prefill/decode disaggregation, e.g.
//   {"kv_connector":"UcxConnector","kv_role":"kv_producer","kv_ip":"10.0.0.1","kv_port":14579}
//   {"kv_connector":"UcxConnector","kv_role":"kv_consumer"}
// vLLM's field names; "NixlConnector" is accepted as another name for the same UCX transport
// (NIXL is built on UCX), so a vLLM command line carries over. Unknown fields, roles and
// connectors are startup errors that say what is accepted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ember::disagg {

enum class KvRole : uint8_t { kProducer, kConsumer, kBoth };
std::string_view KvRoleName(KvRole role);

struct KvTransferConfig {
  std::string connector = "UcxConnector";
  KvRole role = KvRole::kBoth;
  // Producer: the address its KV listener binds and that consumers are told to connect to.
  std::string ip = "127.0.0.1";
  int32_t port = 14579;  // vLLM's default kv_port; 0: any free port (the one bound is advertised)
  std::string engine_id;  // empty: a random one
  // kv_connector_extra_config:
  double hold_timeout_s = 120.0;  // producer: held KV nobody pulled is freed after this
  double pull_timeout_s = 30.0;   // consumer: a pull not done by then computes the prompt locally
  double connect_timeout_s = 5.0; // consumer: a producer that does not answer its handshake by then fails
  // Consumer: the producers ("host:port") it may pull from; empty: any. A request's
  // kv_transfer_params name the address the consumer connects to, so a consumer that clients can
  // reach past the router should list its producers: another address is never contacted (the
  // prompt is computed here instead).
  std::vector<std::string> allowed_producers;

  bool AllowsProducer(const std::string& host, int32_t port) const;
  bool is_producer() const { return role != KvRole::kConsumer; }
  bool is_consumer() const { return role != KvRole::kProducer; }
};

Expected<KvTransferConfig> ParseKvTransferConfig(std::string_view json);

}  // namespace ember::disagg
