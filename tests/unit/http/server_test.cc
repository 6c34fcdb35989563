// HttpServer over real loopback sockets, with fake deferred bodies standing in for engine jobs:
// pipelining, limits while reading, bodies woken from another thread, a client that goes away,
// --max-connections, and the bounded shutdown. (The OpenAI routes over it are tests/e2e.) These
// run under ASan and TSan too, where the connections' strands meet the "engine" thread.
#include "http/server.h"

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

namespace ember::http {
namespace {

using namespace std::chrono_literals;

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

void SendAll(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// Everything the server sends until it closes the connection (or 10 s pass).
std::string ReadToClose(int fd) {
  std::string out;
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Reads until `needle` has arrived.
std::string ReadUntil(int fd, const std::string& needle) {
  std::string out;
  char buf[4096];
  while (out.find(needle) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// A body "the engine" feeds from its own thread: pieces appended with Feed, then Finish.
class FedBody : public DeferredBody {
 public:
  explicit FedBody(bool streaming) : streaming_(streaming) {}
  bool streaming() const override { return streaming_; }
  void SetWaker(std::function<void()> wake) override {
    std::lock_guard lock(mu_);
    wake_ = std::move(wake);
  }
  bool Pump(std::string* chunk, HttpResponse* response) override {
    std::lock_guard lock(mu_);
    if (turn_streaming_ && !streaming_) {
      // A proxy's body: its head became known (the upstream's), it streams from now on.
      response->status = 201;
      response->content_type = "text/event-stream";
      streaming_ = true;
    }
    if (streaming_) {
      *chunk = std::move(ready_);
      ready_.clear();
      return finished_;
    }
    if (!finished_) return false;
    response->set_content(std::move(ready_), "text/plain");
    return true;
  }
  void Abort() override {
    aborted_ = true;
    Feed("[aborted]", true);
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
  // Turns a non-streaming body streaming at its next Pump (DeferredBody::streaming's contract).
  void TurnStreaming() {
    {
      std::lock_guard lock(mu_);
      turn_streaming_ = true;
    }
    Feed("", false);
  }

 private:
  std::atomic<bool> streaming_;
  bool turn_streaming_ = false;
  std::mutex mu_;
  std::string ready_;
  bool finished_ = false;
  std::function<void()> wake_;
  std::atomic<bool> aborted_{false};
};

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<HttpServer>(
        options, [this](const HttpRequest& req, HttpResponse& res) { Handle(req, res); },
        [](const HttpRefusal& refusal, HttpResponse& res) {
          res.status = refusal.status;
          res.set_content(refusal.message, "text/plain");
        });
    port_ = *server_->Bind();
    thread_ = std::thread([this] { (void)server_->Serve(); });
  }
  void TearDown() override {
    if (server_) {
      server_->Stop();
      thread_.join();
    }
  }
  void Handle(const HttpRequest& req, HttpResponse& res) {
    if (req.path == "/echo") return res.set_content(req.method + " " + req.target + " " + req.body, "text/plain");
    if (req.path == "/stream" || req.path == "/collect" || req.path == "/late") {
      auto body = std::make_shared<FedBody>(req.path == "/stream");
      {
        std::lock_guard lock(mu_);
        bodies_.push_back(body);
      }
      cv_.notify_all();
      res.content_type = "text/plain";
      res.deferred = body;
      return;
    }
    res.status = 404;
  }
  std::shared_ptr<FedBody> WaitForBody(size_t index) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return bodies_.size() > index; });
    return bodies_.size() > index ? bodies_[index] : nullptr;
  }

  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<FedBody>> bodies_;
};

TEST_F(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  StartServer();
  const int fd = Connect(port_);
  SendAll(fd,
          "POST /echo?a=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
          "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"
          "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
          "3\r\nthr\r\n2\r\nee\r\n0\r\n\r\n");
  const std::string all = ReadToClose(fd);
  ::close(fd);
  const size_t first = all.find("POST /echo?a=1 one"), second = all.find("GET /echo "),
               third = all.find("POST /echo three");
  ASSERT_NE(first, std::string::npos) << all;
  ASSERT_NE(second, std::string::npos) << all;
  ASSERT_NE(third, std::string::npos) << all;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
}

TEST_F(ServerTest, LimitsAreEnforcedWhileReading) {
  HttpServerOptions options;
  options.limits.max_body_bytes = 100;
  options.limits.max_header_count = 5;
  StartServer(options);
  // A declared length past the limit: refused from the head alone.
  int fd = Connect(port_);
  SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n");
  EXPECT_EQ(ReadUntil(fd, "\r\n\r\n").rfind("HTTP/1.1 413 ", 0), 0u);
  ::close(fd);
  // Chunks count against it as they arrive.
  fd = Connect(port_);
  SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + std::string(64, 'a') +
                  "\r\n40\r\n" + std::string(64, 'a') + "\r\n");
  EXPECT_EQ(ReadToClose(fd).rfind("HTTP/1.1 413 ", 0), 0u);
  ::close(fd);
  fd = Connect(port_);
  SendAll(fd, "GET /echo HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\n\r\n");
  EXPECT_EQ(ReadToClose(fd).rfind("HTTP/1.1 431 ", 0), 0u);
  ::close(fd);
  fd = Connect(port_);
  SendAll(fd, "GET /echo HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_EQ(ReadToClose(fd).rfind("HTTP/1.1 431 ", 0), 0u);
  ::close(fd);
  fd = Connect(port_);
  SendAll(fd, "POST /echo HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nxx");
  EXPECT_EQ(ReadToClose(fd).rfind("HTTP/1.1 415 ", 0), 0u);
  ::close(fd);
  fd = Connect(port_);
  SendAll(fd, "\x16\x03\x01 garbage\r\n\r\n");
  EXPECT_EQ(ReadToClose(fd).rfind("HTTP/1.1 400 ", 0), 0u);
  ::close(fd);
}

TEST_F(ServerTest, SlowClientsAreDropped) {
  HttpServerOptions options;
  options.limits.header_timeout = 300ms;
  options.limits.body_timeout = 300ms;
  StartServer(options);
  const auto started = std::chrono::steady_clock::now();
  const int idle = Connect(port_);
  const int slow_head = Connect(port_);
  SendAll(slow_head, "GET /echo HTTP/1.1\r\nHo");
  const int slow_body = Connect(port_);
  SendAll(slow_body, "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nab");
  EXPECT_EQ(ReadToClose(idle), "");
  EXPECT_EQ(ReadToClose(slow_head), "");
  EXPECT_EQ(ReadToClose(slow_body), "");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
  for (int fd : {idle, slow_head, slow_body}) ::close(fd);
}

// The engine thread feeds the stream; the connection writes each piece as a chunk.
TEST_F(ServerTest, StreamedBodiesAreWokenFromAnotherThread) {
  StartServer();
  const int fd = Connect(port_);
  SendAll(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  auto body = WaitForBody(0);
  ASSERT_TRUE(body);
  std::thread engine([&] {
    for (int i = 0; i < 50; ++i) body->Feed("piece" + std::to_string(i) + ";", false);
    body->Feed("end", true);
  });
  const std::string got = ReadUntil(fd, "0\r\n\r\n");
  engine.join();
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
  EXPECT_NE(got.find("piece49;"), std::string::npos) << got;
  EXPECT_NE(got.find("end\r\n0\r\n\r\n"), std::string::npos) << got;
  EXPECT_FALSE(body->aborted());
  // Keep-alive: the connection serves the next request.
  SendAll(fd, "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(ReadToClose(fd).find("GET /echo"), std::string::npos);
  ::close(fd);
}

TEST_F(ServerTest, ABodyMayTurnStreamingOnceItsHeadIsKnown) {
  StartServer();
  const int fd = Connect(port_);
  SendAll(fd, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
  auto body = WaitForBody(0);
  ASSERT_TRUE(body);
  body->TurnStreaming();
  body->Feed("first", false);
  // The head (the body's, not the handler's) and the first piece come before the end.
  const std::string head = ReadUntil(fd, "first\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 201 ", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Type: text/event-stream"), std::string::npos) << head;
  EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos) << head;
  body->Feed("last", true);
  EXPECT_NE(ReadUntil(fd, "0\r\n\r\n").find("last\r\n0\r\n\r\n"), std::string::npos);
  // Keep-alive: the next response on the connection is whole again.
  SendAll(fd, "GET /collect HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  auto second = WaitForBody(1);
  ASSERT_TRUE(second);
  second->Feed("whole", true);
  const std::string got = ReadToClose(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 ", 0), 0u) << got;
  EXPECT_NE(got.find("Content-Length: 5"), std::string::npos) << got;
  ::close(fd);
}

// Streaming or not, a client that closes its connection aborts the body's work at once.
TEST_F(ServerTest, AClientThatLeavesAbortsItsBody) {
  StartServer();
  for (size_t i = 0; i < 2; ++i) {
    const int fd = Connect(port_);
    SendAll(fd, i == 0 ? "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n" : "GET /collect HTTP/1.1\r\nHost: x\r\n\r\n");
    auto body = WaitForBody(i);
    ASSERT_TRUE(body);
    ::close(fd);
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (!body->aborted() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    EXPECT_TRUE(body->aborted()) << i;
  }
}

TEST_F(ServerTest, PastMaxConnectionsA503) {
  HttpServerOptions options;
  options.max_connections = 2;
  StartServer(options);
  const int a = Connect(port_), b = Connect(port_);
  std::this_thread::sleep_for(100ms);  // both accepted
  const int c = Connect(port_);
  EXPECT_EQ(ReadToClose(c).rfind("HTTP/1.1 503 ", 0), 0u);
  ::close(c);
  SendAll(a, "GET /echo HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_NE(ReadToClose(a).find("200 OK"), std::string::npos);
  for (int fd : {a, b}) ::close(fd);
}

// Stop(): idle connections close, the request in flight finishes, then Serve returns; past the
// shutdown timeout the body is aborted and still ends properly.
TEST_F(ServerTest, ShutdownDrainsThenAbortsPastTheTimeout) {
  HttpServerOptions options;
  options.shutdown_timeout = 300ms;
  StartServer(options);
  const int idle = Connect(port_);
  const int streaming = Connect(port_);
  SendAll(streaming, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  auto body = WaitForBody(0);
  ASSERT_TRUE(body);
  body->Feed("first;", false);
  EXPECT_NE(ReadUntil(streaming, "first;").find("first;"), std::string::npos);
  const auto stopped = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_EQ(ReadToClose(idle), "");  // idle: closed without an answer
  const std::string rest = ReadToClose(streaming);
  EXPECT_NE(rest.find("[aborted]\r\n0\r\n\r\n"), std::string::npos) << rest;
  EXPECT_TRUE(body->aborted());
  thread_.join();
  server_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, 3s);
  for (int fd : {idle, streaming}) ::close(fd);
}

}  // namespace
}  // namespace ember::http
