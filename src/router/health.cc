#include "router/health.h"

#include <boost/asio/strand.hpp>
#include <nlohmann/json.hpp>

#include "router/errors.h"

namespace ember::router {
namespace {

namespace asio = boost::asio;

class HealthBody : public http::DeferredBody {
 public:
  bool streaming() const override { return false; }
  void SetWaker(std::function<void()> wake) override {
    std::lock_guard lock(mu_);
    wake_ = std::move(wake);
  }
  bool Pump(std::string*, http::HttpResponse* response) override {
    std::lock_guard lock(mu_);
    if (!done_) return false;
    *response = std::move(response_);
    return true;
  }
  void Abort() override {}  // the probes end within --health-timeout anyway
  void Complete(http::HttpResponse response) {
    std::function<void()> wake;
    {
      std::lock_guard lock(mu_);
      response_ = std::move(response);
      done_ = true;
      wake = wake_;
    }
    if (wake) wake();
  }

 private:
  std::mutex mu_;
  std::function<void()> wake_;
  http::HttpResponse response_;
  bool done_ = false;
};

}  // namespace

void RenderHealth(const HealthSnapshot& snapshot, const Balancer& prefill, const Balancer& decode,
                  http::HttpResponse* response) {
  nlohmann::json body = {{"prefill", nlohmann::json::object()}, {"decode", nlohmann::json::object()}};
  std::vector<std::string> down;
  bool any_prefill = false, any_decode = false;
  for (size_t i = 0; i < snapshot.prefill.size(); ++i) {
    body["prefill"][prefill.url(i)] = snapshot.prefill[i] ? "ok" : "down";
    any_prefill = any_prefill || snapshot.prefill[i];
  }
  for (size_t i = 0; i < snapshot.decode.size(); ++i) {
    body["decode"][decode.url(i)] = snapshot.decode[i] ? "ok" : "down";
    any_decode = any_decode || snapshot.decode[i];
  }
  if (any_prefill && any_decode) {
    body["status"] = "ok";
    response->status = 200;
    response->set_content(body.dump(), "application/json");
    return;
  }
  std::string message = "unhealthy:";
  if (!any_prefill) message += " no prefill instance answers GET /health;";
  if (!any_decode) message += " no decode instance answers GET /health;";
  message.pop_back();
  nlohmann::json error = nlohmann::json::parse(ErrorJson(message, ErrorType(503)));
  error["prefill"] = body["prefill"];
  error["decode"] = body["decode"];
  response->status = 503;
  response->set_content(error.dump(), "application/json");
}

void HealthChecker::Check(std::function<void(const HealthSnapshot&)> done) {
  std::unique_lock lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (last_ && now - last_at_ < context_->options.health_cache) {
    HealthSnapshot snapshot = *last_;
    lock.unlock();
    return done(snapshot);
  }
  waiting_.push_back(std::move(done));
  if (waiting_.size() > 1) return;  // a probe is under way: it answers this one too
  lock.unlock();
  Probe();
}

void HealthChecker::Probe() {
  // One strand for every probe's handlers: they share the tally.
  struct Tally {
    HealthSnapshot snapshot;
    size_t left = 0;
  };
  auto strand = asio::make_strand(context_->ioc);
  auto tally = std::make_shared<Tally>();
  tally->snapshot.prefill.assign(context_->prefill.urls.size(), false);
  tally->snapshot.decode.assign(context_->decode.urls.size(), false);
  tally->left = tally->snapshot.prefill.size() + tally->snapshot.decode.size();
  UpstreamTimeouts timeouts{context_->options.health_timeout, context_->options.health_timeout};
  for (int side = 0; side < 2; ++side) {
    const Upstreams& ups = side == 0 ? context_->prefill : context_->decode;
    for (size_t i = 0; i < ups.urls.size(); ++i) {
      UpstreamRequest request;
      request.url = &ups.urls[i];
      request.method = "GET";
      request.path = "/health";
      request.api_key = context_->options.upstream_api_key;
      auto status = std::make_shared<int>(0);
      UpstreamCall::Start(strand, std::move(request), timeouts,
                          {.on_head = [status](int s, std::string) { *status = s; },
                           .on_body = nullptr,
                           .on_end =
                               [this, tally, status, side, i](std::optional<UpstreamFailure> failure) {
                                 (side == 0 ? tally->snapshot.prefill : tally->snapshot.decode)[i] =
                                     !failure && *status == 200;
                                 if (--tally->left > 0) return;
                                 std::vector<std::function<void(const HealthSnapshot&)>> waiting;
                                 {
                                   std::lock_guard lock(mu_);
                                   last_ = tally->snapshot;
                                   last_at_ = std::chrono::steady_clock::now();
                                   waiting.swap(waiting_);
                                 }
                                 for (auto& done : waiting) done(tally->snapshot);
                               }});
    }
  }
}

std::shared_ptr<http::DeferredBody> StartHealthResponse(RouterContext* context, HealthChecker* checker) {
  auto body = std::make_shared<HealthBody>();
  checker->Check([context, body](const HealthSnapshot& snapshot) {
    http::HttpResponse response;
    RenderHealth(snapshot, context->prefill.balancer, context->decode.balancer, &response);
    body->Complete(std::move(response));
  });
  return body;
}

}  // namespace ember::router
