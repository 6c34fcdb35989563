// One request's engine events turned into text for the client: incremental detokenization that
// never splits a UTF-8 character, bytes that are not UTF-8 replaced by U+FFFD (what the client
// would see anyway), stop strings matched on that text (held back while they may still match, cut
// when they do), the stop token's own text left out, and logprobs with their token strings.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/request_output.h"
#include "engine/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace ember::server {

struct LogprobEntry {
  int32_t token_id = 0;
  std::string token;  // the token's text
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // alternatives, best first
};

struct TextDelta {
  std::string text;
  std::vector<LogprobEntry> logprobs;
  std::vector<int32_t> token_ids;
  bool finished = false;
  std::string finish_reason;  // "stop", "length", "abort", "error" when finished
  // vLLM's stop_reason: the stop string or stop token that ended it (null for EOS or length).
  std::optional<std::string> stop_string;
  std::optional<int32_t> stop_token;
  std::string error;
  // True when a stop string ended the request here: the caller must abort the engine request.
  bool stop_string_hit = false;
};

class TextStream {
 public:
  TextStream(const Tokenizer* tokenizer, const SamplingParams& sampling, bool skip_special_tokens);

  // Consumes one event of the request (none may follow a finished delta).
  TextDelta Consume(const RequestOutput& event);
  bool finished() const { return finished_; }
  const std::string& text() const { return text_; }  // everything emitted so far

 private:
  LogprobEntry MakeLogprobs(int32_t id, const TokenLogprobs& lp) const;

  const Tokenizer* tokenizer_;
  IncrementalDetokenizer detokenizer_;
  std::optional<StopStringMatcher> stops_;
  std::vector<std::string> stop_list_;
  bool finished_ = false;
  std::string text_;
};

}  // namespace ember::server
