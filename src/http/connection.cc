#include "http/connection.h"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include "core/logging.h"
#include "http/state.h"
#include "http/wire.h"

namespace ember::http {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {
// Comments keep a quiet stream's proxies from timing it out.
constexpr auto kStreamTick = std::chrono::seconds(1);
// A stream's bytes not yet written past which its body is not pumped: a client that reads
// slowly holds its producer back (a proxied upstream, through TCP) rather than growing this
// buffer. The pump resumes when a write completes.
constexpr size_t kMaxUnsentStreamBytes = 1u << 20;
// After the last response of a connection that closes: how long, and how many bytes, the
// client's unread input is drained for (closing with input unread resets the connection, and
// the client may lose the answer, e.g. a 413, before it reads it).
constexpr auto kLinger = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 64u << 20;
}  // namespace

HttpConnection::HttpConnection(tcp::socket socket, HttpServer::State* server)
    : server_(server),
      stream_(std::move(socket)),
      executor_(stream_.get_executor()),
      idle_timer_(executor_),
      tick_(executor_),
      // The header must fit whole; body bytes pass through in pieces of at most this size.
      buffer_(server->options.limits.max_header_bytes + 4096) {}

HttpConnection::~HttpConnection() {
  if (body_) body_->Abort();
  server_->Unregister(this);
}

void HttpConnection::Start() {
  asio::post(executor_, [self = shared_from_this()] { self->ReadRequest(); });
}

void HttpConnection::Drain() {
  asio::post(executor_, [self = shared_from_this()] {
    self->draining_ = true;
    self->keep_alive_ = false;
    if (self->phase_ == Phase::kReading && self->idle_wait_) self->Close();  // idle: nothing in flight
  });
}

void HttpConnection::AbortWork() {
  asio::post(executor_, [self = shared_from_this()] {
    if (self->body_) self->body_->Abort();
    self->PumpBody();
  });
}

// --- reading ---------------------------------------------------------------------------------

void HttpConnection::ReadRequest() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kReading;
  header_deadline_ = std::chrono::steady_clock::now() + server_->options.limits.header_timeout;
  if (buffer_.size() > 0) return ReadHeader();  // a pipelined request is already here
  // Wait for the first byte without a buffer: an idle connection costs its socket and this object.
  buffer_.shrink_to_fit();
  idle_wait_ = true;
  idle_timer_.expires_at(header_deadline_);
  idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && self->idle_wait_) self->Close();  // idle past the timeout: dropped
  });
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
    self->idle_wait_ = false;
    self->idle_timer_.cancel();
    if (ec || self->phase_ == Phase::kClosed) return self->Close();
    self->ReadHeader();
  });
}

void HttpConnection::ReadHeader() {
  const HttpLimits& limits = server_->options.limits;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  // Beast refuses a Content-Length above this as soon as the header ends, and counts chunked
  // bodies against it as they arrive.
  parser_->body_limit(limits.max_body_bytes);
  stream_.expires_at(header_deadline_);
  bhttp::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void HttpConnection::OnHeader(beast::error_code ec) {
  if (ec) return OnReadError(ec);
  const auto& head = parser_->get();
  const size_t count = static_cast<size_t>(std::distance(head.begin(), head.end()));
  const auto view = [](boost::beast::string_view v) { return std::string_view(v.data(), v.size()); };
  if (auto refusal = CheckRequestHead(server_->options.limits, count, head.target().size(),
                                      view(head[bhttp::field::content_encoding]),
                                      view(head[bhttp::field::transfer_encoding]))) {
    return Refuse(*refusal);
  }
  if (parser_->is_done()) return Dispatch();
  if (beast::iequals(head[bhttp::field::expect], "100-continue")) {
    // The client waits for this before it sends the body (curl does, for large ones).
    Send("HTTP/1.1 100 Continue\r\n\r\n", /*completes_response=*/false);
  }
  ReadBody();
}

void HttpConnection::ReadBody() {
  stream_.expires_after(server_->options.limits.body_timeout);
  bhttp::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
}

void HttpConnection::OnBody(beast::error_code ec) {
  if (ec) return OnReadError(ec);
  Dispatch();
}

void HttpConnection::OnReadError(beast::error_code ec) {
  const HttpLimits& limits = server_->options.limits;
  if (ec == bhttp::error::body_limit) return Refuse({413, BodyTooLargeMessage(limits)});
  if (ec == bhttp::error::header_limit) return Refuse({431, HeaderTooLargeMessage(limits)});
  if (ec == bhttp::error::buffer_overflow) return Refuse({431, HeaderTooLargeMessage(limits)});
  // The peer went away, or was too slow (beast::error::timeout: the stream is closed already).
  if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
      ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
      phase_ == Phase::kClosed) {
    return Close();
  }
  // Anything else is a message that is not HTTP/1.1 (ec.message() names Beast's reason, never
  // request bytes).
  Refuse({400, "malformed HTTP request: " + ec.message()});
}

