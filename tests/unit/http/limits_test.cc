#include "http/limits.h"

#include <gtest/gtest.h>

namespace ember::http {
namespace {

TEST(LimitsTest, HeaderCountAndTargetLength) {
  HttpLimits limits;
  limits.max_header_count = 3;
  limits.max_target_bytes = 10;
  EXPECT_FALSE(CheckRequestHead(limits, 3, 10, "", ""));
  const auto count = CheckRequestHead(limits, 4, 1, "", "");
  ASSERT_TRUE(count);
  EXPECT_EQ(count->status, 431);
  EXPECT_NE(count->message.find("at most 3"), std::string::npos);
  const auto target = CheckRequestHead(limits, 1, 11, "", "");
  ASSERT_TRUE(target);
  EXPECT_EQ(target->status, 414);
}

// A body ember would have to inflate could grow past the limit after it was checked: refused.
TEST(LimitsTest, CompressedBodiesAreRefused) {
  const HttpLimits limits;
  for (const char* coding : {"gzip", "deflate", "br", "identity, gzip", "GZIP", "x-gzip"}) {
    const auto refusal = CheckRequestHead(limits, 1, 1, coding, "");
    ASSERT_TRUE(refusal) << coding;
    EXPECT_EQ(refusal->status, 415) << coding;
  }
  EXPECT_FALSE(CheckRequestHead(limits, 1, 1, "identity", ""));
  EXPECT_FALSE(CheckRequestHead(limits, 1, 1, " Identity ", ""));
}

TEST(LimitsTest, OnlyChunkedTransferCoding) {
  const HttpLimits limits;
  EXPECT_FALSE(CheckRequestHead(limits, 1, 1, "", "chunked"));
  EXPECT_FALSE(CheckRequestHead(limits, 1, 1, "", "Chunked"));
  for (const char* coding : {"gzip, chunked", "compress", "deflate,chunked"}) {
    const auto refusal = CheckRequestHead(limits, 1, 1, "", coding);
    ASSERT_TRUE(refusal) << coding;
    EXPECT_EQ(refusal->status, 501) << coding;
  }
}

TEST(LimitsTest, MessagesNameTheLimit) {
  HttpLimits limits;
  limits.max_body_bytes = 1234;
  limits.max_header_bytes = 99;
  EXPECT_NE(BodyTooLargeMessage(limits).find("1234"), std::string::npos);
  EXPECT_NE(HeaderTooLargeMessage(limits).find("99"), std::string::npos);
}

}  // namespace
}  // namespace ember::http
