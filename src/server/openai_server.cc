#include "server/openai_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include "server/access.h"
#include "server/http_util.h"
#include "server/protocol/safe_text.h"
#include "server/routes/routes.h"

namespace ember::server {
namespace {
// Debian's compiled cpp-httplib listens with a backlog of 5: a burst of clients connecting at once
// (64 streams starting together) overflowed the accept queue, and the connections the kernel
// dropped failed with a read error before any request reached the engine. Listening again on
// the bound socket widens the queue (the kernel caps it at net.core.somaxconn).
constexpr int kListenBacklog = 4096;
}  // namespace

OpenAiServer::OpenAiServer(ServingContext* context) : context_(context), http_(std::make_unique<httplib::Server>()) {
  const ServerConfig& config = context_->config;
  http_->new_task_queue = [threads = config.http_threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(config.max_request_body_bytes);
  http_->set_read_timeout(30, 0);
  http_->set_keep_alive_timeout(30);
  http_->set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;  // the last socket created is the one that bound
  });
  RegisterRoutes();
}

OpenAiServer::~OpenAiServer() = default;

void OpenAiServer::Route(const std::string& method, const std::string& path, Handler handler) {
  std::string& allowed = allowed_methods_[path];
  allowed += (allowed.empty() ? "" : ", ") + method;
  auto guarded = [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    GuardHandler(req, res, [&] { handler(req, res); });
  };
  if (method == "GET") {
    http_->Get(path, std::move(guarded));
  } else {
    http_->Post(path, std::move(guarded));
  }
}

void OpenAiServer::RegisterRoutes() {
  ServingContext& ctx = *context_;
  // Before routing, on every request (access.h): Host, Origin (and the CORS answer for allowed
  // origins), Content-Type, then the API key on every /v1 path (unknown ones too).
  const bool loopback = IsLoopbackHost(ctx.config.host);
  http_->set_pre_routing_handler([this, &ctx, loopback](const httplib::Request& req, httplib::Response& res) {
    bool handled = false;
    const bool ok = GuardHandler(req, res, [&] {
      auto refuse = [&](const ApiError& e) {
        SendError(res, e);
        handled = true;
      };
      if (auto e = CheckHost(req.get_header_value("Host"), loopback)) return refuse(*e);
      const std::string origin = req.get_header_value("Origin");
      if (auto e = CheckOrigin(origin, ctx.config.allowed_origins)) return refuse(*e);
      if (!origin.empty()) {
        res.set_header("Access-Control-Allow-Origin", origin);
        res.set_header("Vary", "Origin");
      }
      if (req.method == "OPTIONS") {
        // A CORS preflight (which never carries the key) or a plain question about the route.
        const auto known = allowed_methods_.find(req.path);
        if (known == allowed_methods_.end()) return;  // 404
        res.set_header("Allow", known->second + ", OPTIONS");
        if (!origin.empty()) {
          res.set_header("Access-Control-Allow-Methods", known->second);
          res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
          res.set_header("Access-Control-Max-Age", "600");
        }
        res.status = 204;
        handled = true;
        return;
      }
      if (auto e = CheckContentType(req.method, req.get_header_value("Content-Type"))) return refuse(*e);
      if (ctx.config.api_key.empty() || req.path.rfind("/v1", 0) != 0) return;
      if (ApiKeyMatches(req.get_header_value("Authorization"), ctx.config.api_key)) return;
      refuse(Unauthorized("invalid or missing API key: send 'Authorization: Bearer <key>'"));
    });
    return handled || !ok ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
  });
  // Statuses httplib sets itself (404 unknown path, 413 body too large, 400 bad HTTP) get an
  // OpenAI-style body too; a known path asked with another method is a 405 naming the right ones.
  // httplib calls this outside its own exception handling, so it is guarded like a route.
  http_->set_error_handler([this, &ctx](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    GuardHandler(req, res, [&] {
      ApiError e;
      const std::string method = SafeText(req.method, 16), path = SafeText(req.path);
      if (res.status == 404) {
        if (const auto known = allowed_methods_.find(req.path); known != allowed_methods_.end()) {
          e = MethodNotAllowed(fmt::format("{} is not allowed on {}; use {}", method, path, known->second));
          res.set_header("Allow", known->second);
        } else {
          e = NotFound(fmt::format("no route {} {}", method, path));
        }
      } else if (res.status == 413) {
        e = PayloadTooLarge(fmt::format("the request body exceeds {} bytes", ctx.config.max_request_body_bytes));
      } else {
        e = BadRequest(fmt::format("HTTP error {}", res.status));
        e.http_status = res.status;
      }
      SendError(res, e);
    });
  });

  auto route = [&ctx](void (*handler)(ServingContext&, const httplib::Request&, httplib::Response&)) {
    return [&ctx, handler](const httplib::Request& req, httplib::Response& res) { handler(ctx, req, res); };
  };
  Route("POST", "/v1/completions", route(HandleCompletions));
  Route("POST", "/v1/chat/completions", route(HandleChatCompletions));
  Route("GET", "/v1/models", route(HandleModels));
  Route("POST", "/tokenize", route(HandleTokenize));
  Route("POST", "/detokenize", route(HandleDetokenize));
  Route("GET", "/health", [this, &ctx](const httplib::Request&, httplib::Response& res) {
    if (!ready_) return SendError(res, ServiceUnavailable("the model is loading"));
    if (!ctx.engine->alive()) return SendError(res, ServiceUnavailable("the engine loop has stopped"));
    if (const std::string stall = ctx.engine->StallMessage(); !stall.empty()) {
      return SendError(res, ServiceUnavailable(stall + "; see the server log"));
    }
    res.status = 200;
  });
  Route("GET", "/version", [](const httplib::Request&, httplib::Response& res) { SendJson(res, {{"version", "0.1.0"}}); });
  Route("GET", "/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.metrics->Render(), "text/plain; version=0.0.4");
  });
  Route("GET", "/openapi.json", [](const httplib::Request&, httplib::Response& res) { SendJson(res, OpenApiDocument()); });
}

Expected<int> OpenAiServer::Bind() {
  const ServerConfig& config = context_->config;
  int port = config.port;
  if (port == 0) {
    port = http_->bind_to_any_port(config.host);
  } else if (!http_->bind_to_port(config.host, port)) {
    port = -1;
  }
  if (port < 0) {
    return IoError(fmt::format("cannot listen on {}:{}: the address is in use or not available; choose another "
                               "--host/--port",
                               config.host, config.port));
  }
  if (listen_fd_ >= 0) ::listen(listen_fd_, kListenBacklog);
  return port;
}

Status OpenAiServer::Serve() {
  if (!http_->listen_after_bind()) return IoError("the HTTP server stopped with an error");
  return Status::Ok();
}

void OpenAiServer::Stop() { http_->stop(); }

}  // namespace ember::server
