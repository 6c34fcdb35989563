// Who may drive the server, checked on every request before routing. A key-less server on
// localhost is otherwise open to any web page its user visits: a page can POST a "simple"
// cross-origin request (text/plain, form data) without a preflight, and DNS rebinding makes a
// page's own host name resolve to 127.0.0.1. So:
//   - Host: a server listening on loopback answers only requests naming a loopback host
//     (localhost, *.localhost, 127.x.x.x, [::1]); a rebound name fails.
//   - Origin: a request that carries one (browsers add it; curl and SDKs do not) must come from
//     an origin in --allowed-origins ("*": any); such origins also get CORS headers.
//   - Content-Type: a POST body is JSON (application/json or +json) or unlabelled, never one of
//     the types a browser sends cross-origin without asking.
//   - API key: compared in constant time.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/protocol/api_error.h"

namespace ember::server {

// True for an address that only this machine reaches: localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(std::string_view host);

// 403 when the server listens on loopback and `host_header` (may be empty: HTTP/1.0) names
// another host.
std::optional<ApiError> CheckHost(std::string_view host_header, bool listening_on_loopback);

// True when `origin` is in `allowed` (scheme and host compared case-insensitively), or `allowed`
// holds "*".
bool OriginAllowed(std::string_view origin, const std::vector<std::string>& allowed);
// 403 when the request has an Origin that is not allowed.
std::optional<ApiError> CheckOrigin(std::string_view origin, const std::vector<std::string>& allowed);

// 415 for a POST whose Content-Type is there and is not JSON.
std::optional<ApiError> CheckContentType(std::string_view method, std::string_view content_type);

// True when `authorization` is "Bearer <api_key>"; the time taken does not depend on where the
// two first differ.
bool ApiKeyMatches(std::string_view authorization, std::string_view api_key);

}  // namespace ember::server
