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

TEST(ServeDataset, MixedHasTheAskedShareOfLongPrompts) {
  DatasetOptions o;
  o.name = "mixed";
  o.num_prompts = 400;
  o.input_len = 100;
  o.long_input_len = 1000;
  o.long_fraction = 0.25;
  const auto sessions = BuildSessions(o);
  ASSERT_TRUE(sessions.ok()) << sessions.status().ToString();
  int64_t longs = 0;
  for (const Session& s : *sessions) {
    const int64_t words = CountWords(s.requests[0].prompt);
    EXPECT_TRUE(words == 100 || words == 1000) << words;
    longs += words == 1000;
  }
  EXPECT_GT(longs, 70);   // 100 expected: binomial(400, 0.25) has a standard deviation of 8.7
  EXPECT_LT(longs, 130);
  const auto again = BuildSessions(o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[7].requests[0].prompt, (*sessions)[7].requests[0].prompt);
  o.long_fraction = 1.5;
  EXPECT_NE(BuildSessions(o).status().message().find("--long-fraction"), std::string::npos);
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

int64_t Count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ServeDataset, EditPromptsEndInsideAnAnswerThatRepeatsTheFile) {
  DatasetOptions o;
  o.name = "edit";
  o.num_prompts = 4;
  o.input_len = 200;
  o.output_len = 180;
  const auto sessions = BuildSessions(o);
  const auto again = BuildSessions(o);
  ASSERT_TRUE(sessions.ok() && again.ok());
  ASSERT_EQ(sessions->size(), 4u);
  for (size_t i = 0; i < sessions->size(); ++i) {
    const BenchRequest& r = (*sessions)[i].requests[0];
    EXPECT_EQ(r.prompt, (*again)[i].requests[0].prompt);
    EXPECT_EQ(r.output_len, 180);
    ASSERT_EQ(r.prompt.rfind("Old version of utils.py:\n```python\ndef sum_", 0), 0u) << r.prompt;
    // 200 tokens at ~50 per function: 4 functions in the file, and the answer's first def line.
    EXPECT_EQ(Count(r.prompt, "def sum_"), 5);
    const std::string renamed = r.prompt.substr(r.prompt.find("renamed to `") + 12);
    const std::string name = renamed.substr(0, renamed.find('`'));
    EXPECT_EQ(name.rfind("new_", 0), 0u);
    EXPECT_TRUE(r.prompt.ends_with("    " + name + " = 0\n")) << r.prompt;
    // The first function's def line, as it is in the file, starts the answer.
    const std::string first_def = r.prompt.substr(r.prompt.find("def sum_"));
    EXPECT_NE(r.prompt.rfind("```python\n" + first_def.substr(0, first_def.find('\n'))), std::string::npos);
  }
  EXPECT_NE((*sessions)[0].requests[0].prompt, (*sessions)[1].requests[0].prompt);
}

TEST(ServeDataset, QuotePromptsEndWithThePassagesFirstSentence) {
  DatasetOptions o;
  o.name = "quote";
  o.num_prompts = 20;
  o.input_len = 110;
  o.output_len = 100;
  o.range_ratio = 0.2;
  const auto sessions = BuildSessions(o);
  ASSERT_TRUE(sessions.ok());
  bool both_instructions[2] = {false, false};
  for (const Session& s : *sessions) {
    const BenchRequest& r = s.requests[0];
    ASSERT_EQ(r.prompt.rfind("Passage:\n", 0), 0u);
    const std::string passage = r.prompt.substr(9, r.prompt.find("\n\n") - 9);
    // 88..132 tokens at ~11 per sentence.
    const int64_t sentences = Count(passage, ". ") + 1;
    EXPECT_GE(sentences, 8);
    EXPECT_LE(sentences, 13);
    const std::string first = passage.substr(0, passage.find(". ") + 1);
    EXPECT_TRUE(r.prompt.ends_with(first)) << r.prompt;
    EXPECT_EQ(r.prompt[r.prompt.size() - first.size() - 1], '\n');
    both_instructions[0] = both_instructions[0] || r.prompt.find("Quote the passage exactly:") != std::string::npos;
    both_instructions[1] = both_instructions[1] || r.prompt.find("quoting its key sentences") != std::string::npos;
    EXPECT_GE(r.output_len, 80);
    EXPECT_LE(r.output_len, 120);
  }
  EXPECT_TRUE(both_instructions[0] && both_instructions[1]);
}

TEST(ServeDataset, RejectsBadOptions) {
  DatasetOptions o;
  o.name = "sharegpt";
  EXPECT_NE(BuildSessions(o).status().message().find("random, mixed, prefix, code, edit, quote or jsonl"), std::string::npos);
  o.name = "random";
  o.range_ratio = 1.0;
  EXPECT_NE(BuildSessions(o).status().message().find("--range-ratio"), std::string::npos);
  o.range_ratio = 0;
  o.num_prompts = 0;
  EXPECT_FALSE(BuildSessions(o).ok());
}

TEST(ServeDataset, JsonlTakesPromptsInOrderWithTheirLengths) {
  DatasetOptions o;
  o.name = "jsonl";
  o.output_len = 9;
  o.num_prompts = 2;
  const std::string text = "{\"prompt\": \"<|im_start|>user\\nhi\", \"output_len\": 3}\n\n{\"prompt\": \"b\"}\n{\"prompt\": \"c\"}\n";
  const auto s = JsonlSessions(text, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);  // num_prompts lines, the blank one skipped
  EXPECT_EQ((*s)[0].requests[0].prompt, "<|im_start|>user\nhi");
  EXPECT_EQ((*s)[0].requests[0].output_len, 3);
  EXPECT_EQ((*s)[1].requests[0].prompt, "b");
  EXPECT_EQ((*s)[1].requests[0].output_len, 9);  // --output-len when the line has none
}

TEST(ServeDataset, JsonlErrorsNameTheLine) {
  DatasetOptions o;
  o.name = "jsonl";
  o.path = "p.jsonl";
  EXPECT_NE(JsonlSessions("{\"prompt\": \"a\"}\nnot json\n", o).status().message().find("p.jsonl line 2"),
            std::string::npos);
  EXPECT_NE(JsonlSessions("{\"prompt\": 5}\n", o).status().message().find("\"prompt\""), std::string::npos);
  EXPECT_NE(JsonlSessions("{\"prompt\": \"a\", \"output_len\": -1}\n", o).status().message().find("output_len"),
            std::string::npos);
  EXPECT_NE(JsonlSessions("\n\n", o).status().message().find("no prompts"), std::string::npos);
  o.path = "/nonexistent/p.jsonl";
  EXPECT_NE(BuildSessions(o).status().message().find("cannot open"), std::string::npos);
  o.path.clear();
  EXPECT_NE(BuildSessions(o).status().message().find("--dataset-path"), std::string::npos);
}

}  // namespace
}  // namespace ember::tools::bench
