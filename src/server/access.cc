#include "server/access.h"

#include <fmt/format.h>

#include <cctype>

#include "core/ascii.h"
#include "server/protocol/safe_text.h"

namespace ember::server {
namespace {

// "127.0.0.1:8000" -> "127.0.0.1", "[::1]:8000" -> "::1", "localhost" -> "localhost".
std::string_view HostWithoutPort(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(1, close - 1);
  }
  const size_t colon = host.find(':');
  if (colon != std::string_view::npos && host.find(':', colon + 1) == std::string_view::npos) {
    return host.substr(0, colon);
  }
  return host;
}

bool IsLoopbackIpv4(std::string_view host) {
  int parts = 0;
  int first = -1;
  size_t i = 0;
  while (i <= host.size()) {
    size_t j = i;
    int value = 0;
    while (j < host.size() && std::isdigit(static_cast<unsigned char>(host[j])) && j - i < 3) {
      value = value * 10 + (host[j] - '0');
      ++j;
    }
    if (j == i || value > 255) return false;
    if (parts == 0) first = value;
    ++parts;
    if (j == host.size()) break;
    if (host[j] != '.') return false;
    i = j + 1;
  }
  return parts == 4 && first == 127;
}

}  // namespace

bool IsLoopbackHost(std::string_view raw) {
  const std::string host = AsciiLower(HostWithoutPort(TrimSpacesAndTabs(raw)));
  if (host == "localhost" || host == "::1") return true;
  // RFC 6761: browsers resolve *.localhost to loopback themselves, so no DNS can rebind it.
  if (host.size() > 10 && host.compare(host.size() - 10, 10, ".localhost") == 0) return true;
  return IsLoopbackIpv4(host);
}

std::optional<ApiError> CheckHost(std::string_view host_header, bool listening_on_loopback) {
  if (!listening_on_loopback || TrimSpacesAndTabs(host_header).empty() || IsLoopbackHost(host_header)) {
    return std::nullopt;
  }
  return Forbidden(fmt::format("the Host header '{}' does not name this server: listening on loopback, it answers "
                               "only requests for localhost, 127.0.0.1 or [::1] (this stops web pages that rebind "
                               "their DNS name to 127.0.0.1); use one of those in the URL, or listen on another --host",
                               SafeText(host_header)));
}

bool OriginAllowed(std::string_view origin, const std::vector<std::string>& allowed) {
  const std::string want = AsciiLower(TrimSpacesAndTabs(origin));
  for (const std::string& a : allowed) {
    if (a == "*" || AsciiLower(TrimSpacesAndTabs(a)) == want) return true;
  }
  return false;
}

std::optional<ApiError> CheckOrigin(std::string_view origin, const std::vector<std::string>& allowed) {
  if (origin.empty() || OriginAllowed(origin, allowed)) return std::nullopt;
  return Forbidden(fmt::format("requests from web pages of origin '{}' are refused; to allow that page, start the "
                               "server with --allowed-origins {}",
                               SafeText(origin), SafeText(origin)));
}

std::optional<ApiError> CheckContentType(std::string_view method, std::string_view content_type) {
  if (method != "POST") return std::nullopt;
  const std::string_view media = TrimSpacesAndTabs(content_type.substr(0, content_type.find(';')));
  if (media.empty()) return std::nullopt;
  const std::string type = AsciiLower(media);
  if (type == "application/json" || (type.rfind("application/", 0) == 0 && type.size() > 17 &&
                                      type.compare(type.size() - 5, 5, "+json") == 0)) {
    return std::nullopt;
  }
  return UnsupportedMediaType(fmt::format("the request body is '{}'; send JSON with 'Content-Type: "
                                          "application/json' (curl: -H 'Content-Type: application/json')",
                                          SafeText(media)));
}

bool ApiKeyMatches(std::string_view authorization, std::string_view api_key) {
  constexpr std::string_view kScheme = "Bearer ";
  const bool has_scheme = authorization.substr(0, kScheme.size()) == kScheme;
  const std::string_view token = has_scheme ? authorization.substr(kScheme.size()) : std::string_view();
  // Every byte of the key is compared whatever came before, so the time taken tells an attacker
  // nothing about how much of a guess was right (it depends on the key's length only).
  volatile unsigned char diff = token.size() == api_key.size() ? 0 : 1;
  for (size_t i = 0; i < api_key.size(); ++i) {
    const unsigned char sent = i < token.size() ? static_cast<unsigned char>(token[i]) : 0;
    diff = diff | (sent ^ static_cast<unsigned char>(api_key[i]));
  }
  return has_scheme && diff == 0;
}

}  // namespace ember::server
