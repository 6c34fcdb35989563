#include "http/wire.h"

#include <fmt/format.h>

#include <sstream>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace ember::http {
namespace bhttp = boost::beast::http;

namespace {
template <class Message>
void CopyHeaders(const HttpResponse& response, Message* message) {
  for (const auto& [name, value] : response.headers) message->insert(name, value);
  if (!response.content_type.empty()) message->set(bhttp::field::content_type, response.content_type);
}
}  // namespace

std::string SerializeResponse(const HttpResponse& response, unsigned version, bool keep_alive) {
  bhttp::response<bhttp::string_body> message(static_cast<bhttp::status>(response.status), version);
  CopyHeaders(response, &message);
  message.body() = response.body;
  message.keep_alive(keep_alive);
  message.prepare_payload();
  std::ostringstream out;
  out << message;
  return std::move(out).str();
}

std::string SerializeStreamHead(const HttpResponse& response, unsigned version, bool keep_alive, bool chunked) {
  bhttp::response<bhttp::empty_body> message(static_cast<bhttp::status>(response.status), version);
  CopyHeaders(response, &message);
  message.keep_alive(keep_alive && chunked);
  if (chunked) message.chunked(true);
  std::ostringstream out;
  out << message.base();
  return std::move(out).str();
}

std::string FrameChunk(std::string_view data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

}  // namespace ember::http
