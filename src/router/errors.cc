#include "router/errors.h"

#include <nlohmann/json.hpp>

namespace ember::router {

std::string ErrorJson(const std::string& message, const std::string& type) {
  nlohmann::json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  // Replace: an upstream's bytes quoted in a message are not always UTF-8.
  return nlohmann::json{{"error", error}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const char* ErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 502:
      return "upstream_error";
    case 503:
      return "service_unavailable";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

void SetError(http::HttpResponse* response, int status, const std::string& message) {
  response->status = status;
  response->set_content(ErrorJson(message, ErrorType(status)), "application/json");
}

std::string SseErrorEvents(const std::string& message) {
  return "data: " + ErrorJson(message, ErrorType(502)) + "\n\ndata: [DONE]\n\n";
}

}  // namespace ember::router
