#include "http/limits.h"

#include <fmt/format.h>

namespace ember::http {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// True when every comma-separated coding of `header` is one of `allowed` (or the header is empty).
bool OnlyCodings(std::string_view header, std::string_view allowed_a, std::string_view allowed_b) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    const std::string_view coding = Trim(header.substr(0, comma));
    if (!coding.empty() && !EqualsIgnoringCase(coding, allowed_a) && !EqualsIgnoringCase(coding, allowed_b)) {
      return false;
    }
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return true;
}

}  // namespace

std::optional<HttpRefusal> CheckRequestHead(const HttpLimits& limits, size_t header_count, size_t target_bytes,
                                            std::string_view content_encoding, std::string_view transfer_encoding) {
  if (header_count > limits.max_header_count) {
    return HttpRefusal{431, fmt::format("the request has {} header fields; at most {} are accepted", header_count,
                                        limits.max_header_count)};
  }
  if (target_bytes > limits.max_target_bytes) {
    return HttpRefusal{414, fmt::format("the request target is {} bytes; at most {} are accepted", target_bytes,
                                        limits.max_target_bytes)};
  }
  if (!OnlyCodings(content_encoding, "identity", "identity")) {
    return HttpRefusal{415, "compressed request bodies (Content-Encoding) are not accepted; send the body "
                            "uncompressed"};
  }
  if (!OnlyCodings(transfer_encoding, "chunked", "identity")) {
    return HttpRefusal{501, "the only Transfer-Encoding accepted is chunked"};
  }
  return std::nullopt;
}

std::string BodyTooLargeMessage(const HttpLimits& limits) {
  return fmt::format("the request body exceeds {} bytes", limits.max_body_bytes);
}

std::string HeaderTooLargeMessage(const HttpLimits& limits) {
  return fmt::format("the request line and headers exceed {} bytes", limits.max_header_bytes);
}

}  // namespace ember::http
