#include "server/openai_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "server/access.h"
#include "server/http_util.h"
#include "server/protocol/safe_text.h"
#include "server/routes/routes.h"

namespace ember::server {
namespace {

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, seconds) * 1000.0));
}

http::HttpServerOptions HttpOptions(const ServerConfig& config) {
  http::HttpServerOptions o;
  o.host = config.host;
  o.port = config.port;
  o.limits.max_body_bytes = config.max_request_body_bytes;
  o.limits.header_timeout = Millis(config.header_timeout_s);
  o.limits.body_timeout = Millis(config.body_timeout_s);
  o.max_connections = config.max_connections;
  o.io_threads = config.io_threads;
  o.handler_threads = config.handler_threads;
  o.shutdown_timeout = Millis(config.shutdown_timeout_s);
  return o;
}

// The HTTP server's own refusals (413, 431, 400 bad HTTP, 503 past --max-connections) in
// OpenAI's error shape.
void RefusalBody(const http::HttpRefusal& refusal, HttpResponse& res) {
  ApiError e;
  switch (refusal.status) {
    case 413: e = PayloadTooLarge(refusal.message); break;
    case 415: e = UnsupportedMediaType(refusal.message); break;
    case 503: e = ServiceUnavailable(refusal.message); break;
    case 500: e = InternalError(refusal.message); break;
    default:
      e = BadRequest(refusal.message);
      e.http_status = refusal.status;
  }
  SendError(res, e);
}

}  // namespace

OpenAiServer::OpenAiServer(ServingContext* context)
    : context_(context), loopback_(IsLoopbackHost(context->config.host)) {
  RegisterRoutes();
  http_ = std::make_unique<http::HttpServer>(
      HttpOptions(context_->config), [this](const HttpRequest& req, HttpResponse& res) { Handle(req, res); },
      RefusalBody);
}

OpenAiServer::~OpenAiServer() = default;

void OpenAiServer::Route(const std::string& method, const std::string& path, Handler handler) {
  std::string& allowed = allowed_methods_[path];
  allowed += (allowed.empty() ? "" : ", ") + method;
  routes_[path][method] = std::move(handler);
}

bool OpenAiServer::PreRoute(const HttpRequest& req, HttpResponse& res) {
  const ServingContext& ctx = *context_;
  if (auto e = CheckHost(req.header("Host"), loopback_)) return SendError(res, *e), true;
  const std::string origin = req.header("Origin");
  if (auto e = CheckOrigin(origin, ctx.config.allowed_origins)) return SendError(res, *e), true;
  if (!origin.empty()) {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  if (req.method == "OPTIONS") {
    // A CORS preflight (which never carries the key) or a plain question about the route.
    const auto known = allowed_methods_.find(req.path);
    if (known == allowed_methods_.end()) return false;  // 404
    res.set_header("Allow", known->second + ", OPTIONS");
    if (!origin.empty()) {
      res.set_header("Access-Control-Allow-Methods", known->second);
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
    }
    res.status = 204;
    return true;
  }
  if (auto e = CheckContentType(req.method, req.header("Content-Type"))) return SendError(res, *e), true;
  if (ctx.config.api_key.empty() || req.path.rfind("/v1", 0) != 0) return false;
  if (ApiKeyMatches(req.header("Authorization"), ctx.config.api_key)) return false;
  SendError(res, Unauthorized("invalid or missing API key: send 'Authorization: Bearer <key>'"));
  return true;
}

void OpenAiServer::Handle(const HttpRequest& req, HttpResponse& res) {
  GuardHandler(req, res, [&] {
    if (PreRoute(req, res)) return;
    const std::string method = SafeText(req.method, 16), path = SafeText(req.path);
    const auto route = routes_.find(req.path);
    if (route == routes_.end()) return SendError(res, NotFound(fmt::format("no route {} {}", method, path)));
    const auto handler = route->second.find(req.method);
    if (handler == route->second.end()) {
      const std::string& allowed = allowed_methods_.at(req.path);
      res.set_header("Allow", allowed);
      return SendError(res, MethodNotAllowed(fmt::format("{} is not allowed on {}; use {}", method, path, allowed)));
    }
    handler->second(req, res);
  });
}

void OpenAiServer::RegisterRoutes() {
  ServingContext& ctx = *context_;
  auto route = [&ctx](void (*handler)(ServingContext&, const HttpRequest&, HttpResponse&)) {
    return [&ctx, handler](const HttpRequest& req, HttpResponse& res) { handler(ctx, req, res); };
  };
  Route("POST", "/v1/completions", route(HandleCompletions));
  Route("POST", "/v1/chat/completions", route(HandleChatCompletions));
  Route("GET", "/v1/models", route(HandleModels));
  Route("POST", "/tokenize", route(HandleTokenize));
  Route("POST", "/detokenize", route(HandleDetokenize));
  Route("GET", "/health", [this, &ctx](const HttpRequest&, HttpResponse& res) {
    if (!ready_) return SendError(res, ServiceUnavailable("the model is loading"));
    if (!ctx.engine->alive()) {
      const std::string failure = ctx.engine->FailureMessage();
      return SendError(res, ServiceUnavailable(failure.empty() ? "the engine loop has stopped" : failure));
    }
    if (const std::string stall = ctx.engine->StallMessage(); !stall.empty()) {
      return SendError(res, ServiceUnavailable(stall + "; see the server log"));
    }
    res.status = 200;
  });
  Route("GET", "/version", [](const HttpRequest&, HttpResponse& res) { SendJson(res, {{"version", "0.1.0"}}); });
  Route("GET", "/metrics", [&ctx](const HttpRequest&, HttpResponse& res) {
    res.set_content(ctx.metrics->Render(), "text/plain; version=0.0.4");
  });
  Route("GET", "/openapi.json", [&ctx](const HttpRequest&, HttpResponse& res) {
    SendJson(res, OpenApiDocument(ctx.config, ctx.model.vocab_size));
  });
}

Expected<int> OpenAiServer::Bind() { return http_->Bind(); }

Status OpenAiServer::Serve() { return http_->Serve(); }

void OpenAiServer::Stop() { http_->Stop(); }

}  // namespace ember::server
