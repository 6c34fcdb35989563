// Every HTTP route of `ember serve`, one handler per endpoint family.
#pragma once

#include <nlohmann/json.hpp>

#include "http/message.h"

#include "server/serving_context.h"

namespace ember::server {

using http::DeferredBody;
using http::HttpRequest;
using http::HttpResponse;

void HandleCompletions(ServingContext& context, const HttpRequest& req, HttpResponse& res);
void HandleChatCompletions(ServingContext& context, const HttpRequest& req, HttpResponse& res);
void HandleModels(ServingContext& context, const HttpRequest& req, HttpResponse& res);
void HandleTokenize(ServingContext& context, const HttpRequest& req, HttpResponse& res);
void HandleDetokenize(ServingContext& context, const HttpRequest& req, HttpResponse& res);
// The OpenAPI 3.1 description of every route, for this server's configuration (defaults, the
// API key, its limits) and model (token ids below vocab_size; 0: unknown).
nlohmann::ordered_json OpenApiDocument(const ServerConfig& config, int64_t vocab_size = 0);

}  // namespace ember::server
