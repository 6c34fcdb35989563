// Remote media URLs (server/multimodal/remote_media.h): the allowlist, the public-address rule
// that stops a name from leading to loopback or private hosts, and real fetches from a small
// HTTP server on a loopback socket in this test: bodies, redirects checked hop by hop, sizes
// refused from Content-Length and from the bytes that arrive, HTTP errors and a server too slow.
#include "server/multimodal/remote_media.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "server/multimodal/media_source.h"

namespace ember::server {
namespace {

using namespace std::chrono_literals;

TEST(AllowedMediaDomainsTest, ParsesHostsWildcardsAndAddresses) {
  auto parsed = ParseAllowedMediaDomains("Images.Example.com, *.cdn.net,127.0.0.1,[::1],2001:db8::5");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, (std::vector<std::string>{"images.example.com", "*.cdn.net", "127.0.0.1", "::1", "2001:db8::5"}));
  for (const char* bad : {"", "a.com,", "*", "*.", "http://a.com", "a.com/x", "a.com:8080", "a*.com", "*a.com", "x.*.com",
                          "user@a.com", "a .com"}) {
    EXPECT_FALSE(ParseAllowedMediaDomains(bad).ok()) << bad;
  }
}

TEST(AllowedMediaDomainsTest, HostsMatchExactlyOrAsSubdomains) {
  RemoteMediaPolicy policy;
  policy.allowed_domains = {"images.example.com", "*.cdn.net", "::1", "10.0.0.7"};
  EXPECT_TRUE(HostAllowed(policy, "images.example.com"));
  EXPECT_TRUE(HostAllowed(policy, "IMAGES.example.COM"));
  EXPECT_FALSE(HostAllowed(policy, "example.com"));
  EXPECT_FALSE(HostAllowed(policy, "images.example.com.evil.org"));
  EXPECT_FALSE(HostAllowed(policy, "evilimages.example.com"));
  EXPECT_TRUE(HostAllowed(policy, "a.cdn.net"));
  EXPECT_TRUE(HostAllowed(policy, "a.b.cdn.net"));
  EXPECT_FALSE(HostAllowed(policy, "cdn.net"));  // "*." means subdomains only
  EXPECT_FALSE(HostAllowed(policy, "evilcdn.net"));
  EXPECT_TRUE(HostAllowed(policy, "[::1]"));
  EXPECT_TRUE(HostAllowed(policy, "10.0.0.7"));
  EXPECT_FALSE(HostAllowed(policy, "10.0.0.8"));
  EXPECT_FALSE(HostAllowed(policy, ""));
}

TEST(PublicAddressTest, OnlyGlobalUnicastIsPublic) {
  for (const char* ok : {"8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1", "2606:4700::1111",
                         "[2a00:1450::1]", "::ffff:8.8.8.8", "2002:0808:0808::1"}) {
    EXPECT_TRUE(IsPublicAddress(ok)) << ok;
  }
  for (const char* no : {"127.0.0.1", "127.9.9.9", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
                         "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "192.0.2.1",
                         "198.18.0.1", "::1", "::", "fe80::1", "fc00::1", "fd12::1", "ff02::1", "2001:db8::1",
                         "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a00:1", "2002:7f00:0001::1",
                         "2001::1", "2001:10::1", "2001:1f::1", "2001:1ff::1", "3fff::1", "not an address", ""}) {
    EXPECT_FALSE(IsPublicAddress(no)) << no;
  }
}

// A loopback HTTP/1.1 server answering each request from a table of path -> raw response (the
// head and body as sent; a handler may also dribble bytes). One thread, one connection at a time.
class FakeMediaServer {
 public:
  using Handler = std::function<void(int fd)>;

  FakeMediaServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    EXPECT_EQ(::listen(fd_, 8), 0);
  }
  ~FakeMediaServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);  // wakes the accept() below with an error
    if (thread_.joinable()) thread_.join();
    ::close(fd_);  // after the thread is done with it (TSan: a close racing an accept is a race)
  }

  void Route(const std::string& path, Handler handler) { routes_[path] = std::move(handler); }
  void Start() {
    thread_ = std::thread([this] { Serve(); });
  }
  int port() const { return port_; }
  int requests() const { return requests_; }
  std::string Url(const std::string& host, const std::string& path) const {
    return "http://" + host + ":" + std::to_string(port_) + path;
  }

  static void Send(int fd, const std::string& bytes) { ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  static Handler Answer(const std::string& status, const std::string& headers, const std::string& body) {
    return [=](int fd) {
      Send(fd, "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + headers +
                   "Connection: close\r\n\r\n" + body);
    };
  }

 private:
  void Serve() {
    while (!stop_) {
      const int client = ::accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      std::string request;
      char buf[2048];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(client, buf, sizeof buf, 0);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      if (request.find("\r\n\r\n") == std::string::npos) {
        ::close(client);  // connected but sent no request (the client's address check refused us)
        continue;
      }
      ++requests_;  // before answering, so a client that has its answer sees the count
      const size_t start = request.find(' ') + 1;
      const std::string path = request.substr(start, request.find(' ', start) - start);
      auto it = routes_.find(path);
      if (it == routes_.end()) {
        Answer("404 Not Found", "", "no")(client);
      } else {
        it->second(client);
      }
      ::shutdown(client, SHUT_WR);
      while (::recv(client, buf, sizeof buf, 0) > 0) {
      }
      ::close(client);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::map<std::string, Handler> routes_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
};

std::string ErrorOf(const std::variant<std::vector<uint8_t>, ApiError>& result) {
  if (const auto* error = std::get_if<ApiError>(&result)) return error->message;
  return "";
}

class RemoteFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    policy_.allowed_domains = {"127.0.0.1"};
    policy_.timeout_seconds = 5;
  }
  std::variant<std::vector<uint8_t>, ApiError> Fetch(const std::string& url, int64_t max_bytes = 1000) {
    return FetchRemoteMedia(url, policy_, max_bytes, "messages[0].content[0]");
  }

  FakeMediaServer server_;
  RemoteMediaPolicy policy_;
};

TEST_F(RemoteFetchTest, FetchesTheBodyFromAnAllowedAddress) {
  server_.Route("/cat.png", FakeMediaServer::Answer("200 OK", "Content-Type: image/png\r\n", "PNGBYTES"));
  server_.Start();
  auto result = Fetch(server_.Url("127.0.0.1", "/cat.png"));
  ASSERT_TRUE(std::holds_alternative<std::vector<uint8_t>>(result)) << ErrorOf(result);
  const auto& bytes = std::get<std::vector<uint8_t>>(result);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "PNGBYTES");
  // The same through FetchMedia, as a content part's URL reaches it.
  MediaAccess access;
  access.remote = policy_;
  auto via_media = FetchMedia(server_.Url("127.0.0.1", "/cat.png"), access, "messages[0].content[0]");
  EXPECT_TRUE(std::holds_alternative<std::vector<uint8_t>>(via_media)) << ErrorOf(via_media);
}

TEST_F(RemoteFetchTest, RefusedWithoutTheFlagAndForOtherHosts) {
  server_.Start();
  RemoteMediaPolicy off;
  auto refused = FetchRemoteMedia(server_.Url("127.0.0.1", "/x"), off, 1000, "f");
  EXPECT_NE(ErrorOf(refused).find("--allowed-media-domains"), std::string::npos) << ErrorOf(refused);
  EXPECT_NE(ErrorOf(Fetch(server_.Url("127.0.0.2", "/x"))).find("not in --allowed-media-domains"), std::string::npos);
  // curl's own parse decides the host: user info before '@' is not the host.
  EXPECT_NE(ErrorOf(Fetch("http://127.0.0.1@127.0.0.2:" + std::to_string(server_.port()) + "/x"))
                .find("'127.0.0.2' is not in"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Fetch("ftp://127.0.0.1/x")).find("not a valid http"), std::string::npos);
  EXPECT_EQ(server_.requests(), 0);  // none of them sent a request
}

// What a hostile client puts in a URL: header injection, spaces, a huge URL are refused before
// any connection; bytes that are not UTF-8 go to the allowed host percent-encoded (a path is any
// bytes). Every message quotes the URL cut and escaped.
TEST_F(RemoteFetchTest, HostileUrls) {
  server_.Start();
  const std::string base = server_.Url("127.0.0.1", "/x");
  for (const std::string& url : {base + "\r\nHost: evil\r\n", base + " y", base + "\t",
                                 base + std::string(100000, 'a') + "\n"}) {
    const std::string error = ErrorOf(Fetch(url));
    EXPECT_NE(error.find("is not a valid http:// or https:// URL"), std::string::npos) << error;
    EXPECT_LT(error.size(), 1000u) << "the URL is quoted cut";
    EXPECT_EQ(error.find('\r'), std::string::npos);
  }
  EXPECT_EQ(server_.requests(), 0);
  const std::string error = ErrorOf(Fetch(base + "\xff\xfe"));
  EXPECT_NE(error.find("answered HTTP 404"), std::string::npos) << error;
  EXPECT_EQ(error.find('\xff'), std::string::npos) << "escaped in the message";
  EXPECT_EQ(server_.requests(), 1);
}

TEST_F(RemoteFetchTest, ANameThatLeadsToLoopbackIsRefusedBeforeTheRequest) {
  server_.Route("/cat.png", FakeMediaServer::Answer("200 OK", "", "PNGBYTES"));
  server_.Start();
  policy_.allowed_domains = {"localhost"};
  const std::string error = ErrorOf(Fetch(server_.Url("localhost", "/cat.png")));
  EXPECT_NE(error.find("not a public address"), std::string::npos) << error;
  EXPECT_EQ(server_.requests(), 0);  // connected, checked, nothing sent
}

