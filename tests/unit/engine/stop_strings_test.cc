#include "engine/stop_strings.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

namespace ember {
namespace {

struct Streamed {
  std::vector<std::string> emitted;  // one entry per Feed, then the Flush (when no stop matched)
  std::optional<int32_t> stop_index;
  std::string Text() const {
    std::string all;
    for (const std::string& s : emitted) all += s;
    return all;
  }
};

Streamed FeedAll(const std::vector<std::string>& stops, bool include, const std::vector<std::string>& pieces) {
  StopStringMatcher matcher(stops, include);
  Streamed run;
  for (const std::string& piece : pieces) {
    StopStringMatcher::Output out = matcher.Feed(piece);
    run.emitted.push_back(out.text);
    if (out.stop_index) {
      run.stop_index = out.stop_index;
      EXPECT_TRUE(matcher.stopped());
      EXPECT_EQ(matcher.Flush(), "");
      return run;
    }
  }
  run.emitted.push_back(matcher.Flush());
  return run;
}

std::vector<std::string> Chars(const std::string& s) {
  std::vector<std::string> out;
  for (char c : s) out.emplace_back(1, c);
  return out;
}

TEST(StopStringMatcherTest, NoStopStringsPassesEverythingThrough) {
  const Streamed run = FeedAll({}, false, {"Hello", ", ", "world"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"Hello", ", ", "world", ""}));
  EXPECT_FALSE(run.stop_index);
}

TEST(StopStringMatcherTest, MatchSpanningPieces) {
  const Streamed run = FeedAll({"STOP"}, false, {"abc ST", "O", "P and more"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"abc ", "", ""}));
  EXPECT_EQ(run.stop_index, 0);
  EXPECT_EQ(FeedAll({"STOP"}, true, {"abc ST", "O", "P and more"}).Text(), "abc STOP");
}

TEST(StopStringMatcherTest, HeldBackTextIsReleasedWhenItCannotMatch) {
  StopStringMatcher matcher({"</end>"}, false);
  auto out = matcher.Feed("text </e");
  EXPECT_EQ(out.text, "text ");
  EXPECT_EQ(matcher.held_bytes(), 3u);
  out = matcher.Feed("x");  // "</ex" is no longer a prefix of "</end>"
  EXPECT_EQ(out.text, "</ex");
  EXPECT_EQ(matcher.held_bytes(), 0u);
  out = matcher.Feed("y </en");
  EXPECT_EQ(out.text, "y ");
  EXPECT_EQ(matcher.Flush(), "</en");  // end of generation: the tail is ordinary text
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopStringMatcherTest, EarliestCompletedStopWins) {
  // "lo w" is complete at offset 8, "world" only at 11.
  Streamed run = FeedAll({"world", "lo w"}, false, Chars("hello world"));
  EXPECT_EQ(run.Text(), "hel");
  EXPECT_EQ(run.stop_index, 1);
  // Both complete at the same offset: the longer one, so the earlier start.
  run = FeedAll({"c", "abc"}, false, {"xab", "cd"});
  EXPECT_EQ(run.Text(), "x");
  EXPECT_EQ(run.stop_index, 1);
  run = FeedAll({"c", "abc"}, true, {"xab", "cd"});
  EXPECT_EQ(run.Text(), "xabc");
  // Two occurrences inside one piece: the first.
  run = FeedAll({"ab"}, false, {"1ab2ab3"});
  EXPECT_EQ(run.Text(), "1");
  // A stop contained in the held tail plus a later longer candidate.
  run = FeedAll({"aab", "ab"}, false, {"xa", "a", "b"});
  EXPECT_EQ(run.Text(), "x");
  EXPECT_EQ(run.stop_index, 0);
}

TEST(StopStringMatcherTest, ResultDoesNotDependOnHowTheTextIsSplit) {
  const std::vector<std::string> stops = {"<|im_end|>", "\n\nUser:", "end", "ndx"};
  const std::vector<std::string> texts = {
      "Sure, here it is.\n\nUser: more", "no stop in this text at all <|im_", "the end", "a ndx b", "",
      "<|im_end|><|im_end|>"};
  std::mt19937 rng(7);
  for (const std::string& text : texts) {
    for (bool include : {false, true}) {
      const Streamed whole = FeedAll(stops, include, {text});
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<std::string> pieces;
        for (size_t i = 0; i < text.size();) {
          const size_t len = std::min<size_t>(1 + rng() % 4, text.size() - i);
          pieces.push_back(text.substr(i, len));
          i += len;
        }
        const Streamed split = FeedAll(stops, include, pieces);
        EXPECT_EQ(split.Text(), whole.Text()) << text;
        EXPECT_EQ(split.stop_index, whole.stop_index) << text;
      }
    }
  }
  EXPECT_EQ(FeedAll(stops, false, {"the end"}).Text(), "the ");
  EXPECT_EQ(FeedAll(stops, false, {"no stop in this text at all <|im_"}).Text(),
            "no stop in this text at all <|im_");
}

bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      if ((static_cast<unsigned char>(s[i + j]) & 0xc0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

TEST(StopStringMatcherTest, MultiByteUtf8) {
  // Pieces are whole characters, as the incremental detokenizer produces them.
  Streamed run = FeedAll({"。终"}, false, {"你", "好", "。", "终", "了"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"你", "好", "", ""}));
  EXPECT_EQ(run.stop_index, 0);
  // 😀 (F0 9F 98 80) and 🙂 (F0 9F 99 82) share two leading bytes; held-back text is whole
  // characters only.
  StopStringMatcher matcher({"🙂!"}, true);
  auto out = matcher.Feed("x😀🙂");
  EXPECT_EQ(out.text, "x😀");
  EXPECT_EQ(matcher.held_bytes(), 4u);
  out = matcher.Feed("?é");
  EXPECT_EQ(out.text, "🙂?é");
  out = matcher.Feed("🙂");
  EXPECT_EQ(out.text, "");
  out = matcher.Feed("!tail");
  EXPECT_EQ(out.text, "🙂!");
  EXPECT_EQ(out.stop_index, 0);
  // Every emitted piece of a longer run stays valid UTF-8.
  run = FeedAll({"ändern", "🙂🙂"}, false, {"ä", "n", "d", "e", "ä", "🙂", "x", "🙂", "🙂", "z"});
  for (const std::string& s : run.emitted) EXPECT_TRUE(ValidUtf8(s)) << s;
  EXPECT_EQ(run.Text(), "ändeä🙂x");
  EXPECT_EQ(run.stop_index, 1);
}

}  // namespace
}  // namespace ember