// --- handling --------------------------------------------------------------------------------

void HttpConnection::Dispatch() {
  phase_ = Phase::kHandling;
  stream_.expires_never();
  auto message = parser_->release();
  parser_.reset();
  version_ = message.version();
  keep_alive_ = keep_alive_ && message.keep_alive() && !draining_;
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.path = request.target.substr(0, request.target.find('?'));
  for (const auto& field : message) request.headers.emplace_back(field.name_string(), field.value());
  request.body = std::move(message.body());
  WatchPeer();
  // The handler (parsing, the chat template, tokenizing) runs on the pool; the work guard keeps
  // the I/O threads up until its response is back on this strand.
  asio::post(server_->handlers, [self = shared_from_this(), request = std::move(request),
                                 work = asio::make_work_guard(server_->ioc)]() mutable {
    HttpResponse response;
    try {
      self->server_->handler(request, response);
    } catch (...) {
      EMBER_LOG_ERROR("an HTTP handler threw; answering 500");
      self->server_->error_responder({500, "internal error while handling the request"}, response);
    }
    asio::post(self->executor_, [self, response = std::move(response)]() mutable {
      self->OnResponse(std::move(response));
    });
  });
}

void HttpConnection::OnResponse(HttpResponse response) {
  if (phase_ == Phase::kClosed) {
    if (response.deferred) response.deferred->Abort();
    return;
  }
  if (response.deferred) return StartDeferred(std::move(response));
  SendWhole(std::move(response));
}

void HttpConnection::StartDeferred(HttpResponse response) {
  body_ = std::move(response.deferred);
  std::weak_ptr<HttpConnection> weak = weak_from_this();
  body_->SetWaker([weak] {
    if (auto self = weak.lock()) self->Wake();
  });
  if (peer_gone_) body_->Abort();
  deferred_response_ = std::move(response);
  stream_started_ = false;
  if (body_->streaming()) StartStream();
  PumpBody();
}

void HttpConnection::StartStream() {
  stream_started_ = true;
  chunked_ = version_ >= 11;
  if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the body ends where the connection does
  Send(SerializeStreamHead(deferred_response_, version_, keep_alive_, chunked_), false);
  deferred_response_ = {};
  tick_.expires_after(kStreamTick);
  tick_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->Tick();
  });
}

void HttpConnection::Wake() {
  // One post per burst of engine events: the pump takes everything that is ready.
  if (wake_posted_.exchange(true)) return;
  asio::post(executor_, [self = shared_from_this()] {
    self->wake_posted_ = false;
    self->PumpBody();
  });
}

void HttpConnection::Tick() {
  if (!body_ || phase_ == Phase::kClosed) return;
  PumpBody();
  if (!body_) return;
  tick_.expires_after(kStreamTick);
  tick_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->Tick();
  });
}

void HttpConnection::PumpBody() {
  if (!body_ || phase_ == Phase::kClosed) return;
  pump_held_ = stream_started_ && pending_.size() + inflight_.size() >= kMaxUnsentStreamBytes;
  if (pump_held_) return;
  std::string chunk;
  const bool done = body_->Pump(&chunk, &deferred_response_);
  // A body may turn streaming in a Pump once its head is known (a proxied upstream's status):
  // the head it left in deferred_response_ goes out first.
  if (!stream_started_ && body_->streaming()) StartStream();
  if (stream_started_) {
    std::string bytes = chunked_ && !chunk.empty() ? FrameChunk(chunk) : std::move(chunk);
    if (done) {
      body_.reset();
      tick_.cancel();
      if (chunked_) bytes += kLastChunk;
    }
    if (!bytes.empty() || done) Send(std::move(bytes), done);
    return;
  }
  if (!done) return;
  body_.reset();
  SendWhole(std::move(deferred_response_));
  deferred_response_ = {};
}

