#include "router/router_server.h"

#include <fmt/format.h>

#include <boost/asio/executor_work_guard.hpp>
#include <random>
#include <thread>

#include "core/logging.h"
#include "http/server.h"
#include "router/errors.h"
#include "router/health.h"
#include "router/proxy_call.h"
#include "router/routes.h"

namespace ember::router {
namespace {

namespace asio = boost::asio;

Expected<Upstreams> ParseUpstreams(const std::vector<std::string>& urls, const std::string& flag,
                                   std::chrono::milliseconds backoff) {
  if (urls.empty()) return InvalidArgument(fmt::format("{} needs at least one URL (http://HOST:PORT)", flag));
  std::vector<http::HttpUrl> parsed;
  std::vector<std::string> names;
  for (const std::string& url : urls) {
    EMBER_ASSIGN_OR_RETURN(http::HttpUrl u, http::ParseHttpUrl(url, flag));
    if (u.scheme != "http")
      return InvalidArgument(fmt::format("{}: only http:// instances are supported (got '{}')", flag, url));
    // "/v1" in a base URL is the OpenAI convention; the routes carry it themselves.
    if (u.path_prefix.ends_with("/v1")) u.path_prefix.resize(u.path_prefix.size() - 3);
    names.push_back(u.origin + u.path_prefix);
    parsed.push_back(std::move(u));
  }
  return Upstreams(std::move(parsed), std::move(names), backoff);
}

std::string NewRequestId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("router-{:016x}", rng());
}

}  // namespace

struct RouterServer::Impl {
  Impl(RouterOptions options, Upstreams prefill, Upstreams decode)
      : context(std::move(options), std::move(prefill), std::move(decode)), health(&context) {}

  void Handle(const http::HttpRequest& request, http::HttpResponse& response);
  void HandleCompletion(const http::HttpRequest& request, http::HttpResponse& response, bool chat);
  void HandleModels(http::HttpResponse& response);

  RouterContext context;
  HealthChecker health;
  bool loopback = true;
  std::unique_ptr<http::HttpServer> server;
  std::vector<std::thread> upstream_threads;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
};

void RouterServer::Impl::Handle(const http::HttpRequest& request, http::HttpResponse& response) {
  struct Route {
    const char* path;
    const char* method;
  };
  static constexpr Route kRoutes[] = {{"/v1/completions", "POST"},
                                      {"/v1/chat/completions", "POST"},
                                      {"/v1/models", "GET"},
                                      {"/health", "GET"},
                                      {"/metrics", "GET"}};
  if (auto refusal = CheckAccess(request, loopback)) return SetError(&response, refusal->first, refusal->second);
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (request.path == r.path) route = &r;
  }
  if (route == nullptr)
    return SetError(&response, 404, fmt::format("no route {} on the router", request.path.substr(0, 200)));
  if (request.method != route->method) {
    response.set_header("Allow", route->method);
    return SetError(&response, 405, fmt::format("{} takes {} only", route->path, route->method));
  }
  if (request.path.starts_with("/v1/") && !context.options.api_key.empty() &&
      !ApiKeyMatches(request.header("Authorization"), context.options.api_key)) {
    return SetError(&response, 401, "a valid API key is required: send 'Authorization: Bearer <key>'");
  }
  if (request.path == "/health") {
    response.deferred = StartHealthResponse(&context, &health);
    return;
  }
  if (request.path == "/metrics") {
    response.set_content(context.metrics.Render(&context.prefill.balancer, &context.decode.balancer),
                         "text/plain; version=0.0.4; charset=utf-8");
    return;
  }
  if (request.path == "/v1/models") return HandleModels(response);
  HandleCompletion(request, response, request.path == "/v1/chat/completions");
}

