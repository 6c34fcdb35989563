#include "engine/request_queue.h"

#include <string>
#include <tuple>

#include "core/check.h"

namespace ember {

std::string_view SchedulingPolicyName(SchedulingPolicy policy) {
  return policy == SchedulingPolicy::kFcfs ? "fcfs" : "priority";
}

Expected<SchedulingPolicy> ParseSchedulingPolicy(std::string_view name) {
  if (name == "fcfs") return SchedulingPolicy::kFcfs;
  if (name == "priority") return SchedulingPolicy::kPriority;
  return InvalidArgument("unknown scheduling policy '" + std::string(name) + "': use fcfs or priority");
}

bool RanksBefore(SchedulingPolicy policy, const Request& a, const Request& b) {
  // arrival_seq is unique per scheduler, so the order is total and the set never merges requests.
  if (policy == SchedulingPolicy::kPriority) {
    return std::tuple(a.priority(), a.arrival_seq()) < std::tuple(b.priority(), b.arrival_seq());
  }
  return a.arrival_seq() < b.arrival_seq();
}

void RequestQueue::Add(Request* request) {
  const bool inserted = order_.insert(request).second;
  EMBER_CHECK(inserted, "request {} queued twice", request->index());
}

Request* RequestQueue::Peek() const { return order_.empty() ? nullptr : *order_.begin(); }

Request* RequestQueue::Pop() {
  if (order_.empty()) return nullptr;
  Request* front = *order_.begin();
  order_.erase(order_.begin());
  return front;
}

bool RequestQueue::Remove(Request* request) { return order_.erase(request) > 0; }

}  // namespace ember
