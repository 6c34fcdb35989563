#include "router/routes.h"

#include <gtest/gtest.h>

#include "router/errors.h"

namespace ember::router {
namespace {

TEST(RoutesTest, ApiKey) {
  EXPECT_TRUE(ApiKeyMatches("Bearer sk-1", "sk-1"));
  EXPECT_FALSE(ApiKeyMatches("Bearer sk-2", "sk-1"));
  EXPECT_FALSE(ApiKeyMatches("bearer sk-1", "sk-1"));
  EXPECT_FALSE(ApiKeyMatches("Bearer sk-1x", "sk-1"));
  EXPECT_FALSE(ApiKeyMatches("", "sk-1"));
}

TEST(RoutesTest, BodyMustBeAJsonObjectOfBoundedDepth) {
  EXPECT_TRUE(ParseRequestBody(R"({"prompt": "[[[[{{"})").error.empty());
  EXPECT_EQ(ParseRequestBody("[1]").error, "the request body must be a JSON object");
  EXPECT_EQ(ParseRequestBody("{").error, "the request body is not valid JSON");
  EXPECT_EQ(ParseRequestBody("").error, "the request body is not valid JSON");
  EXPECT_FALSE(ParseRequestBody("{\"a\":" + std::string(200, '[') + std::string(200, ']') + "}").error.empty());
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1, {"b": "]]]\"[["}]})"), 3u);
}

TEST(RoutesTest, Access) {
  http::HttpRequest r;
  r.method = "POST";
  r.headers = {{"Host", "127.0.0.1:8000"}, {"Content-Type", "application/json"}};
  EXPECT_FALSE(CheckAccess(r, true));
  r.headers = {{"Host", "localhost:8000"}, {"Content-Type", "application/json; charset=utf-8"}};
  EXPECT_FALSE(CheckAccess(r, true));
  r.headers = {{"Host", "evil.example:8000"}};
  EXPECT_EQ(CheckAccess(r, true)->first, 403);
  EXPECT_FALSE(CheckAccess(r, false));  // listening elsewhere: any Host
  r.headers = {{"Host", "localhost"}, {"Content-Type", "text/plain"}};
  EXPECT_EQ(CheckAccess(r, true)->first, 415);
  r.headers = {{"Host", "localhost"}, {"Origin", "http://evil.example"}};
  EXPECT_EQ(CheckAccess(r, true)->first, 403);
}

TEST(RoutesTest, ErrorBodiesAreOpenAiShaped) {
  EXPECT_EQ(ErrorJson("x", "upstream_error"),
            R"({"error":{"code":null,"message":"x","param":null,"type":"upstream_error"}})");
  EXPECT_EQ(SseErrorEvents("boom").substr(0, 16), "data: {\"error\":{");
  EXPECT_TRUE(SseErrorEvents("boom").ends_with("\n\ndata: [DONE]\n\n"));
}

}  // namespace
}  // namespace ember::router
