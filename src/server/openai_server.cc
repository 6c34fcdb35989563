#include "server/openai_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include "core/logging.h"
#include "server/http_util.h"
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

void OpenAiServer::RegisterRoutes() {
  ServingContext& ctx = *context_;
  // Authentication on every /v1 route, before routing (so unknown /v1 paths also need the key).
  http_->set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (ctx.config.api_key.empty() || req.path.rfind("/v1", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + ctx.config.api_key) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    SendError(res, Unauthorized("invalid or missing API key: send 'Authorization: Bearer <key>'"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (404 unknown path, 413 body too large, 400 bad HTTP) get an
  // OpenAI-style body too.
  http_->set_error_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    if (res.status == 404) e = NotFound(fmt::format("no route {} {}", req.method, req.path));
    else if (res.status == 413) {
      e = PayloadTooLarge(fmt::format("the request body exceeds {} bytes", ctx.config.max_request_body_bytes));
    } else {
      e = BadRequest(fmt::format("HTTP error {}", res.status));
    }
    e.http_status = res.status;
    SendError(res, e);
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    EMBER_LOG_ERROR("request handler failed: {}", what);
    SendError(res, InternalError("internal error: " + what));
  });

  auto route = [&ctx](void (*handler)(ServingContext&, const httplib::Request&, httplib::Response&)) {
    return [&ctx, handler](const httplib::Request& req, httplib::Response& res) { handler(ctx, req, res); };
  };
  http_->Post("/v1/completions", route(HandleCompletions));
  http_->Post("/v1/chat/completions", route(HandleChatCompletions));
  http_->Get("/v1/models", route(HandleModels));
  http_->Post("/tokenize", route(HandleTokenize));
  http_->Post("/detokenize", route(HandleDetokenize));
  http_->Get("/health", [this, &ctx](const httplib::Request&, httplib::Response& res) {
    if (!ready_) return SendError(res, ServiceUnavailable("the model is loading"));
    if (!ctx.engine->alive()) return SendError(res, ServiceUnavailable("the engine loop has stopped"));
    if (const std::string stall = ctx.engine->StallMessage(); !stall.empty()) {
      return SendError(res, ServiceUnavailable(stall + "; see the server log"));
    }
    res.status = 200;
  });
  http_->Get("/version", [](const httplib::Request&, httplib::Response& res) { SendJson(res, {{"version", "0.1.0"}}); });
  http_->Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.metrics->Render(), "text/plain; version=0.0.4");
  });
  http_->Get("/openapi.json", [](const httplib::Request&, httplib::Response& res) { SendJson(res, OpenApiDocument()); });
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
