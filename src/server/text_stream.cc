#include "server/text_stream.h"

#include "tokenizer/unicode.h"

namespace ember::server {

TextStream::TextStream(const Tokenizer* tokenizer, const SamplingParams& sampling, bool skip_special_tokens)
    : tokenizer_(tokenizer), detokenizer_(tokenizer, skip_special_tokens), stop_list_(sampling.stop) {
  if (!sampling.stop.empty()) stops_.emplace(sampling.stop, sampling.include_stop_str_in_output);
}

LogprobEntry TextStream::MakeLogprobs(int32_t id, const TokenLogprobs& lp) const {
  LogprobEntry e;
  e.token_id = id;
  e.token = tokenizer_->TokenPiece(id, /*skip_special=*/false);
  e.logprob = lp.logprob;
  for (size_t i = 0; i < lp.top_ids.size() && i < lp.top_logprobs.size(); ++i) {
    e.top.emplace_back(tokenizer_->TokenPiece(lp.top_ids[i], /*skip_special=*/false), lp.top_logprobs[i]);
  }
  return e;
}

TextDelta TextStream::Consume(const RequestOutput& event) {
  TextDelta delta;
  if (finished_) return delta;
  const size_t n = event.new_token_ids.size();
  // The token that ended the request by being a stop token is counted but not shown.
  const bool drop_last = event.finished && event.finish_reason == FinishReason::kStop && event.stop_token && n > 0 &&
                         event.new_token_ids.back() == *event.stop_token;
  std::string pieces;
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = event.new_token_ids[i];
    delta.token_ids.push_back(id);
    if (i < event.new_logprobs.size()) delta.logprobs.push_back(MakeLogprobs(id, event.new_logprobs[i]));
    if (drop_last && i + 1 == n) break;
    pieces += detokenizer_.Add(id);
  }
  if (event.finished) pieces += detokenizer_.Flush();
  // Bytes that are not UTF-8 reach the client as U+FFFD (the JSON writer replaces them), so they
  // become U+FFFD here, before stop strings are matched: a stop string is matched on the text the
  // client receives, and one containing U+FFFD can fire. The detokenizer never splits a character
  // it may still complete, so replacing piece by piece is replacing in the whole text.
  pieces = unicode::ToValidUtf8(pieces);

  if (stops_) {
    StopStringMatcher::Output out = stops_->Feed(pieces);
    delta.text = std::move(out.text);
    if (out.stop_index) {
      delta.finished = true;
      delta.finish_reason = "stop";
      delta.stop_string = stop_list_[*out.stop_index];
      delta.stop_string_hit = !event.finished;
    } else if (event.finished) {
      delta.text += stops_->Flush();
    }
  } else {
    delta.text = std::move(pieces);
  }
  if (event.finished && !delta.finished) {
    delta.finished = true;
    delta.finish_reason = std::string(FinishReasonName(event.finish_reason));
    delta.stop_token = event.finish_reason == FinishReason::kStop ? event.stop_token : std::nullopt;
    delta.error = event.error;
  }
  finished_ = delta.finished;
  text_ += delta.text;
  return delta;
}

}  // namespace ember::server
