#include "server/protocol/kv_transfer_params.h"

#include <charconv>
#include <string>

#include <fmt/format.h>

namespace ember::server {
namespace {

using json = nlohmann::json;

constexpr const char* kField = "kv_transfer_params";

ApiError Bad(const std::string& what) { return BadRequest(fmt::format("'{}': {}", kField, what), kField); }

bool ReadHex(const json& object, const char* key, uint64_t* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return false;
  const std::string& s = it->get_ref<const std::string&>();
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  return error == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

std::optional<ApiError> ParseKvTransferParams(const json& value, KvTransferRequest* out) {
  if (value.is_null()) return std::nullopt;
  if (!value.is_object()) return Bad("must be an object");
  auto flag = [&](const char* key, bool* b) -> std::optional<ApiError> {
    auto it = value.find(key);
    if (it == value.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean()) return Bad(fmt::format("\"{}\" must be true or false", key));
    *b = it->get<bool>();
    return std::nullopt;
  };
  bool remote_decode = false, remote_prefill = false;
  if (auto e = flag("do_remote_decode", &remote_decode)) return e;
  if (auto e = flag("do_remote_prefill", &remote_prefill)) return e;
  if (remote_decode && remote_prefill) return Bad("do_remote_decode and do_remote_prefill exclude each other");
  out->do_remote_decode = remote_decode;
  if (!remote_prefill) return std::nullopt;
  RemoteKv where;
  auto string = [&](const char* key, std::string* s) {
    auto it = value.find(key);
    if (it == value.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) return false;
    *s = it->get<std::string>();
    return true;
  };
  auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t* v) {
    auto it = value.find(key);
    if (it == value.end() || !it->is_number_integer()) return false;
    *v = it->get<int64_t>();
    return *v >= lo && *v <= hi;
  };
  int64_t port = 0;
  if (!string("remote_host", &where.host)) return Bad("do_remote_prefill needs \"remote_host\" (a producer's answer)");
  if (!integer("remote_port", 1, 65535, &port)) return Bad("\"remote_port\" must be a TCP port");
  where.port = static_cast<int32_t>(port);
  string("remote_engine_id", &where.engine_id);
  if (!ReadHex(value, "remote_transfer_id", &where.transfer_id)) {
    return Bad("\"remote_transfer_id\" must be the producer's hex string");
  }
  if (!ReadHex(value, "remote_tokens_hash", &where.tokens_hash)) {
    return Bad("\"remote_tokens_hash\" must be the producer's hex string");
  }
  if (!integer("remote_num_tokens", 1, int64_t{1} << 40, &where.num_tokens)) {
    return Bad("\"remote_num_tokens\" must be a positive integer");
  }
  integer("num_bytes", 0, int64_t{1} << 62, &where.num_bytes);
  out->remote_prefill = std::move(where);
  return std::nullopt;
}

json KvTransferParamsJson(const RemoteKv& where) {
  return {{"do_remote_prefill", true},
          {"do_remote_decode", false},
          {"remote_engine_id", where.engine_id},
          {"remote_host", where.host},
          {"remote_port", where.port},
          {"remote_transfer_id", fmt::format("{:016x}", where.transfer_id)},
          {"remote_num_tokens", where.num_tokens},
          {"remote_tokens_hash", fmt::format("{:016x}", where.tokens_hash)},
          {"num_bytes", where.num_bytes}};
}

}  // namespace ember::server