TEST_F(RemoteFetchTest, RedirectsAreFollowedOnlyToAllowedHostsAndBounded) {
  const std::string base = "http://127.0.0.1:" + std::to_string(server_.port());
  server_.Route("/moved", FakeMediaServer::Answer("302 Found", "Location: /cat.png\r\n", ""));
  server_.Route("/cat.png", FakeMediaServer::Answer("200 OK", "", "PNGBYTES"));
  server_.Route("/away", FakeMediaServer::Answer("301 Moved", "Location: http://169.254.169.254/latest\r\n", ""));
  server_.Route("/to-name", FakeMediaServer::Answer("302 Found", "Location: " + base.substr(0, 7) + "localhost:" +
                                                                        std::to_string(server_.port()) + "/cat.png\r\n",
                                                    ""));
  server_.Route("/loop", FakeMediaServer::Answer("302 Found", "Location: /loop\r\n", ""));
  server_.Start();
  auto moved = Fetch(base + "/moved");
  ASSERT_TRUE(std::holds_alternative<std::vector<uint8_t>>(moved)) << ErrorOf(moved);
  EXPECT_NE(ErrorOf(Fetch(base + "/away")).find("'169.254.169.254' is not in --allowed-media-domains (reached by a redirect)"),
            std::string::npos);
  policy_.allowed_domains = {"127.0.0.1", "localhost"};
  EXPECT_NE(ErrorOf(Fetch(base + "/to-name")).find("not a public address"), std::string::npos);
  const int before = server_.requests();
  EXPECT_NE(ErrorOf(Fetch(base + "/loop")).find("redirected more than 3 times"), std::string::npos);
  EXPECT_EQ(server_.requests() - before, kMaxRedirects + 1);
}

TEST_F(RemoteFetchTest, SizesAreRefusedFromTheHeaderAndFromTheBytes) {
  server_.Route("/big", FakeMediaServer::Answer("200 OK", "", std::string(5000, 'x')));
  // No Content-Length: the body grows past the limit as it arrives.
  server_.Route("/endless", [](int fd) {
    FakeMediaServer::Send(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
    for (int i = 0; i < 64; ++i) FakeMediaServer::Send(fd, std::string(256, 'y'));
  });
  server_.Route("/empty", FakeMediaServer::Answer("200 OK", "", ""));
  server_.Route("/gone", FakeMediaServer::Answer("410 Gone", "", "gone"));
  server_.Start();
  EXPECT_NE(ErrorOf(Fetch(server_.Url("127.0.0.1", "/big"))).find("--max-media-bytes"), std::string::npos);
  EXPECT_NE(ErrorOf(Fetch(server_.Url("127.0.0.1", "/endless"))).find("--max-media-bytes"), std::string::npos);
  EXPECT_NE(ErrorOf(Fetch(server_.Url("127.0.0.1", "/empty"))).find("no data"), std::string::npos);
  EXPECT_NE(ErrorOf(Fetch(server_.Url("127.0.0.1", "/gone"))).find("answered HTTP 410"), std::string::npos);
  EXPECT_NE(ErrorOf(Fetch(server_.Url("127.0.0.1", "/nothing"))).find("answered HTTP 404"), std::string::npos);
}

TEST_F(RemoteFetchTest, ASlowServerRunsOutOfTime) {
  // Shared with the server's thread, which may still be sending when the test body returns (the
  // fixture stops the server after it): a local captured by reference would be read after its end.
  const auto done = std::make_shared<std::atomic<bool>>(false);
  server_.Route("/slow", [done](int fd) {
    FakeMediaServer::Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
    for (int i = 0; i < 100 && !*done; ++i) {  // a byte every 50 ms: 5 s for the body
      FakeMediaServer::Send(fd, "z");
      std::this_thread::sleep_for(50ms);
    }
  });
  server_.Start();
  policy_.timeout_seconds = 0.5;
  const auto start = std::chrono::steady_clock::now();
  const std::string error = ErrorOf(Fetch(server_.Url("127.0.0.1", "/slow")));
  *done = true;
  EXPECT_NE(error.find("did not arrive within 0.5 s (--media-fetch-timeout)"), std::string::npos) << error;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
}

TEST_F(RemoteFetchTest, NothingListeningIsAClearError) {
  // A socket bound to a port but not listening: connections to it are refused.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string error = ErrorOf(Fetch("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/x"));
  ::close(fd);
  EXPECT_NE(error.find("fetching"), std::string::npos) << error;
  EXPECT_NE(error.find("onnect"), std::string::npos) << error;  // curl: "Couldn't connect to server"
}

}  // namespace
}  // namespace ember::server