void HttpConnection::Refuse(const HttpRefusal& refusal) {
  phase_ = Phase::kHandling;
  stream_.expires_never();
  keep_alive_ = false;  // the rest of what it sent is not read
  input_unread_ = true;
  HttpResponse response;
  server_->error_responder(refusal, response);
  SendWhole(std::move(response));
}

// --- writing ---------------------------------------------------------------------------------

void HttpConnection::SendWhole(HttpResponse response) {
  Send(SerializeResponse(response, version_, keep_alive_), /*completes_response=*/true);
}

void HttpConnection::Send(std::string bytes, bool completes_response) {
  if (phase_ == Phase::kClosed) return;
  pending_ += bytes;
  if (completes_response) response_queued_ = true;
  WriteMore();
}

void HttpConnection::WriteMore() {
  if (writing_ || phase_ == Phase::kClosed) return;
  if (pending_.empty()) {
    if (response_queued_) {
      response_queued_ = false;
      FinishResponse();
    }
    return;
  }
  inflight_.swap(pending_);
  pending_.clear();
  writing_ = true;
  stream_.expires_after(server_->options.limits.write_timeout);
  asio::async_write(stream_, asio::buffer(inflight_), [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_ = false;
    self->inflight_.clear();
    if (ec) {
      // The client went away (or stopped reading for the write timeout): abort its work.
      self->peer_gone_ = true;
      return self->Close();
    }
    self->stream_.expires_never();
    self->WriteMore();
    if (self->pump_held_) self->PumpBody();
  });
}

void HttpConnection::FinishResponse() {
  if (!keep_alive_ || draining_ || peer_gone_) return LingeringClose();
  phase_ = Phase::kReading;
  if (watching_) {
    // The wait's handler (cancelled now) starts the next read.
    boost::system::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  ReadRequest();
}

void HttpConnection::WatchPeer() {
  if (watching_ || phase_ != Phase::kHandling || peer_gone_) return;
  watching_ = true;
  stream_.socket().async_wait(tcp::socket::wait_read,
                              [self = shared_from_this()](beast::error_code ec) { self->OnPeerReadable(ec); });
}

void HttpConnection::OnPeerReadable(beast::error_code ec) {
  watching_ = false;
  if (phase_ == Phase::kClosed) return;
  if (phase_ == Phase::kReading) return ReadRequest();  // the response ended while watching
  boost::system::error_code available_ec;
  const size_t available = ec ? 0 : stream_.socket().available(available_ec);
  if (ec || available_ec || available == 0) {
    // Readable with nothing to read: the peer closed (or reset). Its work is aborted now; the
    // deferred body then ends within an engine step and the connection closes.
    peer_gone_ = true;
    keep_alive_ = false;
    if (body_) {
      body_->Abort();
      PumpBody();
    }
    return;
  }
  // The client's next (pipelined) request: keep it for later while the buffer has room; a
  // client that fills it gets no more watching until its response is out.
  if (buffer_.size() + available > buffer_.max_size()) return;
  boost::system::error_code read_ec;
  const size_t got = stream_.socket().read_some(buffer_.prepare(available), read_ec);
  buffer_.commit(got);
  if (read_ec) {
    peer_gone_ = true;
    if (body_) body_->Abort();
    return;
  }
  WatchPeer();
}

void HttpConnection::LingeringClose() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  boost::system::error_code ignored;
  // Only a refusal leaves the client's input unread; after a whole exchange with nothing more
  // to read the connection closes now (a shutdown must not wait on clients that keep theirs open).
  const size_t unread = stream_.socket().available(ignored);
  if (peer_gone_ || (!input_unread_ && unread == 0)) return Close();
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  auto sink = std::make_shared<std::array<char, 4096>>();
  auto drained = std::make_shared<size_t>(0);
  stream_.expires_after(kLinger);
  auto drain = std::make_shared<std::function<void()>>();
  *drain = [self = shared_from_this(), sink, drained, drain] {
    self->stream_.async_read_some(asio::buffer(*sink), [self, drained, drain](beast::error_code ec, size_t n) {
      *drained += n;
      if (ec || *drained > kLingerBytes) {
        *drain = nullptr;  // breaks the cycle
        return self->Close();
      }
      (*drain)();
    });
  };
  (*drain)();
}

void HttpConnection::Close() {
  phase_ = Phase::kClosed;
  idle_timer_.cancel();
  tick_.cancel();
  if (body_) {
    body_->Abort();
    body_.reset();
  }
  boost::system::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

}  // namespace ember::http
