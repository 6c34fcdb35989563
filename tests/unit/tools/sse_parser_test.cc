#include "tools/ember/bench/sse_parser.h"

#include <gtest/gtest.h>

#include "tools/ember/bench/serve_client.h"

namespace ember::tools::bench {
namespace {

std::vector<std::string> FeedInPieces(const std::string& stream, size_t piece) {
  SseParser parser;
  std::vector<std::string> events;
  for (size_t at = 0; at < stream.size(); at += piece) {
    for (std::string& e : parser.Feed(std::string_view(stream).substr(at, piece))) events.push_back(std::move(e));
  }
  for (std::string& e : parser.Finish()) events.push_back(std::move(e));
  return events;
}

TEST(SseParser, SameEventsWhateverTheChunking) {
  const std::string stream =
      ": keep-alive\n\n"
      "data: {\"a\":1}\n\n"
      "event: message\r\nid: 7\r\ndata:{\"b\":2}\r\n\r\n"
      ": ping\n"
      "data: line one\ndata: line two\n\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "line one\nline two", "[DONE]"};
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    EXPECT_EQ(FeedInPieces(stream, piece), expected) << "pieces of " << piece;
  }
}

TEST(SseParser, CarriageReturnLineEndingsAndUnterminatedLastEvent) {
  EXPECT_EQ(FeedInPieces("data: x\r\rdata: y\r\r", 1), (std::vector<std::string>{"x", "y"}));
  // A stream cut before its blank line still yields its last event at Finish().
  EXPECT_EQ(FeedInPieces("data: a\n\ndata: b", 3), (std::vector<std::string>{"a", "b"}));
  // Comments alone are no event.
  EXPECT_TRUE(FeedInPieces(": one\n: two\n\n", 2).empty());
  // An empty data line is an empty event, as the spec says.
  EXPECT_EQ(FeedInPieces("data\n\n", 1), (std::vector<std::string>{""}));
}

TEST(StreamEvent, CountsTextChunksAndReadsUsage) {
  RequestResult r;
  EXPECT_TRUE(ApplyStreamEvent(R"({"choices":[{"index":0,"text":"Hello"}]})", 0.5, &r));
  EXPECT_TRUE(ApplyStreamEvent(R"({"choices":[{"index":0,"text":""}]})", 0.6, &r));  // no text: not a chunk
  EXPECT_TRUE(ApplyStreamEvent(R"({"choices":[{"index":0,"text":" world","finish_reason":"length"}]})", 0.7, &r));
  EXPECT_TRUE(ApplyStreamEvent(R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}})", 0.8, &r));
  EXPECT_TRUE(ApplyStreamEvent("[DONE]", 0.9, &r));
  EXPECT_EQ(r.chunks, 2);
  EXPECT_DOUBLE_EQ(r.ttft, 0.5);
  EXPECT_EQ(r.chunk_times, (std::vector<double>{0.5, 0.7}));
  EXPECT_EQ(r.usage_prompt_tokens, 5);
  EXPECT_EQ(r.usage_completion_tokens, 3);
  EXPECT_EQ(r.OutputTokens(), 3);
}

TEST(StreamEvent, RejectsErrorsAndGarbage) {
  RequestResult r;
  EXPECT_FALSE(ApplyStreamEvent(R"({"error":{"message":"overloaded"}})", 0.1, &r));
  EXPECT_NE(r.error.find("overloaded"), std::string::npos);
  RequestResult g;
  EXPECT_FALSE(ApplyStreamEvent("not json", 0.1, &g));
  EXPECT_NE(g.error.find("not JSON"), std::string::npos);
}

TEST(ServeClient, ParsesBaseUrls) {
  auto t = ParseBaseUrl("http://127.0.0.1:8000", "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->origin, "http://127.0.0.1:8000");
  EXPECT_EQ(t->path_prefix, "");
  t = ParseBaseUrl("http://host:1/v1/", "k");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->origin, "http://host:1");
  EXPECT_EQ(t->path_prefix, "");
  EXPECT_EQ(t->api_key, "k");
  t = ParseBaseUrl("https://host/proxy/", "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->path_prefix, "/proxy");
  for (const char* bad : {"127.0.0.1:8000", "ftp://host", "http://"}) {
    EXPECT_FALSE(ParseBaseUrl(bad, "").ok()) << bad;
  }
}

}  // namespace
}  // namespace ember::tools::bench
