#include "http/server.h"

#include <fmt/format.h>

#include <thread>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "core/logging.h"
#include "http/connection.h"
#include "http/state.h"
#include "http/wire.h"

namespace ember::http {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
// A burst of clients connecting at once (64 streams starting together) must not overflow the
// accept queue; the kernel caps it at net.core.somaxconn.
constexpr int kListenBacklog = 4096;
// After the shutdown deadline aborted the work, streams get this long to write their last chunks.
constexpr auto kShutdownGrace = std::chrono::seconds(5);
// How long a refused connection's peer gets to read the 503 before the socket closes.
constexpr auto kRejectLinger = std::chrono::seconds(2);
}  // namespace

HttpServer::State::State(HttpServerOptions o, Handler h, ErrorResponder e)
    : options(std::move(o)),
      handler(std::move(h)),
      error_responder(std::move(e)),
      handlers(static_cast<size_t>(std::max(1, options.handler_threads))),
      strand(asio::make_strand(ioc)),
      acceptor(strand),
      accept_retry(strand),
      deadline(strand),
      grace(strand) {}

void HttpServer::State::Accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void HttpServer::State::OnAccept(boost::system::error_code ec, tcp::socket socket) {
  if (draining || !acceptor.is_open()) return;
  if (ec) {
    // Out of descriptors (EMFILE) and the like: wait instead of spinning on the error.
    EMBER_LOG_WARN("accepting a connection failed: {}", ec.message());
    accept_retry.expires_after(std::chrono::milliseconds(100));
    accept_retry.async_wait([this](boost::system::error_code wait_ec) {
      if (!wait_ec && !draining) Accept();
    });
    return;
  }
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // SSE chunks go out as they are written
  std::shared_ptr<HttpConnection> connection;
  {
    std::lock_guard lock(mu);
    if (connections.size() < options.max_connections) {
      connection = std::make_shared<HttpConnection>(std::move(socket), this);
      connections.emplace(connection.get(), connection);
    }
  }
  if (connection) {
    connection->Start();
  } else {
    RejectBusy(std::move(socket));
  }
  Accept();
}

void HttpServer::State::RejectBusy(tcp::socket socket) {
  struct Rejected {
    tcp::socket socket;
    asio::steady_timer timer;
    std::string bytes;
    char sink[512];
  };
  HttpResponse response;
  error_responder(HttpRefusal{503, fmt::format("the server holds its maximum of {} connections "
                                               "(--max-connections); retry later", options.max_connections)},
                  response);
  response.set_header("Retry-After", "1");
  auto executor = socket.get_executor();
  auto r = std::make_shared<Rejected>(Rejected{std::move(socket), asio::steady_timer(executor),
                                               SerializeResponse(response, 11, /*keep_alive=*/false), {}});
  asio::async_write(r->socket, asio::buffer(r->bytes), [r](boost::system::error_code ec, size_t) {
    boost::system::error_code ignored;
    if (ec) {
      r->socket.close(ignored);
      return;
    }
    // Half-close, then read what the client sent until it closes (or the linger ends): closing
    // with its request unread would reset the connection before it read the 503.
    r->socket.shutdown(tcp::socket::shutdown_send, ignored);
    r->timer.expires_after(kRejectLinger);
    r->timer.async_wait([r](boost::system::error_code) {
      boost::system::error_code ignored2;
      r->socket.close(ignored2);
    });
    auto drain = std::make_shared<std::function<void()>>();
    *drain = [r, drain] {
      r->socket.async_read_some(asio::buffer(r->sink), [r, drain](boost::system::error_code read_ec, size_t) {
        if (read_ec) {
          r->timer.cancel();
          *drain = nullptr;  // breaks the cycle
          return;
        }
        (*drain)();
      });
    };
    (*drain)();
  });
}

void HttpServer::State::BeginShutdown() {
  if (draining.exchange(true)) return;
  boost::system::error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  std::vector<std::shared_ptr<HttpConnection>> live;
  {
    std::lock_guard lock(mu);
    for (auto& [ptr, weak] : connections) {
      if (auto c = weak.lock()) live.push_back(std::move(c));
    }
  }
  EMBER_LOG_INFO("stopped accepting; {} connection(s) open, waiting up to {} ms for requests in flight", live.size(),
                 options.shutdown_timeout.count());
  for (auto& c : live) c->Drain();
  if (live.empty()) return;
  deadline.expires_after(options.shutdown_timeout);
  deadline.async_wait([this](boost::system::error_code ec) {
    if (ec) return;  // everything drained in time
    std::vector<std::shared_ptr<HttpConnection>> left;
    {
      std::lock_guard lock(mu);
      for (auto& [ptr, weak] : connections) {
        if (auto c = weak.lock()) left.push_back(std::move(c));
      }
    }
    EMBER_LOG_WARN("shutdown timeout: aborting the work of {} connection(s)", left.size());
    for (auto& c : left) c->AbortWork();
    grace.expires_after(kShutdownGrace);
    grace.async_wait([this](boost::system::error_code grace_ec) {
      if (!grace_ec) ioc.stop();
    });
  });
}

void HttpServer::State::Unregister(HttpConnection* connection) {
  bool last = false;
  {
    std::lock_guard lock(mu);
    connections.erase(connection);
    last = connections.empty();
  }
  // The last connection gone while draining: nothing is left to wait for.
  if (last && draining && !destroying) {
    asio::post(strand, [this] {
      deadline.cancel();
      grace.cancel();
    });
  }
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler, ErrorResponder error_responder)
    : state_(std::make_unique<State>(std::move(options), std::move(handler), std::move(error_responder))) {}

HttpServer::~HttpServer() {
  state_->destroying = true;
  state_->handlers.join();
}

Expected<int> HttpServer::Bind() {
  const HttpServerOptions& o = state_->options;
  auto fail = [&](const std::string& why) -> Expected<int> {
    return IoError(fmt::format("cannot listen on {}:{}: {}; choose another --host/--port", o.host, o.port, why));
  };
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  const auto address = asio::ip::make_address(o.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, static_cast<unsigned short>(o.port));
  } else {
    tcp::resolver resolver(state_->ioc);
    auto results = resolver.resolve(o.host, std::to_string(o.port), ec);
    if (ec || results.empty()) return fail("the host name does not resolve");
    endpoint = *results.begin();
  }
  tcp::acceptor& acceptor = state_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(kListenBacklog, ec);
  if (ec) return fail(ec.message());
  return static_cast<int>(acceptor.local_endpoint().port());
}

Status HttpServer::Serve() {
  State& s = *state_;
  asio::post(s.strand, [&s] { s.Accept(); });
  std::vector<std::thread> threads;
  for (int i = 1; i < s.options.io_threads; ++i) threads.emplace_back([&s] { s.ioc.run(); });
  s.ioc.run();
  for (std::thread& t : threads) t.join();
  // Handlers still running (a shutdown that ran out of time) finish before the server goes.
  s.handlers.join();
  return Status::Ok();
}

void HttpServer::Stop() {
  asio::post(state_->strand, [s = state_.get()] { s->BeginShutdown(); });
}

size_t HttpServer::num_connections() const {
  std::lock_guard lock(state_->mu);
  return state_->connections.size();
}

}  // namespace ember::http
