// Every HTTP route of `ember serve`, one handler per endpoint family.
#pragma once

#include <httplib.h>

#include "server/serving_context.h"

namespace ember::server {

void HandleCompletions(ServingContext& context, const httplib::Request& req, httplib::Response& res);
void HandleChatCompletions(ServingContext& context, const httplib::Request& req, httplib::Response& res);
void HandleModels(ServingContext& context, const httplib::Request& req, httplib::Response& res);
void HandleTokenize(ServingContext& context, const httplib::Request& req, httplib::Response& res);
void HandleDetokenize(ServingContext& context, const httplib::Request& req, httplib::Response& res);
// The OpenAPI 3 description of the routes above.
nlohmann::ordered_json OpenApiDocument();

}  // namespace ember::server
