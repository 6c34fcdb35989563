// `ember router`: the OpenAI-compatible front of prefill/decode disaggregation. Clients talk to
// it as to one `ember serve`; each completion runs in two phases (proxy_call.h) over the prefill
// and decode instances it was given. The front is src/http's server (its limits, keep-alive,
// client-disconnect detection); the routes and their checks are here.
#pragma once

#include <memory>

#include "core/status.h"
#include "router/router_context.h"

namespace ember::router {

class RouterServer {
 public:
  // Parses the upstream URLs: an error names the one that is not http://HOST:PORT.
  static Expected<std::unique_ptr<RouterServer>> Create(RouterOptions options);
  ~RouterServer();

  Expected<int> Bind();  // the bound port
  Status Serve();        // until Stop() has drained
  void Stop();           // any thread (the signal watcher)

  RouterContext& context();

  struct Impl;

 private:
  explicit RouterServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::router
