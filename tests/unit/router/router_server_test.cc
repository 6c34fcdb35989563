// RouterServer in-process between fake instances (src/http servers) and raw-socket clients: the
// two phases, a stream relayed while the instance still produces it, a client that leaves, many
// clients at once. The same paths as tests/e2e/test_router.py, here so that the sanitizer
// presets (TSan: the router's strand against the client's connection strand) run them.
#include "router/router_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/server.h"

namespace ember::router {
namespace {

using namespace std::chrono_literals;

// A stream fed from a test thread; records whether it was aborted (its client, the router, left).
class FedStream : public http::DeferredBody {
 public:
  bool streaming() const override { return true; }
  void SetWaker(std::function<void()> wake) override {
    std::lock_guard lock(mu_);
    wake_ = std::move(wake);
  }
  bool Pump(std::string* chunk, http::HttpResponse*) override {
    std::lock_guard lock(mu_);
    *chunk = std::move(ready_);
    ready_.clear();
    return finished_;
  }
  void Abort() override {
    aborted_ = true;
    Feed("", true);
  }
  void Feed(const std::string& text, bool finish) {
    std::function<void()> wake;
    {
      std::lock_guard lock(mu_);
      if (finished_) return;
      ready_ += text;
      finished_ = finish;
      wake = wake_;
    }
    if (wake) wake();
  }
  bool aborted() const { return aborted_; }

 private:
  std::mutex mu_;
  std::string ready_;
  bool finished_ = false;
  std::function<void()> wake_;
  std::atomic<bool> aborted_{false};
};

// A prefill or decode instance. Decode streams "a", "b" and [DONE] at once unless `hold`, in
// which case its streams wait for the test to feed them (streams()).
class FakeInstance {
 public:
  FakeInstance(bool prefill, bool hold = false)
      : prefill_(prefill),
        hold_(hold),
        server_({.host = "127.0.0.1", .port = 0},
                [this](const http::HttpRequest& req, http::HttpResponse& res) { Handle(req, res); },
                [](const http::HttpRefusal& refusal, http::HttpResponse& res) { res.status = refusal.status; }) {
    port_ = *server_.Bind();
    thread_ = std::thread([this] { (void)server_.Serve(); });
  }
  ~FakeInstance() {
    for (auto& s : streams_) s->Feed("", true);
    server_.Stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<nlohmann::json> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::shared_ptr<FedStream> WaitForStream(size_t index) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return streams_.size() > index; });
    return streams_.size() > index ? streams_[index] : nullptr;
  }

 private:
  void Handle(const http::HttpRequest& req, http::HttpResponse& res) {
    if (req.path == "/health") return res.set_content("{}", "application/json");
    auto body = nlohmann::json::parse(req.body);
    {
      std::lock_guard lock(mu_);
      bodies_.push_back(body);
    }
    if (prefill_) {
      return res.set_content(R"({"choices": [], "kv_transfer_params": {"block": 7, "num_bytes": 64}})",
                             "application/json");
    }
    if (!body.value("stream", false)) return res.set_content(R"({"choices": [{"text": "ab"}]})", "application/json");
    auto stream = std::make_shared<FedStream>();
    if (!hold_) stream->Feed("data: a\n\ndata: b\n\ndata: [DONE]\n\n", true);
    {
      std::lock_guard lock(mu_);
      streams_.push_back(stream);
    }
    cv_.notify_all();
    res.content_type = "text/event-stream";
    res.deferred = stream;
  }

  const bool prefill_;
  const bool hold_;
  http::HttpServer server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<nlohmann::json> bodies_;
  std::vector<std::shared_ptr<FedStream>> streams_;
};

class Router {
 public:
  Router(const std::string& prefill, const std::string& decode) {
    RouterOptions options;
    options.prefill_urls = {prefill};
    options.decode_urls = {decode};
    options.port = 0;
    options.upstream_threads = 2;
    auto server = RouterServer::Create(options);
    EXPECT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    port_ = *server_->Bind();
    thread_ = std::thread([this] { (void)server_->Serve(); });
  }
  ~Router() {
    server_->Stop();
    thread_.join();
  }
  int port() const { return port_; }
  RouterContext& context() { return server_->context(); }

 private:
  std::unique_ptr<RouterServer> server_;
  std::thread thread_;
  int port_ = 0;
};

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

void Post(int fd, const std::string& body) {
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Connection: close\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
}

std::string ReadUntil(int fd, const std::string& needle) {
  std::string out;
  char buf[4096];
  while (needle.empty() || out.find(needle) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

TEST(RouterServerTest, TwoPhasesThenTheStream) {
  FakeInstance prefill(true), decode(false);
  Router router(prefill.url(), decode.url());
  const int fd = Connect(router.port());
  Post(fd, R"({"prompt": "hi", "stream": true, "max_tokens": 9})");
  const std::string got = ReadUntil(fd, "");
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 ", 0), 0u) << got;
  EXPECT_NE(got.find("text/event-stream"), std::string::npos) << got;
  EXPECT_NE(got.find("data: a\n\ndata: b\n\ndata: [DONE]\n\n"), std::string::npos) << got;
  ASSERT_EQ(prefill.bodies().size(), 1u);
  EXPECT_EQ(prefill.bodies()[0]["max_tokens"], 1);
  EXPECT_EQ(prefill.bodies()[0]["stream"], false);
  ASSERT_EQ(decode.bodies().size(), 1u);
  EXPECT_EQ(decode.bodies()[0]["kv_transfer_params"], nlohmann::json::parse(R"({"block": 7, "num_bytes": 64})"));
  EXPECT_EQ(decode.bodies()[0]["max_tokens"], 9);
}

TEST(RouterServerTest, AStreamIsRelayedAsProducedAndALeavingClientAbortsIt) {
  FakeInstance prefill(true), decode(false, /*hold=*/true);
  Router router(prefill.url(), decode.url());
  const int fd = Connect(router.port());
  Post(fd, R"({"prompt": "hi", "stream": true})");
  auto stream = decode.WaitForStream(0);
  ASSERT_TRUE(stream);
  stream->Feed("data: first\n\n", false);
  EXPECT_NE(ReadUntil(fd, "data: first").find("data: first"), std::string::npos);
  ::close(fd);  // the client leaves mid-stream
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!stream->aborted() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(stream->aborted()) << "the router kept the decode instance's stream open";
  while (router.context().decode.balancer.in_flight(0) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(router.context().decode.balancer.in_flight(0), 0u);
  EXPECT_EQ(router.context().active.load(), 0u);
}

TEST(RouterServerTest, ManyClientsAtOnce) {
  FakeInstance prefill(true), decode(false);
  Router router(prefill.url(), decode.url());
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      const int fd = Connect(router.port());
      Post(fd, i % 2 ? R"({"prompt": "x", "stream": true})" : R"({"prompt": "x"})");
      const std::string got = ReadUntil(fd, "");
      ::close(fd);
      if (got.rfind("HTTP/1.1 200 ", 0) == 0 && got.find(i % 2 ? "[DONE]" : "\"ab\"") != std::string::npos) ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 16);
  EXPECT_EQ(router.context().metrics.phase_count(Phase::kDecode, Outcome::kOk), 16u);
  EXPECT_EQ(router.context().metrics.phase_count(Phase::kPrefill, Outcome::kOk), 16u);
}

}  // namespace
}  // namespace ember::router
