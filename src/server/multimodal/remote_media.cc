#include "server/multimodal/remote_media.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>

#include "core/ascii.h"
#include "server/multimodal/media_source.h"
#include "server/protocol/safe_text.h"

namespace ember::server {
namespace {

std::string_view StripBrackets(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

// IPv4 ranges that no public name should lead to (RFC 6890's special-purpose registry, less the
// globally reachable entries): {network, prefix length}.
constexpr std::array<std::pair<uint32_t, int>, 15> kNonPublicV4 = {{
    {0x00000000, 8},   // "this network"
    {0x0A000000, 8},   // private
    {0x64400000, 10},  // shared address space (carrier-grade NAT)
    {0x7F000000, 8},   // loopback
    {0xA9FE0000, 16},  // link-local (cloud metadata endpoints live here)
    {0xAC100000, 12},  // private
    {0xC0000000, 24},  // IETF protocol assignments
    {0xC0000200, 24},  // documentation
    {0xC0586300, 24},  // 6to4 relay anycast (deprecated)
    {0xC0A80000, 16},  // private
    {0xC6120000, 15},  // benchmarking
    {0xC6336400, 24},  // documentation
    {0xCB007100, 24},  // documentation
    {0xE0000000, 4},   // multicast
    {0xF0000000, 4},   // reserved, and the broadcast address
}};

bool IsPublicV4(uint32_t address) {
  for (const auto& [network, bits] : kNonPublicV4) {
    const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
    if ((address & mask) == network) return false;
  }
  return true;
}

uint32_t V4At(const uint8_t* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | bytes[3];
}

bool IsPublicV6(const std::array<uint8_t, 16>& a) {
  const auto starts = [&](std::initializer_list<uint8_t> prefix) { return std::equal(prefix.begin(), prefix.end(), a.begin()); };
  // ::ffff:a.b.c.d (mapped) and 64:ff9b::a.b.c.d (NAT64) reach an IPv4 host: judge that one.
  if (starts({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}) || starts({0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0})) {
    return IsPublicV4(V4At(a.data() + 12));
  }
  if (starts({0x20, 0x02})) return IsPublicV4(V4At(a.data() + 2));  // 6to4 carries its IPv4 in bits 16..47
  // Global unicast is 2000::/3. Inside it, no media host lives in the IETF protocol-assignment
  // block 2001::/23 (Teredo, benchmarking, ORCHID, ...) or the documentation ranges 2001:db8::/32
  // and 3fff::/20.
  if ((a[0] & 0xe0) != 0x20) return false;
  if (a[0] == 0x20 && a[1] == 0x01 && a[2] < 0x02) return false;
  if (starts({0x20, 0x01, 0x0d, 0xb8})) return false;
  if (a[0] == 0x3f && (a[1] & 0xf0) == 0xf0) return false;
  return true;
}

struct CurlEasyDeleter {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
struct CurlUrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};
struct CurlTextDeleter {
  void operator()(char* text) const { curl_free(text); }
};
using CurlText = std::unique_ptr<char, CurlTextDeleter>;

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct UrlParts {
  std::string scheme;
  std::string host;  // lower case, IPv6 in brackets as curl gives it
};

// The scheme and host libcurl itself will use (so "http://allowed@evil/" is host "evil", as curl
// would connect to it), or nullopt for a URL curl cannot parse.
std::optional<UrlParts> ParseUrl(const std::string& url) {
  std::unique_ptr<CURLU, CurlUrlDeleter> handle(curl_url());
  if (!handle || curl_url_set(handle.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return std::nullopt;
  char* scheme = nullptr;
  char* host = nullptr;
  if (curl_url_get(handle.get(), CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) return std::nullopt;
  CurlText scheme_owner(scheme);
  if (curl_url_get(handle.get(), CURLUPART_HOST, &host, 0) != CURLUE_OK) return std::nullopt;
  CurlText host_owner(host);
  return UrlParts{AsciiLower(scheme), AsciiLower(host)};
}

// What one transfer collects; the callbacks' user data.
struct Transfer {
  int64_t max_bytes = 0;
  bool check_address = false;  // the host is a name: the address connected to must be public
  std::vector<uint8_t> body;
  bool too_large = false;
  std::string refused_address;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  if (static_cast<int64_t>(t->body.size() + bytes) > t->max_bytes) {
    t->too_large = true;
    return 0;  // CURLE_WRITE_ERROR: the transfer stops here
  }
  t->body.insert(t->body.end(), data, data + bytes);
  return bytes;
}

// Runs after the connection is made and before the request is sent, with the address curl
// connected to: what is checked is what is used, so no later resolution can swap it.
int OnConnected(void* user, char* primary_ip, char* /*local_ip*/, int /*primary_port*/, int /*local_port*/) {
  auto* t = static_cast<Transfer*>(user);
  if (t->check_address && !IsPublicAddress(primary_ip)) {
    t->refused_address = primary_ip;
    return CURL_PREREQFUNC_ABORT;
  }
  return CURL_PREREQFUNC_OK;
}

struct HopResult {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string redirect;  // the Location a 3xx answered, resolved against the URL
};

HopResult FetchOnce(const std::string& url, Transfer& t, std::chrono::milliseconds budget) {
  std::unique_ptr<CURL, CurlEasyDeleter> curl(curl_easy_init());
  HopResult r;
  if (!curl) {
    r.code = CURLE_FAILED_INIT;
    return r;
  }
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);  // each hop is checked here, not followed blind
  curl_easy_setopt(c, CURLOPT_PROXY, "");           // no proxy from the environment: the check sees the host
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);        // handler threads: no SIGALRM for resolver timeouts
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<int64_t>(1, budget.count())));
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(t.max_bytes));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, &OnConnected);
  curl_easy_setopt(c, CURLOPT_PREREQDATA, &t);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "ember");
  r.code = curl_easy_perform(c);
  if (r.code != CURLE_OK) return r;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  char* location = nullptr;
  if (r.status >= 300 && r.status < 400 && curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &location) == CURLE_OK &&
      location != nullptr) {
    r.redirect = location;
  }
  return r;
}

}  // namespace

