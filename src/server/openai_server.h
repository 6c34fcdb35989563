// The HTTP front end of `ember serve`: OpenAI-compatible routes over an AsyncEngine on the
// event-driven server of http/ (Boost.Beast), API-key checks on every /v1 route, bounded requests,
// OpenAI-style errors for everything that goes wrong, graceful shutdown.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "http/server.h"
#include "server/serving_context.h"

namespace ember::server {

using http::HttpRequest;
using http::HttpResponse;

class OpenAiServer {
 public:
  explicit OpenAiServer(ServingContext* context);
  ~OpenAiServer();

  // Binds host:port (port 0 picks a free one); returns the bound port or an error naming the address.
  Expected<int> Bind();
  // Serves until Stop() has drained the requests in flight (or --shutdown-timeout passed).
  Status Serve();
  // Any thread (e.g. a signal watcher): stop accepting, let requests in flight finish.
  void Stop();
  // /health answers 503 until the model and engine are ready.
  void set_ready(bool ready) { ready_ = ready; }

  // The routing and checks of one request (what the HTTP server's handler threads run).
  void Handle(const HttpRequest& req, HttpResponse& res);

 private:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  void RegisterRoutes();
  void Route(const std::string& method, const std::string& path, Handler handler);
  // Host, Origin (and CORS answers), OPTIONS, Content-Type and the API key, before routing;
  // true when it answered the request itself.
  bool PreRoute(const HttpRequest& req, HttpResponse& res);

  ServingContext* context_;
  // path -> method -> handler; the methods joined are the 405's Allow header.
  std::map<std::string, std::map<std::string, Handler>> routes_;
  std::map<std::string, std::string> allowed_methods_;
  bool loopback_ = true;
  std::atomic<bool> ready_{false};
  std::unique_ptr<http::HttpServer> http_;
};

}  // namespace ember::server
