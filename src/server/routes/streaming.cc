#include "server/routes/streaming.h"

#include "server/http_util.h"

namespace ember::server {

namespace {
constexpr std::chrono::milliseconds kKeepAlive(1000);
}

void StreamJob(httplib::Response& res, std::shared_ptr<GenerationJob> job, StreamFormat format) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, format = std::move(format)](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& text) { return sink.write(text.data(), text.size()); };
        std::optional<ChoiceDelta> delta = job->Next(kKeepAlive);
        if (delta) {
          for (const auto& payload : format.on_delta(*delta)) {
            if (!write(SseEvent(payload))) {
              job->AbortAll();
              return false;
            }
          }
          return true;
        }
        if (!job->done()) {
          if (!write(": keep-alive\n\n")) {
            job->AbortAll();
            return false;
          }
          return true;
        }
        for (const auto& payload : format.on_done(*job)) write(SseEvent(payload));
        write("data: [DONE]\n\n");
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
