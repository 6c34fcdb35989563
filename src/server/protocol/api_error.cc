#include "server/protocol/api_error.h"

#include "server/protocol/safe_text.h"

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
ApiError Forbidden(std::string message) { return Make(403, "permission_error", std::move(message)); }
ApiError MethodNotAllowed(std::string message) { return Make(405, "invalid_request_error", std::move(message)); }
ApiError UnsupportedMediaType(std::string message) { return Make(415, "invalid_request_error", std::move(message)); }
ApiError PayloadTooLarge(std::string message) { return Make(413, "invalid_request_error", std::move(message)); }
ApiError TooManyRequests(std::string message) { return Make(429, "rate_limit_error", std::move(message)); }
ApiError ServiceUnavailable(std::string message) { return Make(503, "service_unavailable", std::move(message)); }
ApiError InternalError(std::string message) { return Make(500, "internal_error", std::move(message)); }

ApiError FromStatus(const Status& status, std::string param) {
  // A status can quote the request (a chat template's raise_exception, a rendering error naming
  // a value), so its text is made safe like any other request text.
  std::string message = SafeText(status.message(), 1024);
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: return BadRequest(std::move(message), std::move(param));
    case StatusCode::kUnimplemented: return Make(400, "not_supported", std::move(message), std::move(param));
    case StatusCode::kResourceExhausted: return TooManyRequests(std::move(message));
    case StatusCode::kNotFound: return NotFound(std::move(message), std::move(param));
    default: return InternalError(std::move(message));
  }
}

}  // namespace ember::server
