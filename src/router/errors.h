// OpenAI-style error bodies, {"error": {"message", "type", "param", "code"}}, as ember serve
// writes them, for what the router answers itself (401, 404, 502, 503...) and for the error
// event that ends a stream whose decode instance failed.
#pragma once

#include <string>

#include "http/message.h"

namespace ember::router {

std::string ErrorJson(const std::string& message, const std::string& type);
// The OpenAI error type for a status: invalid_request_error, authentication_error, ...
const char* ErrorType(int status);
void SetError(http::HttpResponse* response, int status, const std::string& message);
// "data: {"error": ...}\n\ndata: [DONE]\n\n"
std::string SseErrorEvents(const std::string& message);

}  // namespace ember::router
