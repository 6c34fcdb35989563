// Incremental parser for a text/event-stream body (Server-Sent Events, as OpenAI-compatible
// servers stream completions): bytes arrive in arbitrary pieces, events come out whole.
//
// An event is a run of lines ended by an empty line; its "data:" lines (one optional space after
// the colon is dropped) are joined with "\n". Lines starting with ':' are comments (keep-alives);
// other fields (event:, id:, retry:) are ignored. Lines may end in "\n", "\r\n" or "\r".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ember::tools::bench {

class SseParser {
 public:
  // Appends bytes; returns the data of every event completed by them, in order.
  std::vector<std::string> Feed(std::string_view bytes);
  // At end of stream: the data of a last event that was not followed by an empty line, if any.
  std::vector<std::string> Finish();

 private:
  void Line(std::string_view line, std::vector<std::string>* events);
  void Dispatch(std::vector<std::string>* events);

  std::string pending_;  // bytes of an unfinished line
  std::string data_;     // data of the event being read
  bool has_data_ = false;
  bool last_was_cr_ = false;  // a "\r" ended the previous piece: a following "\n" belongs to it
};

}  // namespace ember::tools::bench
