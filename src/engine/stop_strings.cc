#include "engine/stop_strings.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace ember {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop_str_in_output)
    : stops_(std::move(stops)), include_stop_str_in_output_(include_stop_str_in_output) {
  for (const std::string& s : stops_) {
    EMBER_CHECK(!s.empty(), "empty stop string (SamplingParams::Validate rejects them)");
    max_stop_bytes_ = std::max(max_stop_bytes_, s.size());
  }
}

StopStringMatcher::Output StopStringMatcher::Feed(std::string_view piece) {
  EMBER_CHECK(!stopped_, "Feed after a stop string matched");
  if (stops_.empty()) return {std::string(piece), std::nullopt};

  std::string text = std::move(held_);
  held_.clear();
  const size_t old_size = text.size();
  text.append(piece);

  // The held tail contains no complete stop string, so a match must end inside the new piece:
  // each search starts where such a match could begin.
  size_t best_end = std::string::npos;
  size_t best_start = 0;
  int32_t best_index = -1;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const std::string& stop = stops_[i];
    const size_t from = old_size >= stop.size() - 1 ? old_size - (stop.size() - 1) : 0;
    const size_t pos = text.find(stop, from);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stop.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_end = end;
      best_start = pos;
      best_index = static_cast<int32_t>(i);
    }
  }
  if (best_index >= 0) {
    stopped_ = true;
    text.resize(include_stop_str_in_output_ ? best_end : best_start);
    return {std::move(text), best_index};
  }

  const size_t hold = PartialMatchLength(text);
  held_.assign(text, text.size() - hold, hold);
  text.resize(text.size() - hold);
  return {std::move(text), std::nullopt};
}

std::string StopStringMatcher::Flush() {
  if (stopped_) return {};
  return std::exchange(held_, std::string());
}

size_t StopStringMatcher::PartialMatchLength(std::string_view text) const {
  const size_t longest = std::min(text.size(), max_stop_bytes_ - 1);
  for (size_t len = longest; len > 0; --len) {
    const std::string_view tail = text.substr(text.size() - len);
    for (const std::string& stop : stops_) {
      if (stop.size() > len && std::string_view(stop).starts_with(tail)) return len;
    }
  }
  return 0;
}

}  // namespace ember
