#include "engine/request_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace ember {
namespace {

std::unique_ptr<Request> Make(RequestIndex index, int32_t priority, uint64_t arrival) {
  RequestInput input;
  input.prompt_token_ids = {1, 2, 3};
  input.priority = priority;
  return std::make_unique<Request>(index, std::move(input), arrival, 0);
}

std::vector<RequestIndex> Drain(RequestQueue& q) {
  std::vector<RequestIndex> order;
  while (Request* r = q.Pop()) order.push_back(r->index());
  return order;
}

TEST(RequestQueue, FcfsServesByArrivalIgnoringPriority) {
  auto a = Make(0, 5, 0), b = Make(1, 0, 1), c = Make(2, 9, 2);
  RequestQueue q(SchedulingPolicy::kFcfs);
  q.Add(c.get());
  q.Add(a.get());
  q.Add(b.get());
  EXPECT_EQ(q.Peek(), a.get());
  EXPECT_EQ(Drain(q), (std::vector<RequestIndex>{0, 1, 2}));
  EXPECT_EQ(q.Pop(), nullptr);
}

TEST(RequestQueue, PriorityServesLowerValueFirstThenArrival) {
  auto a = Make(0, 2, 0), b = Make(1, 1, 1), c = Make(2, 2, 2), d = Make(3, -1, 3);
  RequestQueue q(SchedulingPolicy::kPriority);
  for (Request* r : {a.get(), b.get(), c.get(), d.get()}) q.Add(r);
  EXPECT_EQ(Drain(q), (std::vector<RequestIndex>{3, 1, 0, 2}));
}

TEST(RequestQueue, PreemptedRequestReturnsAheadOfLaterArrivals) {
  auto old = Make(0, 0, 0), later = Make(1, 0, 5);
  RequestQueue q(SchedulingPolicy::kFcfs);
  q.Add(later.get());
  q.Add(old.get());  // re-queued after preemption with its original arrival
  EXPECT_EQ(q.Peek(), old.get());
}

TEST(RequestQueue, RemoveTakesOutOnlyQueuedRequests) {
  auto a = Make(0, 0, 0), b = Make(1, 0, 1);
  RequestQueue q(SchedulingPolicy::kFcfs);
  q.Add(a.get());
  EXPECT_FALSE(q.Remove(b.get()));
  EXPECT_TRUE(q.Remove(a.get()));
  EXPECT_TRUE(q.empty());
}

TEST(RequestQueue, ParsesPolicyNames) {
  EXPECT_EQ(*ParseSchedulingPolicy("fcfs"), SchedulingPolicy::kFcfs);
  EXPECT_EQ(*ParseSchedulingPolicy("priority"), SchedulingPolicy::kPriority);
  auto bad = ParseSchedulingPolicy("lifo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fcfs or priority"), std::string::npos);
}

}  // namespace
}  // namespace ember
