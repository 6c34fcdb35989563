// Base URLs of HTTP servers this process calls (the bench client's target, the router's
// upstreams): "http://host:port[/prefix]" split once, so that every client connects the same way.
#pragma once

#include <string>

#include "core/status.h"

namespace ember::http {

struct HttpUrl {
  std::string origin;       // "http://127.0.0.1:8000": scheme, host and port as written
  std::string scheme;       // "http" or "https" (clients here speak plain http only)
  std::string authority;    // "127.0.0.1:8000": the Host header
  std::string host;         // "127.0.0.1", an IPv6 literal without its brackets
  std::string port;         // "8000"; "80" when the URL names none
  std::string path_prefix;  // "" or "/some/prefix" (no trailing '/')
};

// "http://host[:port][/prefix]" -> its parts; `what` names the flag in the error ("--base-url").
Expected<HttpUrl> ParseHttpUrl(const std::string& url, const std::string& what);

}  // namespace ember::http
