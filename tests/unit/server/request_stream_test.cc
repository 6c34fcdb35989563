// RequestStream's listener: how an HTTP connection learns of a request's events without a thread
// waiting on it.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "server/async_engine.h"

namespace ember::server {
namespace {

TEST(RequestStreamTest, ListenerRunsAfterEveryPushAndCanBeCleared) {
  RequestStream stream;
  std::atomic<int> calls{0};
  RequestOutput out;
  stream.SetListener([&] {
    // The event is there when the listener runs (it is called after the push, outside the lock).
    EXPECT_TRUE(stream.Pop(&out, std::chrono::milliseconds(0)));
    ++calls;
  });
  std::thread engine([&] {
    for (int i = 0; i < 3; ++i) {
      RequestOutput o;
      o.req = static_cast<RequestIndex>(i);
      stream.Push(std::move(o));
    }
  });
  engine.join();
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(out.req, 2u);
  stream.SetListener({});
  stream.Push(RequestOutput{});
  EXPECT_EQ(calls.load(), 3);
  EXPECT_TRUE(stream.Pop(&out, std::chrono::milliseconds(0)));
  EXPECT_FALSE(stream.Pop(&out, std::chrono::milliseconds(0)));  // zero timeout: never waits
}

}  // namespace
}  // namespace ember::server
