#include "router/proxy_call.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>

#include "core/logging.h"
#include "router/errors.h"

namespace ember::router {
namespace {

namespace asio = boost::asio;

constexpr size_t kMaxPrefillAnswer = 16u << 20;     // one token and the KV handle: small
constexpr size_t kMaxBufferedForClient = 1u << 20;  // stream bytes a slow client may have waiting

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool Is2xx(int status) { return status >= 200 && status < 300; }

bool ConnectStage(UpstreamStage stage) { return stage == UpstreamStage::kResolve || stage == UpstreamStage::kConnect; }

// An upstream's error body quoted in a log line or a message: short, one line.
std::string Snippet(const std::string& body) {
  std::string out = body.substr(0, 200);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return body.size() > out.size() ? out + "..." : out;
}

}  // namespace

ProxyCall::ProxyCall(RouterContext* context, ProxySpec spec, std::unique_ptr<ConcurrencySlot> slot)
    : context_(context), spec_(std::move(spec)), slot_(std::move(slot)), strand_(asio::make_strand(context->ioc)) {}

ProxyCall::~ProxyCall() = default;

std::string ProxyCall::InstanceName(Phase phase, size_t index) const {
  const Upstreams& ups = phase == Phase::kPrefill ? context_->prefill : context_->decode;
  return fmt::format("{} instance {}", PhaseName(phase), ups.balancer.url(index));
}

void ProxyCall::Start() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->aborted_) return self->Cancelled(Phase::kPrefill);
    if (self->spec_.two_phase) {
      self->StartPrefill();
    } else {
      self->decode_body_ = self->spec_.original;
      self->StartDecode();
    }
  });
}

// --- phase 1 ---------------------------------------------------------------------------------

void ProxyCall::StartPrefill() {
  auto lease = context_->prefill.balancer.Acquire(Clock::now(), /*even_backing_off=*/false);
  if (!lease) return FallBack("every prefill instance is backing off after a failed connect");
  lease_ = std::move(*lease);
  phase_ = Phase::kPrefill;
  phase_start_ = Clock::now();
  whole_body_.clear();
  body_overflow_ = false;
  upstream_status_ = 0;
  UpstreamRequest request;
  request.url = &context_->prefill.urls[lease_.index()];
  request.path = spec_.path;
  request.body = PrefillBody(spec_.original, spec_.chat).dump();
  request.api_key = context_->options.upstream_api_key;
  request.request_id = spec_.request_id;
  auto self = shared_from_this();
  upstream_ = UpstreamCall::Start(
      strand_, std::move(request), context_->options.timeouts,
      {.on_head = [self](int status, std::string) { self->upstream_status_ = status; },
       .on_body =
           [self](std::string_view bytes) {
             if (self->whole_body_.size() + bytes.size() > kMaxPrefillAnswer) {
               self->body_overflow_ = true;
             } else {
               self->whole_body_.append(bytes);
             }
             return true;
           },
       .on_end = [self](std::optional<UpstreamFailure> failure) { self->OnPrefillEnd(std::move(failure)); }});
}

void ProxyCall::OnPrefillEnd(std::optional<UpstreamFailure> failure) {
  const size_t index = lease_.index();
  lease_.Release();
  upstream_.reset();
  if (aborted_ || (failure && failure->stage == UpstreamStage::kCancelled)) return Cancelled(Phase::kPrefill);
  Balancer& balancer = context_->prefill.balancer;
  std::string problem;
  Outcome outcome = Outcome::kFailed;
  bool changed = false;
  Json kv;
  if (failure) {
    problem = failure->what;
    changed = ConnectStage(failure->stage) ? balancer.ReportConnectFailure(index, Clock::now())
                                           : balancer.ReportFailure(index);
  } else if (!Is2xx(upstream_status_)) {
    problem = fmt::format("answered HTTP {} ({})", upstream_status_, Snippet(whole_body_));
    outcome = Outcome::kUpstreamError;
    changed = balancer.ReportFailure(index);
  } else {
    kv = body_overflow_ ? Json() : KvTransferParams(Json::parse(whole_body_, nullptr, /*allow_exceptions=*/false));
    if (kv.is_null()) {
      problem =
          "answered without a kv_transfer_params object (is it started with a KV connector, as a prefill "
          "instance?)";
      changed = balancer.ReportFailure(index);
    }
  }
  if (!problem.empty()) {
    context_->metrics.CountPhase(Phase::kPrefill, outcome);
    if (changed) {
      EMBER_LOG_WARN(
          "{} {}: requests fall back to decoding without its KV (the decode instance computes the "
          "prompt) until it answers again; check that it is up and serving the same model",
          InstanceName(Phase::kPrefill, index), problem);
    }
    return FallBack(InstanceName(Phase::kPrefill, index) + " " + problem);
  }
  context_->metrics.CountPhase(Phase::kPrefill, Outcome::kOk);
  context_->metrics.ObservePrefill(SecondsSince(phase_start_));
  context_->metrics.AddKvBytes(KvTransferBytes(kv));
  if (balancer.ReportSuccess(index)) EMBER_LOG_INFO("{} answers again", InstanceName(Phase::kPrefill, index));
  decode_body_ = DecodeBody(spec_.original, kv);
  StartDecode();
}

