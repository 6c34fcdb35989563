// Stop strings on streamed text. The engine sees text only as pieces that the incremental
// detokenizer produces, one or a few characters at a time, and a stop string can straddle any
// number of pieces. StopStringMatcher holds back the shortest tail that could still grow into a
// stop string, so that text already sent to the client never has to be taken back.
//
// Which stop wins: the one that is complete earliest in the text (the smallest end offset); among
// stops ending at the same offset, the longest. This is the only rule a stream can apply without
// looking ahead, and it makes the result independent of how the text is split into pieces.
// Matching is byte-wise; for valid UTF-8 text and stop strings a match or a held-back tail always
// starts on a character boundary, so emitted text never splits a character.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

class StopStringMatcher {
 public:
  struct Output {
    std::string text;                  // safe to send to the client now
    std::optional<int32_t> stop_index; // set on a match: index into the stop list; the stream ends
  };

  // `stops` must be non-empty strings (SamplingParams::Validate checks that).
  StopStringMatcher(std::vector<std::string> stops, bool include_stop_str_in_output);

  // Appends one detokenized piece. After a match the caller must stop feeding.
  Output Feed(std::string_view piece);
  // End of generation without a match: the held-back tail, which is then final text.
  std::string Flush();

  bool stopped() const { return stopped_; }
  // Bytes currently held back (less than the longest stop string).
  size_t held_bytes() const { return held_.size(); }

 private:
  // Length of the longest tail of `text` that is a proper prefix of some stop string.
  size_t PartialMatchLength(std::string_view text) const;

  std::vector<std::string> stops_;
  bool include_stop_str_in_output_;
  size_t max_stop_bytes_ = 0;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ember
