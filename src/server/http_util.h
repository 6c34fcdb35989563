// Small pieces every route uses: JSON bodies in and out, OpenAI error replies, SSE framing.
#pragma once

#include <functional>
#include <string>
#include <variant>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/protocol/api_error.h"
#include "server/protocol/json_body.h"

namespace ember::server {

void SendError(httplib::Response& res, const ApiError& error);
// Runs `body`; whatever it throws is logged and answered with a generic 500, and GuardHandler
// returns false. The exception's text stays in the log: it may quote the request that caused it.
bool GuardHandler(const httplib::Request& req, httplib::Response& res, const std::function<void()>& body);
void SendJson(httplib::Response& res, const nlohmann::ordered_json& body, int status = 200);
// The request body as a JSON object (protocol/json_body.h: bounded depth, errors that name the
// field and quote no request bytes).
std::variant<nlohmann::ordered_json, ApiError> ParseJsonBody(const httplib::Request& req);
// "data: {json}\n\n"
std::string SseEvent(const nlohmann::ordered_json& payload);
// A random id with the given prefix ("cmpl-", "chatcmpl-").
std::string NewRequestId(const std::string& prefix);
int64_t UnixNow();

}  // namespace ember::server