void ProxyCall::FallBack(const std::string& why) {
  EMBER_LOG_DEBUG("request {}: decoding without prefill: {}", spec_.request_id, why);
  context_->metrics.CountFallback();
  decode_body_ = FallbackBody(spec_.original);
  StartDecode();
}

// --- phase 2 ---------------------------------------------------------------------------------

void ProxyCall::StartDecode() {
  auto lease = context_->decode.balancer.Acquire(Clock::now(), /*even_backing_off=*/true, decode_tried_);
  if (!lease) {
    context_->metrics.CountPhase(Phase::kDecode, Outcome::kFailed);
    return FinishWithError(502,
                           last_decode_failure_.empty() ? "no decode instance is configured" : last_decode_failure_);
  }
  lease_ = std::move(*lease);
  phase_ = Phase::kDecode;
  phase_start_ = Clock::now();
  whole_body_.clear();
  body_overflow_ = false;
  upstream_status_ = 0;
  UpstreamRequest request;
  request.url = &context_->decode.urls[lease_.index()];
  request.method = spec_.method;
  request.path = spec_.path;
  if (spec_.method == "POST") request.body = decode_body_.dump();
  request.api_key = context_->options.upstream_api_key;
  request.request_id = spec_.request_id;
  auto self = shared_from_this();
  upstream_ = UpstreamCall::Start(
      strand_, std::move(request), context_->options.timeouts,
      {.on_head = [self](int status, std::string content_type) { self->OnDecodeHead(status, std::move(content_type)); },
       .on_body = [self](std::string_view bytes) { return self->OnDecodeBody(bytes); },
       .on_end = [self](std::optional<UpstreamFailure> failure) { self->OnDecodeEnd(std::move(failure)); }});
}

void ProxyCall::OnDecodeHead(int status, std::string content_type) {
  upstream_status_ = status;
  upstream_content_type_ = std::move(content_type);
  context_->metrics.ObserveDecodeFirstByte(SecondsSince(phase_start_));
  if (!spec_.client_streams || !Is2xx(status) || !upstream_content_type_.starts_with("text/event-stream")) return;
  // A stream: its head goes to the client now, its events as they come.
  relaying_stream_ = true;
  {
    std::lock_guard lock(mu_);
    response_.status = status;
    response_.content_type = upstream_content_type_;
    response_.set_header("Cache-Control", "no-cache");
    stream_head_ready_ = true;
  }
  Wake();
}

bool ProxyCall::OnDecodeBody(std::string_view bytes) {
  if (!relaying_stream_) {
    if (whole_body_.size() + bytes.size() > context_->options.max_response_bytes) {
      body_overflow_ = true;
    } else {
      whole_body_.append(bytes);
    }
    return true;
  }
  if (bytes.size() >= 2) {
    last_two_[0] = bytes[bytes.size() - 2];
    last_two_[1] = bytes.back();
  } else if (!bytes.empty()) {
    last_two_[0] = last_two_[1];
    last_two_[1] = bytes.back();
  }
  bool more = true;
  {
    std::lock_guard lock(mu_);
    out_.append(bytes);
    // The client is this far behind: the instance waits (Pump resumes the reading).
    if (out_.size() >= kMaxBufferedForClient) more = !(upstream_paused_ = true);
  }
  Wake();
  return more;
}

