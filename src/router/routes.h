// The router's checks before routing and its routing table: the pieces of RouterServer that need
// no socket, so that they are unit-tested.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"
#include "router/body_rewrite.h"

namespace ember::router {

// True when `authorization` is "Bearer <api_key>", in time that does not depend on where they
// first differ.
bool ApiKeyMatches(std::string_view authorization, std::string_view api_key);

// The deepest nesting of arrays and objects in `body` (JSON text; strings are skipped). Checked
// before parsing: nlohmann's dump recurses, so a body of 8 MiB of '[' must never be built.
size_t JsonNestingDepth(std::string_view body);
constexpr size_t kMaxJsonDepth = 128;

// A POST body as the router needs it: a JSON object (nesting at most kMaxJsonDepth), or the 400
// message saying what is wrong.
struct ParsedBody {
  Json json;
  std::string error;  // empty: json is an object
};
ParsedBody ParseRequestBody(const std::string& body);

// Who may drive a router, checked before routing (the same rules as ember serve's access.h): a
// request with an Origin header is refused (browsers add one; the SDKs and curl do not), a POST
// must be JSON or unlabelled (what a web page can send cross-origin without a preflight is
// not), and a router on loopback answers only loopback Host names (DNS rebinding). Returns the
// refusal, if any.
std::optional<std::pair<int, std::string>> CheckAccess(const http::HttpRequest& request, bool listening_on_loopback);
bool IsLoopbackHost(std::string_view host);

}  // namespace ember::router
