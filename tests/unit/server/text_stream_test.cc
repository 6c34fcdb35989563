// TextStream on SmolLM2's real vocabulary (the committed extract of its GGUF): a stop string is
// matched on the text the client receives. Bytes that are not UTF-8 reach the client as U+FFFD
// (nlohmann's JSON writer replaces them), so a stop string holding U+FFFD must fire on them, the
// same whether the tokens come one event at a time (streaming) or all in one (non-streaming).
#include "server/text_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "../tokenizer/tokenizer_fixtures.h"

namespace ember::server {
namespace {

const Tokenizer& SmolLm2() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::Create(tokenizer_testing::ReadVocab("smollm2_vocab.bin.gz"));
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(t).value().release() : nullptr;
  }();
  return *tok;
}

// The id of a vocabulary text (byte-level: "Ģ" is the lone byte 0x80, "â" the byte 0xE2).
int32_t Id(const std::string& text) {
  const auto id = SmolLm2().TokenId(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(0);
}

struct Received {
  std::string text;  // as the client receives it
  std::string finish_reason;
  std::optional<std::string> stop_string;
};

// Feeds `ids` as one event (streaming = false) or one event per token; the last event finishes the
// request by length, as if max_tokens ran out.
Received Feed(const std::vector<int32_t>& ids, const std::vector<std::string>& stops, bool streaming) {
  SamplingParams sampling;
  sampling.stop = stops;
  TextStream stream(&SmolLm2(), sampling, /*skip_special_tokens=*/true);
  Received run;
  auto consume = [&](std::vector<int32_t> part, bool last) {
    RequestOutput event;
    event.new_token_ids = std::move(part);
    event.finished = last;
    if (last) event.finish_reason = FinishReason::kLength;
    const TextDelta d = stream.Consume(event);
    // The text goes out in JSON: what the client parses is what it receives.
    const std::string wire = nlohmann::json(d.text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    run.text += nlohmann::json::parse(wire).get<std::string>();
    if (d.finished) {
      run.finish_reason = d.finish_reason;
      run.stop_string = d.stop_string;
    }
  };
  if (!streaming) {
    consume(ids, true);
  } else {
    for (size_t i = 0; i < ids.size() && !stream.finished(); ++i) consume({ids[i]}, i + 1 == ids.size());
  }
  return run;
}

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(TextStreamTest, StopStringsMatchTheTextTheClientReceives) {
  // "Hello" 0x80 "world" (a stray continuation byte): the client receives "Hello\uFFFDworld".
  const std::vector<int32_t> lone = {Id("Hello"), Id("\xC4\xA2"), Id("world")};
  // "Hi" 0xE2 " there": a character cut short, then a space; the client receives "Hi\uFFFD there".
  const std::vector<int32_t> cut = {Id("Hi"), Id("\xC3\xA2"), Id("\xC4\xA0there")};
  for (bool streaming : {false, true}) {
    SCOPED_TRACE(streaming ? "streaming" : "not streaming");
    const Received plain = Feed(lone, {}, streaming);
    EXPECT_EQ(plain.text, "Hello" + kReplacement + "world");
    EXPECT_EQ(plain.finish_reason, "length");

    const Received stopped = Feed(lone, {kReplacement + "wor"}, streaming);
    EXPECT_EQ(stopped.text, "Hello");
    EXPECT_EQ(stopped.finish_reason, "stop");
    EXPECT_EQ(stopped.stop_string, kReplacement + "wor");

    const Received replacement_only = Feed(cut, {kReplacement}, streaming);
    EXPECT_EQ(replacement_only.text, "Hi");
    EXPECT_EQ(replacement_only.finish_reason, "stop");

    // Text around the replacement is matched as usual, and a stop that is not there never fires.
    EXPECT_EQ(Feed(cut, {" there"}, streaming).text, "Hi" + kReplacement);
    const Received missed = Feed(cut, {"\xE2\x82\xAC"}, streaming);
    EXPECT_EQ(missed.text, "Hi" + kReplacement + " there");
    EXPECT_EQ(missed.finish_reason, "length");
  }
}

}  // namespace
}  // namespace ember::server
