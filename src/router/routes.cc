#include "router/routes.h"

#include <algorithm>
#include <cctype>

#include "core/ascii.h"

namespace ember::router {

bool ApiKeyMatches(std::string_view authorization, std::string_view api_key) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() != kBearer.size() + api_key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < kBearer.size(); ++i) diff |= static_cast<unsigned char>(authorization[i] ^ kBearer[i]);
  for (size_t i = 0; i < api_key.size(); ++i) {
    diff |= static_cast<unsigned char>(authorization[kBearer.size() + i] ^ api_key[i]);
  }
  return diff == 0;
}

size_t JsonNestingDepth(std::string_view body) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

ParsedBody ParseRequestBody(const std::string& body) {
  ParsedBody out;
  if (JsonNestingDepth(body) > kMaxJsonDepth) {
    out.error = "the request body nests arrays and objects deeper than 128 levels";
    return out;
  }
  out.json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out.json.is_discarded()) {
    out.error = "the request body is not valid JSON";
  } else if (!out.json.is_object()) {
    out.error = "the request body must be a JSON object";
  }
  return out;
}

bool IsLoopbackHost(std::string_view host) {
  const std::string h = AsciiLower(host);
  if (h == "localhost" || h.ends_with(".localhost") || h == "::1" || h == "[::1]") return true;
  if (!h.starts_with("127.")) return false;
  return std::all_of(h.begin(), h.end(),
                     [](char c) { return c == '.' || std::isdigit(static_cast<unsigned char>(c)); });
}

std::optional<std::pair<int, std::string>> CheckAccess(const http::HttpRequest& request, bool listening_on_loopback) {
  if (!request.header("Origin").empty()) {
    return std::pair{403, std::string("requests from web pages (with an Origin header) are refused by the router")};
  }
  if (listening_on_loopback) {
    std::string host = request.header("Host");
    // Strip the port: "[::1]:8000", "localhost:8000".
    const size_t colon = host.rfind(':');
    if (colon != std::string::npos && host.find(']', colon) == std::string::npos) host.resize(colon);
    if (!host.empty() && !IsLoopbackHost(host)) {
      return std::pair{403, std::string("the router listens on loopback and answers only loopback Host names")};
    }
  }
  if (request.method == "POST") {
    const std::string type = AsciiLower(request.header("Content-Type"));
    std::string media = type.substr(0, type.find(';'));
    while (!media.empty() && media.back() == ' ') media.pop_back();
    const bool json = media.empty() || media == "application/json" || media.ends_with("+json");
    if (!json) return std::pair{415, std::string("a POST body must be JSON (Content-Type: application/json)")};
  }
  return std::nullopt;
}

}  // namespace ember::router
