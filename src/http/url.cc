#include "http/url.h"

#include <fmt/format.h>

namespace ember::http {

Expected<HttpUrl> ParseHttpUrl(const std::string& url, const std::string& what) {
  const size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if ((scheme != "http" && scheme != "https") || url.size() == scheme_end + 3 || url[scheme_end + 3] == '/') {
    return InvalidArgument(fmt::format("{} must look like http://HOST:PORT (got '{}')", what, url));
  }
  HttpUrl out;
  out.scheme = scheme;
  const size_t path = url.find('/', scheme_end + 3);
  out.origin = url.substr(0, path);
  if (path != std::string::npos) {
    out.path_prefix = url.substr(path);
    while (!out.path_prefix.empty() && out.path_prefix.back() == '/') out.path_prefix.pop_back();
  }
  out.authority = out.origin.substr(scheme_end + 3);
  const size_t colon = out.authority.rfind(':');
  const bool has_port = colon != std::string::npos && out.authority.find(']', colon) == std::string::npos;
  out.host = has_port ? out.authority.substr(0, colon) : out.authority;
  out.port = has_port ? out.authority.substr(colon + 1) : (scheme == "https" ? "443" : "80");
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  if (out.host.empty() || out.port.empty() || out.port.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument(fmt::format("{} must look like http://HOST:PORT (got '{}')", what, url));
  }
  return out;
}

}  // namespace ember::http
