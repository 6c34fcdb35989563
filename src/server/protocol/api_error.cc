#include "server/protocol/api_error.h"

namespace ember::server {

nlohmann::json ApiError::ToJson() const {
  nlohmann::json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) error["param"] = param;
  if (!code.empty()) error["code"] = code;
  return {{"error", error}};
}

namespace {
ApiError Make(int status, std::string type, std::string message, std::string param = "") {
  ApiError e;
  e.http_status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}
}  // namespace

ApiError BadRequest(std::string message, std::string param) {
  return Make(400, "invalid_request_error", std::move(message), std::move(param));
}
ApiError Unauthorized(std::string message) { return Make(401, "authentication_error", std::move(message)); }
ApiError NotFound(std::string message, std::string param) {
  return Make(404, "not_found_error", std::move(message), std::move(param));
}
ApiError PayloadTooLarge(std::string message) { return Make(413, "invalid_request_error", std::move(message)); }
ApiError TooManyRequests(std::string message) { return Make(429, "rate_limit_error", std::move(message)); }
ApiError ServiceUnavailable(std::string message) { return Make(503, "service_unavailable", std::move(message)); }
ApiError InternalError(std::string message) { return Make(500, "internal_error", std::move(message)); }

ApiError FromStatus(const Status& status, std::string param) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: return BadRequest(status.message(), std::move(param));
    case StatusCode::kUnimplemented: return Make(400, "not_supported", status.message(), std::move(param));
    case StatusCode::kResourceExhausted: return TooManyRequests(status.message());
    case StatusCode::kNotFound: return NotFound(status.message(), std::move(param));
    default: return InternalError(status.message());
  }
}

}  // namespace ember::server
