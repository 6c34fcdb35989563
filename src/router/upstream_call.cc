#include "router/upstream_call.h"

#include <fmt/format.h>

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <limits>

namespace ember::router {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

double Seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

struct UpstreamCall::Impl {
  Impl(asio::any_io_executor ex, UpstreamRequest req, UpstreamTimeouts t, Handlers h)
      : executor(ex), request(std::move(req)), timeouts(t), handlers(std::move(h)), resolver(ex), stream(ex) {}

  asio::any_io_executor executor;
  UpstreamRequest request;
  UpstreamTimeouts timeouts;
  Handlers handlers;
  tcp::resolver resolver;
  beast::tcp_stream stream;
  bhttp::request<bhttp::string_body> message;
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  std::array<char, 16384> piece;
  bool ended = false;
  bool cancelled = false;
  bool paused = false;  // the body's handler asked to wait (Resume)

  void End(std::optional<UpstreamFailure> failure) {
    if (ended) return;
    ended = true;
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
    auto on_end = std::move(handlers.on_end);
    handlers = {};  // drops what the handlers hold (the proxy call) once the exchange is over
    if (on_end) on_end(std::move(failure));
  }

  // The failure of `stage` from `ec`, unless the call was cancelled (that wins: the cause).
  void Fail(UpstreamStage stage, beast::error_code ec) {
    if (cancelled) return End(UpstreamFailure{UpstreamStage::kCancelled, "was cancelled (the client went away)"});
    const bool timeout = ec == beast::error::timeout;
    std::string what;
    switch (stage) {
      case UpstreamStage::kResolve:
        what = fmt::format("could not be resolved ({})", ec.message());
        break;
      case UpstreamStage::kConnect:
        if (ec == asio::error::connection_refused) {
          what = "refused the connection";
        } else if (timeout) {
          what = fmt::format("did not accept a connection within {} s", Seconds(timeouts.connect));
        } else {
          what = fmt::format("could not be connected to ({})", ec.message());
        }
        break;
      case UpstreamStage::kSend:
        what = fmt::format("failed while the request was sent ({})", ec.message());
        break;
      case UpstreamStage::kHead:
        if (timeout) {
          what = fmt::format("sent no response within {} s (--request-timeout-s)", Seconds(timeouts.read));
        } else if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) {
          what = "closed the connection without answering";
        } else {
          what = fmt::format("sent no valid response ({})", ec.message());
        }
        break;
      case UpstreamStage::kBody:
        if (timeout) {
          what = fmt::format("went silent mid-response for {} s (--request-timeout-s)", Seconds(timeouts.read));
        } else if (ec == bhttp::error::partial_message || ec == asio::error::eof ||
                   ec == asio::error::connection_reset) {
          what = "closed the connection mid-response";
        } else {
          what = fmt::format("failed mid-response ({})", ec.message());
        }
        break;
      case UpstreamStage::kCancelled:
        what = "was cancelled";
        break;
    }
    End(UpstreamFailure{stage, std::move(what)});
  }
};

// Reads the body a piece at a time; each piece is handed on before the next is read, and a
// handler that has too much waiting (a slow client) pauses the reading until Resume().
void UpstreamCall::ReadBody(const std::shared_ptr<UpstreamCall>& call) {
  Impl& s = *call->impl_;
  if (s.ended || s.parser.is_done()) return s.End(std::nullopt);
  s.parser.get().body().data = s.piece.data();
  s.parser.get().body().size = s.piece.size();
  s.stream.expires_after(s.timeouts.read);
  bhttp::async_read_some(s.stream, s.buffer, s.parser, [call](beast::error_code ec, size_t) {
    Impl& s = *call->impl_;
    if (ec == bhttp::error::need_buffer) ec = {};
    const size_t n = s.piece.size() - s.parser.get().body().size;
    bool more = true;
    if (n > 0 && !s.cancelled && s.handlers.on_body) more = s.handlers.on_body(std::string_view(s.piece.data(), n));
    if (ec || s.cancelled) return s.Fail(UpstreamStage::kBody, ec);
    if (!more && !s.parser.is_done()) {
      s.paused = true;
      return;
    }
    ReadBody(call);
  });
}