Expected<std::vector<std::string>> ParseAllowedMediaDomains(std::string_view csv) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= csv.size()) {
    const size_t comma = std::min(csv.find(',', start), csv.size());
    const std::string_view entry = TrimSpacesAndTabs(csv.substr(start, comma - start));
    start = comma + 1;
    if (IsIpLiteral(entry)) {
      out.push_back(AsciiLower(StripBrackets(entry)));
      continue;
    }
    // A host name, or "*." and a domain: no scheme, port, path, user info or other wildcard.
    const std::string_view name = entry.starts_with("*.") ? entry.substr(2) : entry;
    if (name.empty() || name.find_first_of("/:*@ \t") != std::string_view::npos) {
      return InvalidArgument(fmt::format("--allowed-media-domains: '{}' is not a host name, '*.domain' or an IP address "
                                         "(no scheme, port or path; comma-separated)",
                                         std::string(entry)));
    }
    out.push_back(AsciiLower(entry));
  }
  return out;
}

bool IsIpLiteral(std::string_view host) {
  const std::string bare(StripBrackets(host));
  std::array<uint8_t, 16> buffer{};
  return inet_pton(AF_INET, bare.c_str(), buffer.data()) == 1 || inet_pton(AF_INET6, bare.c_str(), buffer.data()) == 1;
}

bool HostAllowed(const RemoteMediaPolicy& policy, std::string_view host) {
  const std::string bare = AsciiLower(StripBrackets(host));
  if (bare.empty()) return false;
  for (const std::string& entry : policy.allowed_domains) {
    if (entry == bare) return true;
    if (entry.rfind("*.", 0) == 0) {
      const std::string_view suffix = std::string_view(entry).substr(1);  // ".example.com"
      if (bare.size() > suffix.size() && bare.compare(bare.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          !IsIpLiteral(bare)) {
        return true;
      }
    }
  }
  return false;
}

bool IsPublicAddress(std::string_view address) {
  const std::string text(StripBrackets(address));
  std::array<uint8_t, 16> bytes{};
  if (inet_pton(AF_INET, text.c_str(), bytes.data()) == 1) return IsPublicV4(V4At(bytes.data()));
  if (inet_pton(AF_INET6, text.c_str(), bytes.data()) == 1) return IsPublicV6(bytes);
  return false;
}

std::variant<std::vector<uint8_t>, ApiError> FetchRemoteMedia(const std::string& url, const RemoteMediaPolicy& policy,
                                                              int64_t max_bytes, const std::string& field) {
  if (!policy.enabled()) {
    return MediaRefusal(field, "this server does not fetch remote URLs; send the media inline as a data: URL "
                               "(data:<type>;base64,...), or start the server with --allowed-media-domains HOSTS");
  }
  InitCurlOnce();
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(std::ceil(policy.timeout_seconds * 1000)));
  const auto timed_out = [&](const std::string& shown) {
    return MediaRefusal(field, fmt::format("'{}' did not arrive within {} s (--media-fetch-timeout)", shown,
                                           policy.timeout_seconds));
  };
  std::string current = url;
  for (int hop = 0;; ++hop) {
    const std::optional<UrlParts> parts = ParseUrl(current);
    const std::string shown = SafeText(current, 200);
    if (!parts || (parts->scheme != "http" && parts->scheme != "https")) {
      return MediaRefusal(field, fmt::format("'{}' is not a valid http:// or https:// URL", shown));
    }
    if (!HostAllowed(policy, parts->host)) {
      return MediaRefusal(field, fmt::format("the host '{}' is not in --allowed-media-domains{}", SafeText(parts->host, 200),
                                             hop > 0 ? " (reached by a redirect)" : ""));
    }
    Transfer t;
    t.max_bytes = max_bytes;
    t.check_address = !IsIpLiteral(parts->host);
    const auto budget = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (budget.count() <= 0) return timed_out(shown);
    const HopResult r = FetchOnce(current, t, budget);
    if (!t.refused_address.empty()) {
      return MediaRefusal(field, fmt::format("the host '{}' leads to {}, which is not a public address; a media URL's "
                                             "host name must reach a public address (name the address itself in "
                                             "--allowed-media-domains to allow it)",
                                             SafeText(parts->host, 200), t.refused_address));
    }
    if (t.too_large || r.code == CURLE_FILESIZE_EXCEEDED) return MediaTooLarge(field, max_bytes);
    if (r.code == CURLE_OPERATION_TIMEDOUT) return timed_out(shown);
    if (r.code != CURLE_OK) {
      return MediaRefusal(field, fmt::format("fetching '{}' failed: {}", shown, curl_easy_strerror(r.code)));
    }
    if (r.status >= 300 && r.status < 400) {
      if (r.redirect.empty()) return MediaRefusal(field, fmt::format("'{}' answered HTTP {} without a Location", shown, r.status));
      if (hop == kMaxRedirects) {
        return MediaRefusal(field, fmt::format("'{}' redirected more than {} times", SafeText(url, 200), kMaxRedirects));
      }
      current = r.redirect;
      continue;
    }
    if (r.status != 200) return MediaRefusal(field, fmt::format("'{}' answered HTTP {}", shown, r.status));
    if (t.body.empty()) return MediaRefusal(field, fmt::format("'{}' answered with no data", shown));
    return std::move(t.body);
  }
}

}  // namespace ember::server
