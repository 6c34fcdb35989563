#include "tools/ember/bench/serve_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace ember::tools::bench {
namespace {

int64_t CountWords(const std::string& text) {
  std::istringstream in(text);
  int64_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

TEST(ServeDataset, RngIsDeterministicAndInRange) {
  BenchRng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const int64_t x = a.UniformInt(-3, 5);
    EXPECT_EQ(x, b.UniformInt(-3, 5));
    EXPECT_GE(x, -3);
    EXPECT_LE(x, 5);
    differs = differs || x != c.UniformInt(-3, 5);
    const double u = a.Uniform01();
    EXPECT_EQ(u, b.Uniform01());
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_GT(a.Exponential(2.0), 0.0);
    b.Exponential(2.0);
  }
  EXPECT_TRUE(differs);
  // Every value of a small range shows up.
  BenchRng r(1);
  std::vector<int> seen(4);
  for (int i = 0; i < 200; ++i) ++seen[r.UniformInt(0, 3)];
  for (int count : seen) EXPECT_GT(count, 20);
}

TEST(ServeDataset, RandomPromptsAreDeterministicWithLengthsInRange) {
  DatasetOptions o;
  o.num_prompts = 50;
  o.input_len = 100;
  o.output_len = 20;
  o.range_ratio = 0.25;
  o.seed = 7;
  const auto first = BuildSessions(o);
  const auto again = BuildSessions(o);
  ASSERT_TRUE(first.ok() && again.ok());
  ASSERT_EQ(first->size(), 50u);
  bool lengths_vary = false;
  for (size_t i = 0; i < first->size(); ++i) {
    ASSERT_EQ((*first)[i].requests.size(), 1u);
    const BenchRequest& r = (*first)[i].requests[0];
    EXPECT_EQ(r.prompt, (*again)[i].requests[0].prompt);
    const int64_t words = CountWords(r.prompt);
    EXPECT_GE(words, 75);
    EXPECT_LE(words, 125);
    EXPECT_GE(r.output_len, 15);
    EXPECT_LE(r.output_len, 25);
    lengths_vary = lengths_vary || words != CountWords((*first)[0].requests[0].prompt);
  }
  EXPECT_TRUE(lengths_vary);
  o.seed = 8;
  const auto other = BuildSessions(o);
  EXPECT_NE(other->front().requests[0].prompt, first->front().requests[0].prompt);
}

TEST(ServeDataset, RangeRatioZeroGivesExactLengths) {
  DatasetOptions o;
  o.num_prompts = 5;
  o.input_len = 128;
  o.output_len = 64;
  const auto sessions = BuildSessions(o);
  ASSERT_TRUE(sessions.ok());
  for (const Session& s : *sessions) {
    EXPECT_EQ(CountWords(s.requests[0].prompt), 128);
    EXPECT_EQ(s.requests[0].output_len, 64);
  }
}

TEST(ServeDataset, PrefixSessionsShareThePrefixAndGrowTurnByTurn) {
  DatasetOptions o;
  o.name = "prefix";
  o.num_prompts = 12;
  o.turns = 3;
  o.prefix_len = 50;
  o.input_len = 10;
  o.output_len = 5;
  const auto sessions = BuildSessions(o);
  ASSERT_TRUE(sessions.ok());
  ASSERT_EQ(sessions->size(), 4u);
  const std::string& first_turn = (*sessions)[0].requests[0].prompt;
  const std::string prefix = first_turn.substr(0, first_turn.find("\nUser"));
  EXPECT_EQ(CountWords(prefix), 5 + 50);  // "You are an agent. Tools:" + 50 words
  for (const Session& s : *sessions) {
    ASSERT_EQ(s.requests.size(), 3u);
    for (size_t t = 0; t < s.requests.size(); ++t) {
      EXPECT_EQ(s.requests[t].prompt.rfind(prefix, 0), 0u);
      if (t > 0) {
        EXPECT_EQ(s.requests[t].prompt.rfind(s.requests[t - 1].prompt, 0), 0u) << "turn " << t;
      }
      EXPECT_TRUE(s.requests[t].prompt.ends_with("\nAssistant:"));
    }
  }
}

TEST(ServeDataset, CodePromptsAreFunctions) {
  DatasetOptions o;
  o.name = "code";
  o.num_prompts = 3;
  o.input_len = 100;
  const auto sessions = BuildSessions(o);
  ASSERT_TRUE(sessions.ok());
  for (const Session& s : *sessions) {
    const std::string& p = s.requests[0].prompt;
    EXPECT_EQ(p.rfind("def ", 0), 0u);
    // ~24 tokens per function: 100 tokens is 5 functions.
    int64_t functions = 0;
    for (size_t at = p.find("def "); at != std::string::npos; at = p.find("def ", at + 1)) ++functions;
    EXPECT_EQ(functions, 5);
    EXPECT_NE(p.find("return"), std::string::npos);
  }
}

TEST(ServeDataset, RejectsBadOptions) {
  DatasetOptions o;
  o.name = "sharegpt";
  EXPECT_NE(BuildSessions(o).status().message().find("random, prefix or code"), std::string::npos);
  o.name = "random";
  o.range_ratio = 1.0;
  EXPECT_NE(BuildSessions(o).status().message().find("--range-ratio"), std::string::npos);
  o.range_ratio = 0;
  o.num_prompts = 0;
  EXPECT_FALSE(BuildSessions(o).ok());
}

}  // namespace
}  // namespace ember::tools::bench
