// An event-driven HTTP/1.1 server on Boost.Beast: a few I/O threads carry every connection (a
// connection costs a socket and a small object, never a thread) and route handlers run on a
// small pool of their own, so that tokenizing a long prompt never holds up another connection's
// bytes. Limits (limits.h) are enforced while reading; responses may be deferred (an engine job
// pumped from the I/O threads as its tokens arrive, message.h).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "http/limits.h"
#include "http/message.h"

namespace ember::http {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 picks a free one
  HttpLimits limits;
  size_t max_connections = 8192;  // past it, a new connection gets a 503 and is closed
  int io_threads = 1;
  int handler_threads = 2;
  // On Stop(): requests in flight may finish for this long; then their work is aborted (streams
  // end with their final chunks and [DONE]) and, a little later, every connection is closed.
  std::chrono::milliseconds shutdown_timeout{std::chrono::seconds(30)};
};

class HttpServer {
 public:
  // Runs on a handler thread; must not throw (the OpenAI server guards every route).
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  // Fills the body of an answer the server gives itself (413, 431, 503 past --max-connections...).
  using ErrorResponder = std::function<void(const HttpRefusal&, HttpResponse&)>;

  HttpServer(HttpServerOptions options, Handler handler, ErrorResponder error_responder);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port; returns the bound port or an error naming the address.
  Expected<int> Bind();
  // Serves until Stop() has drained every connection (or the shutdown timeout passed).
  Status Serve();
  // Any thread (a signal watcher): stop accepting, close idle connections, let requests in
  // flight finish up to the shutdown timeout.
  void Stop();
  size_t num_connections() const;

  struct State;  // shared with the connections (connection.h)

 private:
  std::unique_ptr<State> state_;
};

}  // namespace ember::http
