#include "server/access.h"

#include <gtest/gtest.h>

namespace ember::server {
namespace {

TEST(AccessTest, LoopbackHosts) {
  for (const char* host : {"localhost", "LOCALHOST:8000", "127.0.0.1", "127.0.0.1:8000", "127.1.2.3:1", "[::1]:8000",
                           "::1", "app.localhost:3000"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"evil.com", "evil.com:8000", "127.0.0.1.evil.com", "localhost.evil.com", "128.0.0.1",
                           "127.0.0.256", "127.0.0", "10.0.0.1:8000", "[::2]", "0.0.0.0", "", "localhost."}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

// A page that rebinds its DNS name to 127.0.0.1 still sends its own name as Host.
TEST(AccessTest, HostCheckStopsDnsRebindingOnLoopbackOnly) {
  EXPECT_FALSE(CheckHost("127.0.0.1:8000", true));
  EXPECT_FALSE(CheckHost("", true));  // HTTP/1.0 without Host: no browser sends that
  const auto e = CheckHost("attacker.example:8000", true);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 403);
  EXPECT_NE(e->message.find("attacker.example"), std::string::npos);
  EXPECT_FALSE(CheckHost("attacker.example:8000", false));  // --host 0.0.0.0: any name may reach it
}

TEST(AccessTest, OriginsMustBeAllowed) {
  EXPECT_FALSE(CheckOrigin("", {}));  // curl, the openai SDK
  const auto e = CheckOrigin("https://evil.example", {});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 403);
  EXPECT_NE(e->message.find("--allowed-origins https://evil.example"), std::string::npos) << e->message;
  EXPECT_TRUE(CheckOrigin("null", {"http://localhost:3000"}));
  EXPECT_FALSE(CheckOrigin("HTTP://LocalHost:3000", {"http://localhost:3000"}));
  EXPECT_TRUE(CheckOrigin("http://localhost:3001", {"http://localhost:3000"}));
  EXPECT_FALSE(CheckOrigin("https://anything", {"*"}));
}

// The types a browser may POST cross-origin without a preflight are refused; JSON and no type pass.
TEST(AccessTest, PostsMustBeJson) {
  for (const char* type : {"", "application/json", "application/json; charset=utf-8", "Application/JSON",
                           "application/merge-patch+json"}) {
    EXPECT_FALSE(CheckContentType("POST", type)) << type;
  }
  for (const char* type : {"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x", "application/jsonp", "application/+json"}) {
    const auto e = CheckContentType("POST", type);
    ASSERT_TRUE(e) << type;
    EXPECT_EQ(e->http_status, 415);
  }
  EXPECT_FALSE(CheckContentType("GET", "text/plain"));
}

TEST(AccessTest, ApiKey) {
  EXPECT_TRUE(ApiKeyMatches("Bearer sekrit", "sekrit"));
  for (const char* header : {"", "Bearer ", "Bearer sekri", "Bearer sekrit2", "Bearer Sekrit", "bearer sekrit",
                             "sekrit", "Basic sekrit", "Bearer  sekrit"}) {
    EXPECT_FALSE(ApiKeyMatches(header, "sekrit")) << header;
  }
}

}  // namespace
}  // namespace ember::server
