// The HTTP server of `ember serve`: OpenAI-compatible routes over an AsyncEngine, API-key checks
// on every /v1 route, bounded request bodies, OpenAI-style errors for everything that goes wrong.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/serving_context.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace ember::server {

class OpenAiServer {
 public:
  explicit OpenAiServer(ServingContext* context);
  ~OpenAiServer();

  // Binds host:port (port 0 picks a free one); returns the bound port or an error naming the address.
  Expected<int> Bind();
  // Serves until Stop(); requests in progress finish before it returns.
  Status Serve();
  // Any thread (e.g. a signal watcher): stop accepting, let running handlers drain.
  void Stop();
  // /health answers 503 until the model and engine are ready.
  void set_ready(bool ready) { ready_ = ready; }

 private:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  void RegisterRoutes();
  // Registers `handler` (GET or POST) behind the exception guard, and remembers the method for
  // the 405 that other methods on `path` get.
  void Route(const std::string& method, const std::string& path, Handler handler);

  ServingContext* context_;
  std::unique_ptr<httplib::Server> http_;
  std::map<std::string, std::string> allowed_methods_;  // path -> "GET" / "POST" (the Allow header)
  int listen_fd_ = -1;  // the listening socket, to widen its accept backlog after bind
  std::atomic<bool> ready_{false};
};

}  // namespace ember::server
