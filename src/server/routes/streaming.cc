#include "server/routes/streaming.h"

#include <chrono>

#include "core/logging.h"
#include "server/http_util.h"
#include "server/protocol/safe_text.h"

namespace ember::server {

namespace {
// A stream quiet this long (queued behind others) gets a comment, so proxies keep it open.
constexpr std::chrono::seconds kKeepAlive(1);

class JobBody : public DeferredBody {
 public:
  JobBody(std::shared_ptr<GenerationJob> job, StreamFormat stream)
      : job_(std::move(job)), streaming_(true), stream_(std::move(stream)) {}
  JobBody(std::shared_ptr<GenerationJob> job, CollectFormat collect)
      : job_(std::move(job)), streaming_(false), collect_(std::move(collect)) {}
  ~JobBody() override {
    job_->SetWaker({});
    job_->AbortAll();
  }

  bool streaming() const override { return streaming_; }
  void SetWaker(std::function<void()> wake) override { job_->SetWaker(std::move(wake)); }
  void Abort() override { job_->AbortAll(); }

  bool Pump(std::string* chunk, HttpResponse* response) override {
    // A format that throws ends this response alone: the job is aborted, the client gets a
    // generic error (the exception's text may quote the request; it goes to the log).
    try {
      return streaming_ ? PumpStream(chunk) : PumpCollect(response);
    } catch (const std::exception& e) {
      EMBER_LOG_ERROR("a generation response failed: {}", SafeText(e.what(), 512));
    } catch (...) {
      EMBER_LOG_ERROR("a generation response failed with an exception that is not a std::exception");
    }
    job_->AbortAll();
    const ApiError error = InternalError("internal error while generating; the server log has the details");
    if (streaming_) {
      *chunk += SseEvent(error.ToJson()) + "data: [DONE]\n\n";
    } else {
      *response = {};
      SendError(*response, error);
    }
    return true;
  }

 private:
  bool PumpStream(std::string* chunk) {
    while (std::optional<ChoiceDelta> delta = job_->Next()) {
      for (const auto& payload : stream_.on_delta(*delta)) *chunk += SseEvent(payload);
    }
    const auto now = std::chrono::steady_clock::now();
    if (job_->done()) {
      for (const auto& payload : stream_.on_done(*job_)) *chunk += SseEvent(payload);
      *chunk += "data: [DONE]\n\n";
      return true;
    }
    if (!chunk->empty()) {
      last_output_ = now;
    } else if (now - last_output_ >= kKeepAlive) {
      *chunk = ": keep-alive\n\n";
      last_output_ = now;
    }
    return false;
  }

  bool PumpCollect(HttpResponse* response) {
    while (std::optional<ChoiceDelta> delta = job_->Next()) collect_.on_delta(*delta);
    if (!job_->done()) return false;
    collect_.on_done(*job_, *response);
    return true;
  }

  std::shared_ptr<GenerationJob> job_;
  const bool streaming_;
  StreamFormat stream_;
  CollectFormat collect_;
  std::chrono::steady_clock::time_point last_output_ = std::chrono::steady_clock::now();
};
}  // namespace

void StreamJob(HttpResponse& res, std::shared_ptr<GenerationJob> job, StreamFormat format) {
  res.set_header("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  res.deferred = std::make_shared<JobBody>(std::move(job), std::move(format));
}

void CollectJob(HttpResponse& res, std::shared_ptr<GenerationJob> job, CollectFormat format) {
  res.deferred = std::make_shared<JobBody>(std::move(job), std::move(format));
}

nlohmann::ordered_json UsageJson(const Usage& u) {
  nlohmann::ordered_json usage = {{"prompt_tokens", u.prompt_tokens},
                                  {"completion_tokens", u.completion_tokens},
                                  {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.cached_tokens > 0) usage["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  return usage;
}

nlohmann::ordered_json StopReason(const TextDelta& d) {
  if (d.stop_string) return *d.stop_string;
  if (d.stop_token) return *d.stop_token;
  return nullptr;
}

}  // namespace ember::server
