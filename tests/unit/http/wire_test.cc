#include "http/wire.h"

#include <gtest/gtest.h>

namespace ember::http {
namespace {

TEST(WireTest, WholeResponseHasItsLengthAndConnectionHeader) {
  HttpResponse res;
  res.status = 404;
  res.set_content("{\"a\":1}", "application/json");
  res.set_header("Allow", "GET");
  const std::string keep = SerializeResponse(res, 11, true);
  EXPECT_EQ(keep.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << keep;
  EXPECT_NE(keep.find("Content-Length: 7\r\n"), std::string::npos) << keep;
  EXPECT_NE(keep.find("Content-Type: application/json\r\n"), std::string::npos) << keep;
  EXPECT_NE(keep.find("Allow: GET\r\n"), std::string::npos) << keep;
  EXPECT_EQ(keep.find("Connection"), std::string::npos) << keep;  // HTTP/1.1 keeps alive by default
  EXPECT_EQ(keep.substr(keep.size() - 11), "\r\n\r\n{\"a\":1}");
  const std::string close = SerializeResponse(res, 11, false);
  EXPECT_NE(close.find("Connection: close\r\n"), std::string::npos) << close;
}

TEST(WireTest, StreamHeadIsChunkedOnHttp11Only) {
  HttpResponse res;
  res.content_type = "text/event-stream";
  const std::string head = SerializeStreamHead(res, 11, true, true);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  const std::string old = SerializeStreamHead(res, 10, false, false);
  EXPECT_EQ(old.find("chunked"), std::string::npos) << old;
  EXPECT_EQ(old.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << old;
}

TEST(WireTest, Chunks) {
  EXPECT_EQ(FrameChunk("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(FrameChunk(std::string(26, 'x')).substr(0, 4), "1a\r\n");
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

TEST(MessageTest, HeadersAreCaseInsensitiveAndReplaced) {
  HttpRequest req;
  req.headers = {{"Content-Type", "application/json"}, {"X-A", "1"}};
  EXPECT_EQ(req.header("content-type"), "application/json");
  EXPECT_EQ(req.header("x-b"), "");
  HttpResponse res;
  res.set_header("Vary", "Origin");
  res.set_header("vary", "Accept");
  ASSERT_EQ(res.headers.size(), 1u);
  EXPECT_EQ(res.header("VARY"), "Accept");
}

}  // namespace
}  // namespace ember::http
