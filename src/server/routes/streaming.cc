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

void CollectJob(GenerationJob& job, const std::function<void(const ChoiceDelta&)>& on_delta) {
  while (!job.done()) {
    if (std::optional<ChoiceDelta> delta = job.Next(std::chrono::milliseconds(1000))) on_delta(*delta);
  }
}

}  // namespace ember::server
