// HttpServer's shared state: what every connection reads (options, handlers) and the registry
// of live connections that --max-connections and the shutdown walk. Private to src/http.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "http/server.h"

namespace ember::http {

class HttpConnection;

struct HttpServer::State {
  State(HttpServerOptions o, Handler h, ErrorResponder e);

  void Accept();
  void OnAccept(boost::system::error_code ec, boost::asio::ip::tcp::socket socket);
  // Answers 503 on a connection past --max-connections, then closes it.
  void RejectBusy(boost::asio::ip::tcp::socket socket);
  void BeginShutdown();  // on the acceptor's strand
  void Unregister(HttpConnection* connection);

  const HttpServerOptions options;
  const Handler handler;
  const ErrorResponder error_responder;

  // Declared before the I/O context: connections destroyed with its pending handlers unregister.
  std::mutex mu;
  std::unordered_map<HttpConnection*, std::weak_ptr<HttpConnection>> connections;  // guarded by mu
  std::atomic<bool> draining{false};
  std::atomic<bool> destroying{false};

  boost::asio::io_context ioc;
  // Route handlers run here (joined before the I/O context goes).
  boost::asio::thread_pool handlers;
  boost::asio::strand<boost::asio::io_context::executor_type> strand;  // the acceptor and shutdown
  boost::asio::ip::tcp::acceptor acceptor;
  boost::asio::steady_timer accept_retry;    // after an accept error (out of descriptors)
  boost::asio::steady_timer deadline;        // the shutdown timeout
  boost::asio::steady_timer grace;           // after the deadline: close what is left
};

}  // namespace ember::http
