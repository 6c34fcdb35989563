// HttpResponse to bytes on the wire, serialized by Beast: whole responses, and the head of a
// streamed one (its chunks are framed by FrameChunk).
#pragma once

#include <string>
#include <string_view>

#include "http/message.h"

namespace ember::http {

// The whole response, Content-Length set; `keep_alive` false adds Connection: close.
std::string SerializeResponse(const HttpResponse& response, unsigned version, bool keep_alive);
// The status line and headers of a streamed response: chunked on HTTP/1.1, else delimited by
// the connection's close.
std::string SerializeStreamHead(const HttpResponse& response, unsigned version, bool keep_alive, bool chunked);
// One chunk of a chunked body ("" is not a chunk: the last chunk is kLastChunk).
std::string FrameChunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace ember::http
