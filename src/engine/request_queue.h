// The waiting queue: which admitted request the scheduler considers next.
//
// Both policies are one ordering. kFcfs serves by arrival; kPriority by (priority, arrival), lower
// first (vLLM's priority semantics). A preempted request keeps its arrival, so it goes back ahead
// of everything that arrived after it: under FCFS that is vLLM's "prepend to waiting", and under
// priority it keeps its re-admission rank (the thrashing bug vLLM #41951 comes from losing it).
#pragma once

#include <cstddef>
#include <set>
#include <string_view>

#include "core/status.h"
#include "engine/request.h"

namespace ember {

enum class SchedulingPolicy : uint8_t { kFcfs, kPriority };

std::string_view SchedulingPolicyName(SchedulingPolicy policy);  // "fcfs", "priority"
Expected<SchedulingPolicy> ParseSchedulingPolicy(std::string_view name);

// True when `a` is served before `b` under `policy`. The scheduler preempts the request that
// ranks last among the running ones by the same order.
bool RanksBefore(SchedulingPolicy policy, const Request& a, const Request& b);

class RequestQueue {
 public:
  explicit RequestQueue(SchedulingPolicy policy) : order_(Order{policy}) {}

  void Add(Request* request);
  Request* Peek() const;  // null when empty
  Request* Pop();         // null when empty
  bool Remove(Request* request);  // false when it is not queued

  size_t size() const { return order_.size(); }
  bool empty() const { return order_.empty(); }
  auto begin() const { return order_.begin(); }  // in serving order
  auto end() const { return order_.end(); }

 private:
  struct Order {
    SchedulingPolicy policy;
    bool operator()(const Request* a, const Request* b) const { return RanksBefore(policy, *a, *b); }
  };
  std::set<Request*, Order> order_;
};

}  // namespace ember