void UpstreamCall::Resume() {
  asio::post(impl_->executor, [call = shared_from_this()] {
    Impl& s = *call->impl_;
    if (s.ended || !s.paused) return;
    s.paused = false;
    ReadBody(call);
  });
}

UpstreamCall::UpstreamCall(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UpstreamCall::~UpstreamCall() = default;

std::shared_ptr<UpstreamCall> UpstreamCall::Start(asio::any_io_executor executor, UpstreamRequest request,
                                                  UpstreamTimeouts timeouts, Handlers handlers) {
  auto call = std::shared_ptr<UpstreamCall>(
      new UpstreamCall(std::make_unique<Impl>(executor, std::move(request), timeouts, std::move(handlers))));
  Impl& s = *call->impl_;
  const http::HttpUrl& url = *s.request.url;
  s.message = {s.request.method == "GET" ? bhttp::verb::get : bhttp::verb::post, url.path_prefix + s.request.path, 11};
  s.message.set(bhttp::field::host, url.authority);
  // One connection per exchange: closing it is the cancel signal the instance understands.
  s.message.set(bhttp::field::connection, "close");
  if (!s.request.api_key.empty()) s.message.set(bhttp::field::authorization, "Bearer " + s.request.api_key);
  if (!s.request.request_id.empty()) s.message.set("X-Request-Id", s.request.request_id);
  if (s.message.method() == bhttp::verb::post) {
    s.message.set(bhttp::field::content_type, "application/json");
    s.message.body() = std::move(s.request.body);
    s.message.prepare_payload();
  }
  s.parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // the caller bounds what it keeps
  s.parser.header_limit(64u << 10);

  asio::post(executor, [call] {
    Impl& s = *call->impl_;
    if (s.cancelled) return s.Fail(UpstreamStage::kCancelled, {});
    s.resolver.async_resolve(
        s.request.url->host, s.request.url->port, [call](beast::error_code ec, tcp::resolver::results_type endpoints) {
          Impl& s = *call->impl_;
          if (ec || s.cancelled) return s.Fail(UpstreamStage::kResolve, ec);
          s.stream.expires_after(s.timeouts.connect);
          s.stream.async_connect(endpoints, [call](beast::error_code ec, const tcp::endpoint&) {
            Impl& s = *call->impl_;
            if (ec || s.cancelled) return s.Fail(UpstreamStage::kConnect, ec);
            s.stream.expires_after(s.timeouts.read);
            bhttp::async_write(s.stream, s.message, [call](beast::error_code ec, size_t) {
              Impl& s = *call->impl_;
              if (ec || s.cancelled) return s.Fail(UpstreamStage::kSend, ec);
              s.stream.expires_after(s.timeouts.read);
              bhttp::async_read_header(s.stream, s.buffer, s.parser, [call](beast::error_code ec, size_t) {
                Impl& s = *call->impl_;
                if (ec || s.cancelled) return s.Fail(UpstreamStage::kHead, ec);
                const auto& head = s.parser.get();
                if (s.handlers.on_head) {
                  s.handlers.on_head(head.result_int(), std::string(head[bhttp::field::content_type]));
                }
                ReadBody(call);
              });
            });
          });
        });
  });
  return call;
}

void UpstreamCall::Cancel() {
  // The connection's operations belong to the executor's strand: the close happens there.
  asio::post(impl_->executor, [call = shared_from_this()] {
    Impl& s = *call->impl_;
    if (s.ended) return;
    s.cancelled = true;
    beast::error_code ignored;
    s.resolver.cancel();
    s.stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    s.stream.close();
    // Paused, no operation is pending to report it: end here.
    if (s.paused) s.Fail(UpstreamStage::kCancelled, {});
  });
}

}  // namespace ember::router
