// ember router --prefill URL[,URL...] --decode URL[,URL...]: the OpenAI-compatible front of
// prefill/decode disaggregation (src/router). Each completion goes to a prefill instance for its
// KV (max_tokens 1) and then to a decode instance with the KV handle, which streams the answer
// back through the router; without a working prefill instance the decode instance computes the
// prompt itself.
#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "core/logging.h"
#include "router/router_server.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"
#include "tools/ember/shutdown_signals.h"

namespace ember::tools {
namespace {

struct RouterFlags {
  router::RouterOptions options;
  double connect_timeout_s = 5;
  double request_timeout_s = 600;
  double backoff_s = 2;
  double health_timeout_s = 1;
  double header_timeout_s = 30;
  double body_timeout_s = 30;
  double shutdown_timeout_s = 30;
  double max_response_mb = 64;
  std::string api_key_env;
};

std::chrono::milliseconds Ms(double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); }

int RunRouter(RouterFlags& f) {
  ShutdownSignals signals;  // before any thread starts

  router::RouterOptions& o = f.options;
  if (o.api_key.empty() && !f.api_key_env.empty()) {
    if (const char* key = std::getenv(f.api_key_env.c_str())) o.api_key = key;
  }
  o.timeouts.connect = Ms(f.connect_timeout_s);
  o.timeouts.read = Ms(f.request_timeout_s);
  o.backoff = Ms(f.backoff_s);
  o.health_timeout = Ms(f.health_timeout_s);
  o.limits.header_timeout = Ms(f.header_timeout_s);
  o.limits.body_timeout = Ms(f.body_timeout_s);
  o.shutdown_timeout = Ms(f.shutdown_timeout_s);
  o.max_response_bytes = static_cast<size_t>(f.max_response_mb * (1u << 20));
  // A client connection and its upstream connection each take a descriptor.
  RaiseDescriptorLimit(2 * o.max_connections);

  auto server = router::RouterServer::Create(o);
  if (!server.ok()) return Fail(server.status());
  auto port = (*server)->Bind();
  if (!port.ok()) return Fail(port.status());
  signals.Watch(f.shutdown_timeout_s, [&] { (*server)->Stop(); });
  const router::RouterContext& context = (*server)->context();
  for (size_t i = 0; i < context.prefill.balancer.size(); ++i) {
    EMBER_LOG_INFO("prefill instance {}", context.prefill.balancer.url(i));
  }
  for (size_t i = 0; i < context.decode.balancer.size(); ++i) {
    EMBER_LOG_INFO("decode instance {}", context.decode.balancer.url(i));
  }
  EMBER_LOG_INFO("routing on http://{}:{}{} (/v1/completions, /v1/chat/completions, /v1/models, /health, /metrics)",
                 o.host, *port, o.api_key.empty() ? "" : " (API key required)");
  std::fflush(stderr);
  const Status served = (*server)->Serve();
  signals.Stop();
  server->reset();
  EMBER_LOG_INFO("router stopped");
  return served.ok() ? 0 : Fail(served);
}

}  // namespace

void RegisterRouterCommand(CLI::App& app) {
  auto f = std::make_shared<RouterFlags>();
  router::RouterOptions& o = f->options;
  CLI::App* cmd = app.add_subcommand(
      "router",
      "OpenAI-compatible front of prefill/decode disaggregation: each request is prefilled on a --prefill instance "
      "and decoded on a --decode instance with the transferred KV");
  cmd->add_option("--prefill", o.prefill_urls, "Prefill instances: http://HOST:PORT, comma-separated or repeated")
      ->required()
      ->delimiter(',');
  cmd->add_option("--decode", o.decode_urls, "Decode instances: http://HOST:PORT, comma-separated or repeated")
      ->required()
      ->delimiter(',');
  cmd->add_option("--host", o.host, "Address to listen on (default 127.0.0.1: this machine only)")
      ->capture_default_str();
  cmd->add_option("--port", o.port, "Port (0 picks a free one)")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' on the /v1 routes");
  cmd->add_option("--api-key-env", f->api_key_env, "Read --api-key from this environment variable");
  cmd->add_option("--upstream-api-key", o.upstream_api_key, "Send 'Authorization: Bearer KEY' to the instances");
  cmd->add_option("--connect-timeout-s", f->connect_timeout_s, "Seconds an instance may take to accept a connection")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  cmd->add_option("--request-timeout-s", f->request_timeout_s,
                  "Seconds an instance may stay silent: before its response head, and between pieces of its body")
      ->check(CLI::Range(0.01, 86400.0))
      ->capture_default_str();
  cmd->add_option("--backoff-s", f->backoff_s, "Seconds an instance that refused a connection is skipped")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--health-timeout-s", f->health_timeout_s, "Seconds an instance's GET /health may take")
      ->check(CLI::Range(0.01, 60.0))
      ->capture_default_str();
  cmd->add_option("--max-concurrency", o.max_concurrency, "Requests proxied at once; past it a 503")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-response-mb", f->max_response_mb, "Largest non-streamed answer of an instance, in MiB")
      ->check(CLI::Range(0.01, 4096.0))
      ->capture_default_str();
  cmd->add_option("--upstream-threads", o.upstream_threads, "Threads that carry the connections to the instances")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--max-request-body", o.limits.max_body_bytes, "Largest request body in bytes")
      ->capture_default_str();
  cmd->add_option("--max-connections", o.max_connections, "Client connections open at once; past it a 503")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--header-timeout", f->header_timeout_s,
                  "Seconds a connection may wait for and send a request's header (idle keep-alive included)")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  cmd->add_option("--body-timeout", f->body_timeout_s, "Seconds a request's body may take to arrive")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", f->shutdown_timeout_s,
                  "On SIGTERM/SIGINT, seconds requests in flight may finish before they are cut")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->callback([f] { SetExitCode(RunRouter(*f)); });
}

}  // namespace ember::tools
