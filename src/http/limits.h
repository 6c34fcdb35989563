// What one connection may send and how long it may take, and the checks on a request's head
// that need no socket (so that they are unit-tested): the server applies them while reading,
// before any body byte is accepted.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ember::http {

struct HttpLimits {
  size_t max_header_bytes = 16u << 10;  // request line and headers together (431 past it)
  size_t max_header_count = 100;        // header fields (431)
  size_t max_target_bytes = 8u << 10;   // the request target (414)
  size_t max_body_bytes = 8u << 20;     // after chunked decoding; Content-Length past it is refused unread (413)
  // From the moment a connection waits for a request (a new one, or idle between requests) to
  // the end of its header: idle and slow (slowloris) clients are dropped when it passes.
  std::chrono::milliseconds header_timeout{std::chrono::seconds(30)};
  // From the end of the header to the end of the body.
  std::chrono::milliseconds body_timeout{std::chrono::seconds(30)};
  // One write stuck (a client that stopped reading its stream).
  std::chrono::milliseconds write_timeout{std::chrono::seconds(30)};
};

// A refusal the server answers itself: the status and a message that quotes no request bytes.
struct HttpRefusal {
  int status = 400;
  std::string message;
};

// The request head (its field count, target and coding headers) against `limits`: nullopt when
// the body may be read. A Content-Encoding other than identity is a 415 (ember never inflates a
// body, so a compressed bomb cannot grow past the limit); a Transfer-Encoding other than chunked
// is a 501.
std::optional<HttpRefusal> CheckRequestHead(const HttpLimits& limits, size_t header_count, size_t target_bytes,
                                            std::string_view content_encoding, std::string_view transfer_encoding);

// The message of the server's own 413 and 431 answers.
std::string BodyTooLargeMessage(const HttpLimits& limits);
std::string HeaderTooLargeMessage(const HttpLimits& limits);

}  // namespace ember::http
