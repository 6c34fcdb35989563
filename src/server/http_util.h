// Small pieces every route uses: JSON bodies in and out, OpenAI error replies, SSE framing.
#pragma once

#include <functional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "http/message.h"
#include "server/protocol/api_error.h"
#include "server/protocol/json_body.h"

namespace ember::server {

using http::DeferredBody;
using http::HttpRequest;
using http::HttpResponse;

void SendError(HttpResponse& res, const ApiError& error);
// Runs `body`; whatever it throws is logged and answered with a generic 500, and GuardHandler
// returns false. The exception's text stays in the log: it may quote the request that caused it.
bool GuardHandler(const HttpRequest& req, HttpResponse& res, const std::function<void()>& body);
void SendJson(HttpResponse& res, const nlohmann::ordered_json& body, int status = 200);
// The request body as a JSON object (protocol/json_body.h: bounded depth, errors that name the
// field and quote no request bytes).
std::variant<nlohmann::ordered_json, ApiError> ParseJsonBody(const HttpRequest& req);
// "data: {json}\n\n"
std::string SseEvent(const nlohmann::ordered_json& payload);
// A random id with the given prefix ("cmpl-", "chatcmpl-").
std::string NewRequestId(const std::string& prefix);
int64_t UnixNow();

}  // namespace ember::server
