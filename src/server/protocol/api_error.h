// OpenAI-style errors: the HTTP status and the {"error": {...}} body every failure answers with.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ember::server {

struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";  // OpenAI's error.type
  std::string message;
  std::string param;  // the offending request field, when there is one
  std::string code;

  nlohmann::json ToJson() const;
};

ApiError BadRequest(std::string message, std::string param = "");
ApiError Unauthorized(std::string message);
ApiError NotFound(std::string message, std::string param = "");
ApiError Forbidden(std::string message);
ApiError MethodNotAllowed(std::string message);
ApiError UnsupportedMediaType(std::string message);
ApiError PayloadTooLarge(std::string message);
ApiError TooManyRequests(std::string message);
ApiError ServiceUnavailable(std::string message);
ApiError InternalError(std::string message);
// Maps an engine Status to the status code a client should see (InvalidArgument/OutOfRange 400,
// ResourceExhausted 429, Unimplemented 400 with type "not_supported", the rest 500).
ApiError FromStatus(const Status& status, std::string param = "");

}  // namespace ember::server