void RouterServer::Impl::HandleCompletion(const http::HttpRequest& request, http::HttpResponse& response, bool chat) {
  ParsedBody body = ParseRequestBody(request.body);
  if (!body.error.empty()) return SetError(&response, 400, body.error);
  auto slot = ConcurrencySlot::TryTake(&context);
  if (!slot) {
    context.metrics.CountRejected();
    return SetError(&response, 503,
                    fmt::format("the router is proxying --max-concurrency ({}) requests already; retry later",
                                context.options.max_concurrency));
  }
  ProxySpec spec;
  spec.path = request.path;
  spec.chat = chat;
  auto stream = body.json.find("stream");
  spec.client_streams = stream != body.json.end() && stream->is_boolean() && stream->get<bool>();
  spec.original = std::move(body.json);
  spec.request_id =
      request.header("X-Request-Id").empty() ? NewRequestId() : request.header("X-Request-Id").substr(0, 128);
  auto call = std::make_shared<ProxyCall>(&context, std::move(spec), std::move(slot));
  call->Start();
  response.deferred = std::move(call);
}

void RouterServer::Impl::HandleModels(http::HttpResponse& response) {
  auto slot = ConcurrencySlot::TryTake(&context);
  if (!slot) {
    context.metrics.CountRejected();
    return SetError(&response, 503, "the router is at --max-concurrency; retry later");
  }
  ProxySpec spec;
  spec.method = "GET";
  spec.path = "/v1/models";
  spec.two_phase = false;
  spec.request_id = NewRequestId();
  auto call = std::make_shared<ProxyCall>(&context, std::move(spec), std::move(slot));
  call->Start();
  response.deferred = std::move(call);
}

RouterServer::RouterServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RouterServer::~RouterServer() {
  if (!impl_) return;
  impl_->server.reset();  // no more requests
  impl_->work.reset();
  impl_->context.ioc.stop();
  for (auto& t : impl_->upstream_threads) t.join();
}

Expected<std::unique_ptr<RouterServer>> RouterServer::Create(RouterOptions options) {
  if (options.max_concurrency == 0) return InvalidArgument("--max-concurrency must be at least 1");
  EMBER_ASSIGN_OR_RETURN(Upstreams prefill, ParseUpstreams(options.prefill_urls, "--prefill", options.backoff));
  EMBER_ASSIGN_OR_RETURN(Upstreams decode, ParseUpstreams(options.decode_urls, "--decode", options.backoff));
  auto impl = std::make_unique<Impl>(std::move(options), std::move(prefill), std::move(decode));
  Impl* raw = impl.get();
  const RouterOptions& o = raw->context.options;
  raw->loopback = IsLoopbackHost(o.host);
  http::HttpServerOptions http_options;
  http_options.host = o.host;
  http_options.port = o.port;
  http_options.limits = o.limits;
  http_options.max_connections = o.max_connections;
  http_options.io_threads = o.io_threads;
  http_options.shutdown_timeout = o.shutdown_timeout;
  raw->server = std::make_unique<http::HttpServer>(
      http_options,
      [raw](const http::HttpRequest& request, http::HttpResponse& response) {
        try {
          raw->Handle(request, response);
        } catch (const std::exception& e) {
          EMBER_LOG_ERROR("router: a handler threw ({}); answering 500", e.what());
          response = {};
          SetError(&response, 500, "internal error in the router");
        }
      },
      [](const http::HttpRefusal& refusal, http::HttpResponse& response) {
        SetError(&response, refusal.status, refusal.message);
      });
  raw->work.emplace(raw->context.ioc.get_executor());
  for (int i = 0; i < std::max(1, o.upstream_threads); ++i) {
    raw->upstream_threads.emplace_back([raw] { raw->context.ioc.run(); });
  }
  return std::unique_ptr<RouterServer>(new RouterServer(std::move(impl)));
}

Expected<int> RouterServer::Bind() { return impl_->server->Bind(); }
Status RouterServer::Serve() { return impl_->server->Serve(); }
void RouterServer::Stop() { impl_->server->Stop(); }
RouterContext& RouterServer::context() { return impl_->context; }

}  // namespace ember::router
