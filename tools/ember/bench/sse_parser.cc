#include "tools/ember/bench/sse_parser.h"

namespace ember::tools::bench {

std::vector<std::string> SseParser::Feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (const char c : bytes) {
    if (last_was_cr_) {
      last_was_cr_ = false;
      if (c == '\n') continue;  // the second half of a "\r\n"
    }
    if (c == '\r' || c == '\n') {
      last_was_cr_ = c == '\r';
      Line(pending_, &events);
      pending_.clear();
    } else {
      pending_ += c;
    }
  }
  return events;
}

std::vector<std::string> SseParser::Finish() {
  std::vector<std::string> events;
  if (!pending_.empty()) Line(pending_, &events);
  pending_.clear();
  Dispatch(&events);
  return events;
}

void SseParser::Line(std::string_view line, std::vector<std::string>* events) {
  if (line.empty()) {
    Dispatch(events);
    return;
  }
  if (line.front() == ':') return;  // comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  if (field != "data") return;
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_ += value;
  has_data_ = true;
}

void SseParser::Dispatch(std::vector<std::string>* events) {
  if (has_data_) events->push_back(std::move(data_));
  data_.clear();
  has_data_ = false;
}

}  // namespace ember::tools::bench