void ProxyCall::OnDecodeEnd(std::optional<UpstreamFailure> failure) {
  const size_t index = lease_.index();
  lease_.Release();
  upstream_.reset();
  if (aborted_ || (failure && failure->stage == UpstreamStage::kCancelled)) return Cancelled(Phase::kDecode);
  Balancer& balancer = context_->decode.balancer;
  const std::string name = InstanceName(Phase::kDecode, index);
  if (failure && ConnectStage(failure->stage)) {
    // Nothing was sent: another instance may take the request (each is tried once).
    if (balancer.ReportConnectFailure(index, Clock::now())) {
      EMBER_LOG_WARN("{} {}: skipped for {} ms at a time until it accepts connections again; check that it is up", name,
                     failure->what, context_->options.backoff.count());
    }
    decode_tried_.push_back(index);
    last_decode_failure_ = name + " " + failure->what;
    return StartDecode();
  }
  if (failure) {
    if (balancer.ReportFailure(index)) EMBER_LOG_WARN("{} {}", name, failure->what);
    context_->metrics.CountPhase(Phase::kDecode, Outcome::kFailed);
    return FinishWithError(502, name + " " + failure->what);
  }
  if (balancer.ReportSuccess(index)) EMBER_LOG_INFO("{} answers again", name);
  context_->metrics.ObserveDecode(SecondsSince(phase_start_));
  if (relaying_stream_) {
    context_->metrics.CountPhase(Phase::kDecode, Outcome::kOk);
    return FinishStream("");
  }
  if (body_overflow_) {
    context_->metrics.CountPhase(Phase::kDecode, Outcome::kFailed);
    return FinishWithError(502, fmt::format("{} answered more than {} bytes (--max-response-mb)", name,
                                            context_->options.max_response_bytes));
  }
  context_->metrics.CountPhase(Phase::kDecode, Is2xx(upstream_status_) ? Outcome::kOk : Outcome::kUpstreamError);
  FinishWhole(upstream_status_, upstream_content_type_, std::move(whole_body_));
}

// --- ending ----------------------------------------------------------------------------------

void ProxyCall::Cancelled(Phase phase) {
  context_->metrics.CountPhase(phase, Outcome::kClientGone);
  // The client is gone (nobody reads this) or the router is shutting down (the client does).
  FinishWithError(503, "the request was cancelled: the router is shutting down");
}

void ProxyCall::FinishWithError(int status, const std::string& message) {
  if (relaying_stream_) {
    // Mid-stream: end the event being relayed, if any, then the error event and [DONE].
    const bool at_boundary = last_two_[0] == '\n' && last_two_[1] == '\n';
    return FinishStream((at_boundary ? "" : "\n\n") + SseErrorEvents(message));
  }
  FinishWhole(status, "application/json", ErrorJson(message, ErrorType(status)));
}

void ProxyCall::FinishWhole(int status, std::string content_type, std::string body) {
  if (finished_) return;
  finished_ = true;
  slot_.reset();
  {
    std::lock_guard lock(mu_);
    response_.status = status;
    response_.set_content(std::move(body), content_type.empty() ? "application/json" : std::move(content_type));
    done_ = true;
  }
  Wake();
}

void ProxyCall::FinishStream(std::string tail) {
  if (finished_) return;
  finished_ = true;
  slot_.reset();
  {
    std::lock_guard lock(mu_);
    out_ += tail;
    done_ = true;
  }
  Wake();
}

// --- the client's side (its connection's strand) ---------------------------------------------

bool ProxyCall::streaming() const {
  std::lock_guard lock(mu_);
  return streaming_;
}

void ProxyCall::SetWaker(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  wake_ = std::move(wake);
}

void ProxyCall::Wake() {
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    wake = wake_;
  }
  if (wake) wake();
}

bool ProxyCall::Pump(std::string* chunk, http::HttpResponse* response) {
  std::lock_guard lock(mu_);
  if (stream_head_ready_ && !streaming_) {
    *response = std::move(response_);
    streaming_ = true;
  }
  if (streaming_) {
    chunk->append(out_);
    out_.clear();
    if (upstream_paused_) {
      upstream_paused_ = false;
      asio::post(strand_, [self = shared_from_this()] {
        if (self->upstream_) self->upstream_->Resume();
      });
    }
    return done_;
  }
  if (!done_) return false;
  *response = std::move(response_);
  return true;
}

void ProxyCall::Abort() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->finished_ || self->aborted_) return;
    self->aborted_ = true;
    if (self->upstream_) self->upstream_->Cancel();
  });
}

}  // namespace ember::router
