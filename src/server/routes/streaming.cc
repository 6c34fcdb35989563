#include "server/routes/streaming.h"

#include "core/logging.h"
#include "server/http_util.h"
#include "server/protocol/safe_text.h"

namespace ember::server {

namespace {
constexpr std::chrono::milliseconds kKeepAlive(1000);

// One call of the content provider: the next delta's events, a keep-alive comment, or the end.
// Returns false (which closes the connection) when the client has gone.
bool NextEvents(GenerationJob& job, const StreamFormat& format, httplib::DataSink& sink) {
  auto write = [&](const std::string& text) { return sink.write(text.data(), text.size()); };
  std::optional<ChoiceDelta> delta = job.Next(kKeepAlive);
  if (delta) {
    for (const auto& payload : format.on_delta(*delta)) {
      if (!write(SseEvent(payload))) {
        job.AbortAll();
        return false;
      }
    }
    return true;
  }
  if (!job.done()) {
    if (!write(": keep-alive\n\n")) {
      job.AbortAll();
      return false;
    }
    return true;
  }
  for (const auto& payload : format.on_done(job)) write(SseEvent(payload));
  write("data: [DONE]\n\n");
  sink.done();
  return true;
}
}  // namespace

void StreamJob(httplib::Response& res, std::shared_ptr<GenerationJob> job, StreamFormat format) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, format = std::move(format)](size_t, httplib::DataSink& sink) {
        // httplib calls the provider outside its exception handling, where a throw would end the
        // process: an exception ends this stream alone, with an error event and [DONE].
        try {
          return NextEvents(*job, format, sink);
        } catch (const std::exception& e) {
          EMBER_LOG_ERROR("a stream failed: {}", SafeText(e.what(), 512));
        } catch (...) {
          EMBER_LOG_ERROR("a stream failed with an exception that is not a std::exception");
        }
        job->AbortAll();
        const std::string end =
            SseEvent(InternalError("internal error while streaming; the server log has the details").ToJson()) +
            "data: [DONE]\n\n";
        sink.write(end.data(), end.size());
        sink.done();
        return true;
      },
      [job](bool) { job->AbortAll(); });
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

void CollectJob(GenerationJob& job, const std::function<void(const ChoiceDelta&)>& on_delta) {
  while (!job.done()) {
    if (std::optional<ChoiceDelta> delta = job.Next(std::chrono::milliseconds(1000))) on_delta(*delta);
  }
}

}  // namespace ember::server
