#include "server/http_util.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

#include "core/logging.h"
#include "server/protocol/safe_text.h"

namespace ember::server {

void SendError(HttpResponse& res, const ApiError& error) {
  res.status = error.http_status;
  // Messages are built from SafeText, but an error reply must never throw: replace, don't check.
  res.set_content(error.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void SendJson(HttpResponse& res, const nlohmann::ordered_json& body, int status) {
  res.status = status;
  // Invalid UTF-8 from a model (a token cut mid-character at max_tokens) is replaced, never thrown.
  res.set_content(body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace), "application/json");
}

bool GuardHandler(const HttpRequest& req, HttpResponse& res, const std::function<void()>& body) {
  std::string what;
  try {
    body();
    return true;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  EMBER_LOG_ERROR("{} {} failed: {}", SafeText(req.method, 16), SafeText(req.path), SafeText(what, 512));
  res.deferred.reset();
  SendError(res, InternalError("internal error while handling the request; the server log has the details"));
  return false;
}

std::variant<nlohmann::ordered_json, ApiError> ParseJsonBody(const HttpRequest& req) {
  return ParseJsonObject(req.body);
}

std::string SseEvent(const nlohmann::ordered_json& payload) {
  return "data: " + payload.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n\n";
}

std::string NewRequestId(const std::string& prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace ember::server
