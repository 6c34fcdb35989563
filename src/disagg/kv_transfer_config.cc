#include "disagg/kv_transfer_config.h"

#include <fmt/format.h>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "formats/json_fields.h"

namespace ember::disagg {
namespace {

constexpr const char* kWhere = "--kv-transfer-config";

Status Seconds(JsonFields& fields, const char* key, double* out) {
  if (!fields.Has(key)) return Status::Ok();
  double value = 0;
  EMBER_RETURN_IF_ERROR(fields.Double(key, &value));
  if (!(value > 0 && value <= 86400)) {
    return InvalidArgument(fmt::format("{}: kv_connector_extra_config \"{}\" is {}: give seconds in (0, 86400]", kWhere,
                                       key, value));
  }
  *out = value;
  return Status::Ok();
}

}  // namespace

std::string_view KvRoleName(KvRole role) {
  switch (role) {
    case KvRole::kProducer: return "kv_producer";
    case KvRole::kConsumer: return "kv_consumer";
    case KvRole::kBoth: return "kv_both";
  }
  return "?";
}

bool KvTransferConfig::AllowsProducer(const std::string& host, int32_t port) const {
  if (allowed_producers.empty()) return true;
  const std::string address = fmt::format("{}:{}", host, port);
  return std::find(allowed_producers.begin(), allowed_producers.end(), address) != allowed_producers.end();
}

Expected<KvTransferConfig> ParseKvTransferConfig(std::string_view text) {
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return InvalidArgument(fmt::format("{} is not a JSON object: give e.g. "
                                       "'{{\"kv_connector\":\"UcxConnector\",\"kv_role\":\"kv_producer\"}}'",
                                       kWhere));
  }
  KvTransferConfig config;
  JsonFields fields(json, kWhere);
  EMBER_RETURN_IF_ERROR(fields.String("kv_connector", &config.connector));
  if (config.connector != "UcxConnector" && config.connector != "NixlConnector") {
    return InvalidArgument(fmt::format("{}: \"kv_connector\" is \"{}\": ember moves KV with UCX; use \"UcxConnector\" "
                                       "(\"NixlConnector\" is taken as the same)",
                                       kWhere, config.connector));
  }
  std::string role;
  EMBER_RETURN_IF_ERROR(fields.String("kv_role", &role));
  if (role == "kv_producer") {
    config.role = KvRole::kProducer;
  } else if (role == "kv_consumer") {
    config.role = KvRole::kConsumer;
  } else if (role == "kv_both") {
    config.role = KvRole::kBoth;
  } else {
    return InvalidArgument(
        fmt::format("{}: \"kv_role\" is \"{}\": it must be kv_producer, kv_consumer or kv_both", kWhere, role));
  }
  EMBER_RETURN_IF_ERROR(fields.String("kv_ip", &config.ip, /*required=*/false));
  if (fields.Has("kv_port")) {
    int64_t port = 0;
    EMBER_RETURN_IF_ERROR(fields.Int("kv_port", &port));
    if (port < 0 || port > 65535) {
      return InvalidArgument(fmt::format("{}: \"kv_port\" is {}: give a TCP port in [0, 65535] (0: any free one)",
                                         kWhere, port));
    }
    config.port = static_cast<int32_t>(port);
  }
  EMBER_RETURN_IF_ERROR(fields.String("engine_id", &config.engine_id, /*required=*/false));
  // vLLM fields that mean nothing to a single-process CPU instance.
  fields.Ignore({"kv_buffer_device", "kv_buffer_size", "kv_rank", "kv_parallel_size", "kv_load_failure_policy"});
  if (const nlohmann::json* extra = fields.Object("kv_connector_extra_config")) {
    if (!extra->is_object()) {
      return InvalidArgument(fmt::format("{}: \"kv_connector_extra_config\" must be an object", kWhere));
    }
    JsonFields extra_fields(*extra, fmt::format("{}: kv_connector_extra_config", kWhere));
    EMBER_RETURN_IF_ERROR(Seconds(extra_fields, "hold_timeout_s", &config.hold_timeout_s));
    EMBER_RETURN_IF_ERROR(Seconds(extra_fields, "pull_timeout_s", &config.pull_timeout_s));
    EMBER_RETURN_IF_ERROR(Seconds(extra_fields, "connect_timeout_s", &config.connect_timeout_s));
    EMBER_RETURN_IF_ERROR(extra_fields.StringList("allowed_producers", &config.allowed_producers, /*required=*/false));
    for (const std::string& address : config.allowed_producers) {
      const size_t colon = address.rfind(':');
      if (colon == std::string::npos || colon == 0 || address.find_first_not_of("0123456789", colon + 1) != std::string::npos ||
          colon + 1 == address.size()) {
        return InvalidArgument(fmt::format("{}: kv_connector_extra_config \"allowed_producers\" holds \"{}\": give "
                                           "\"host:port\" entries (the producers' kv_ip and kv_port)",
                                           kWhere, address));
      }
    }
    EMBER_RETURN_IF_ERROR(extra_fields.RejectUnknown());
  }
  EMBER_RETURN_IF_ERROR(fields.RejectUnknown());
  return config;
}

}  // namespace ember::disagg
