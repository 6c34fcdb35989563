// The client against an in-process fake OpenAI server (src/http): streaming, token packing,
// HTTP errors, both load modes.
#include "tools/ember/bench/serve_load.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

#include "http/server.h"

namespace ember::tools::bench {
namespace {

// A stream written 7 bytes per pump (each its own chunk), so that events straddle the client's
// reads; it wakes its connection again after each piece.
class PiecewiseBody : public http::DeferredBody {
 public:
  explicit PiecewiseBody(std::string text) : text_(std::move(text)) {}
  bool streaming() const override { return true; }
  void SetWaker(std::function<void()> wake) override { wake_ = std::move(wake); }
  bool Pump(std::string* chunk, http::HttpResponse*) override {
    *chunk = text_.substr(at_, 7);
    at_ += chunk->size();
    if (at_ < text_.size()) wake_();
    return at_ >= text_.size();
  }
  void Abort() override {}

 private:
  std::string text_;
  size_t at_ = 0;
  std::function<void()> wake_;
};

class FakeServer {
 public:
  // Streams max_tokens tokens, `tokens_per_chunk` per SSE event, then usage and [DONE].
  explicit FakeServer(int tokens_per_chunk)
      : server_({.host = "127.0.0.1", .port = 0},
                [this, tokens_per_chunk](const http::HttpRequest& req, http::HttpResponse& res) {
                  Handle(req, res, tokens_per_chunk);
                },
                [](const http::HttpRefusal& refusal, http::HttpResponse& res) {
                  res.status = refusal.status;
                  res.set_content(refusal.message, "text/plain");
                }) {
    port_ = *server_.Bind();
    thread_ = std::thread([this] { (void)server_.Serve(); });
  }
  ~FakeServer() {
    server_.Stop();
    thread_.join();
  }
  ServerTarget target() const { return *ParseBaseUrl("http://127.0.0.1:" + std::to_string(port_), ""); }
  int requests() const { return requests_; }

 private:
  void Handle(const http::HttpRequest& req, http::HttpResponse& res, int tokens_per_chunk) {
    if (req.method == "GET" && req.path == "/v1/models") {
      return res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})",
                             "application/json");
    }
    if (req.method != "POST" || req.path != "/v1/completions") {
      res.status = 404;
      return;
    }
    ++requests_;
    const auto body = nlohmann::json::parse(req.body);
    if (body["model"] != "fake-model") {
      res.status = 404;
      return res.set_content(R"({"error":{"message":"no such model"}})", "application/json");
    }
    EXPECT_TRUE(body["stream"].get<bool>());
    EXPECT_TRUE(body["ignore_eos"].get<bool>());
    EXPECT_TRUE(body["stream_options"]["include_usage"].get<bool>());
    const int64_t max_tokens = body["max_tokens"];
    const int64_t prompt_tokens = static_cast<int64_t>(body["prompt"].get<std::string>().size());
    std::string out = ": keep-alive\n\n";
    for (int64_t sent = 0; sent < max_tokens; sent += tokens_per_chunk) {
      std::string text;
      for (int64_t t = sent; t < std::min<int64_t>(max_tokens, sent + tokens_per_chunk); ++t) text += " tok";
      out += "data: " + nlohmann::json({{"choices", {{{"index", 0}, {"text", text}}}}}).dump() + "\n\n";
    }
    out += "data: " +
           nlohmann::json({{"choices", nlohmann::json::array()},
                           {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", max_tokens}}}})
               .dump() +
           "\n\ndata: [DONE]\n\n";
    res.content_type = "text/event-stream";
    res.deferred = std::make_shared<PiecewiseBody>(std::move(out));
  }

  http::HttpServer server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> requests_{0};
};

TEST(ServeLoad, StreamsOneTokenPerChunk) {
  FakeServer server(1);
  EXPECT_EQ(*DiscoverModel(server.target()), "fake-model");
  const RequestResult r = SendCompletion(server.target(), "fake-model", {"hello", 5}, nlohmann::json::object());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.chunks, 5);
  EXPECT_EQ(r.usage_completion_tokens, 5);
  EXPECT_EQ(r.usage_prompt_tokens, 5);
  EXPECT_EQ(r.chunk_times.size(), 5u);
  EXPECT_LE(r.ttft, r.latency);
}

TEST(ServeLoad, PackedChunksCountTokensFromUsage) {
  FakeServer server(3);
  const RequestResult r = SendCompletion(server.target(), "fake-model", {"hi", 7}, nlohmann::json::object());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.chunks, 3);
  EXPECT_EQ(r.OutputTokens(), 7);
}

TEST(ServeLoad, HttpErrorsAndDeadServersAreFailedRequests) {
  FakeServer server(1);
  const RequestResult r = SendCompletion(server.target(), "other", {"hi", 2}, nlohmann::json::object());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("HTTP 404"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("no such model"), std::string::npos) << r.error;
  // A port nobody listens on (the fake's, after it stopped).
  ServerTarget gone;
  {
    FakeServer short_lived(1);
    gone = short_lived.target();
  }
  const RequestResult dead = SendCompletion(gone, "fake-model", {"hi", 2}, nlohmann::json::object());
  EXPECT_FALSE(dead.ok);
  EXPECT_FALSE(dead.error.empty());
}

TEST(ServeLoad, BothLoadModesSendEveryRequest) {
  FakeServer server(1);
  DatasetOptions d;
  d.name = "prefix";
  d.num_prompts = 6;
  d.turns = 2;
  d.prefix_len = 8;
  d.input_len = 4;
  d.output_len = 3;
  const auto sessions = BuildSessions(d);
  ASSERT_TRUE(sessions.ok());
  const LevelRun fixed = RunLoadLevel(server.target(), "fake-model", *sessions, {.concurrency = 2}, {});
  ASSERT_EQ(fixed.results.size(), 6u);
  for (const RequestResult& r : fixed.results) EXPECT_TRUE(r.ok) << r.error;
  const LevelRun poisson = RunLoadLevel(
      server.target(), "fake-model", *sessions,
      {.request_rate = std::numeric_limits<double>::infinity(), .max_concurrency = 2}, {});
  EXPECT_EQ(poisson.results.size(), 6u);
  const LevelRun paced = RunLoadLevel(server.target(), "fake-model", *sessions, {.request_rate = 1000}, {});
  EXPECT_EQ(paced.results.size(), 6u);
  EXPECT_EQ(server.requests(), 18);
  const auto summary = Summarize(paced.results, paced.duration_s, {});
  EXPECT_EQ(summary["total_output_tokens"], 18);
  EXPECT_TRUE(summary["chunks_equal_usage_tokens"].get<bool>());
}

}  // namespace
}  // namespace ember::tools::bench
