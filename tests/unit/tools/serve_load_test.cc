// The client against an in-process fake OpenAI server (cpp-httplib): streaming, token packing,
// HTTP errors, both load modes.
#include "tools/ember/bench/serve_load.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

namespace ember::tools::bench {
namespace {

class FakeServer {
 public:
  // Streams max_tokens tokens, `tokens_per_chunk` per SSE event, then usage and [DONE].
  explicit FakeServer(int tokens_per_chunk) {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})", "application/json");
    });
    server_.Post("/v1/completions", [this, tokens_per_chunk](const httplib::Request& req, httplib::Response& res) {
      ++requests_;
      const auto body = nlohmann::json::parse(req.body);
      if (body["model"] != "fake-model") {
        res.status = 404;
        res.set_content(R"({"error":{"message":"no such model"}})", "application/json");
        return;
      }
      EXPECT_TRUE(body["stream"].get<bool>());
      EXPECT_TRUE(body["ignore_eos"].get<bool>());
      EXPECT_TRUE(body["stream_options"]["include_usage"].get<bool>());
      const int64_t max_tokens = body["max_tokens"];
      const int64_t prompt_tokens = static_cast<int64_t>(body["prompt"].get<std::string>().size());
      res.set_chunked_content_provider("text/event-stream", [=](size_t, httplib::DataSink& sink) {
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
        // Odd-sized writes, so events straddle the client's reads.
        for (size_t at = 0; at < out.size(); at += 7) sink.write(out.data() + at, std::min<size_t>(7, out.size() - at));
        sink.done();
        return true;
      });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  ServerTarget target() const { return *ParseBaseUrl("http://127.0.0.1:" + std::to_string(port_), ""); }
  int requests() const { return requests_; }

 private:
  httplib::Server server_;
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
