// Remote media (http:// and https:// URLs in image_url, video_url and audio_url parts), fetched
// with libcurl only when the operator opts in with --allowed-media-domains. A media URL is a
// request the server makes on a client's behalf, so every fetch is fenced against server-side
// request forgery and against exhausting the server:
//   - only hosts on the allowlist (exact names, or "*.example.com" for its subdomains);
//   - a host given as a name must connect to a public address: the address curl actually
//     connected to is checked before the request is sent (CURLOPT_PREREQFUNCTION), so a name that
//     resolves, or is rebound, to 127.0.0.1, 10.x, 169.254.169.254 (cloud metadata), fc00::/7 ...
//     is refused. An allowlist entry that is itself an IP address (127.0.0.1, [::1]) is the
//     operator naming that address, and it may be any address;
//   - redirects are followed by hand, at most kMaxRedirects, each hop checked as the first;
//   - http and https only, no proxy from the environment, no content decoding (no inflate bombs);
//   - the body at most --max-media-bytes (a larger Content-Length is refused before any body byte,
//     a body that grows past it is cut), everything within --media-fetch-timeout.
// The fetch blocks the handler thread that parses the request (--http-threads), for at most the
// timeout.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"
#include "server/protocol/api_error.h"

namespace ember::server {

struct RemoteMediaPolicy {
  // Lower-case hosts: "images.example.com", "*.example.com" (any subdomain, not the domain
  // itself), "127.0.0.1", "::1". Empty: remote URLs are refused.
  std::vector<std::string> allowed_domains;
  double timeout_seconds = 10;  // the whole fetch, redirects included

  bool enabled() const { return !allowed_domains.empty(); }
};

inline constexpr int kMaxRedirects = 3;

// "--allowed-media-domains a.com,*.b.org,[::1]" into lower-case entries; InvalidArgument for an
// empty entry, a scheme, a path, a port or a bare "*".
Expected<std::vector<std::string>> ParseAllowedMediaDomains(std::string_view csv);

// Whether `host` (as a URL names it; IPv6 in brackets or not) is on the allowlist.
bool HostAllowed(const RemoteMediaPolicy& policy, std::string_view host);

// Whether `host` is an IPv4 or IPv6 literal (brackets allowed).
bool IsIpLiteral(std::string_view host);

// Whether a numeric address (IPv4 dotted or IPv6 text) is a public unicast address, one a name on
// the internet may lead to: not loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7),
// shared (100.64/10), link-local (169.254/16, fe80::/10), unspecified, multicast, reserved,
// documentation or benchmarking ranges; IPv4-mapped, NAT64 and 6to4 IPv6 addresses are judged by
// the IPv4 address they carry. False for text that is not an address.
bool IsPublicAddress(std::string_view address);

// The body of the http(s) `url` under `policy`, at most `max_bytes`. `field` names the content
// part in the error (a 400 saying what failed: not allowed, refused address, HTTP status, too
// large, timed out, unreachable).
std::variant<std::vector<uint8_t>, ApiError> FetchRemoteMedia(const std::string& url, const RemoteMediaPolicy& policy,
                                                              int64_t max_bytes, const std::string& field);

}  // namespace ember::server
