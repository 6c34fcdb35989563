#include "tools/ember/bench/serve_dataset.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace ember::tools::bench {
namespace {

// Short, frequent English words: each is one token (with its leading space) in the vocabularies
// of the models we benchmark, so a prompt of N words is close to N tokens.
constexpr std::string_view kWords[] = {
    "the",   "of",    "and",   "to",    "in",     "is",    "that",  "for",    "it",     "as",    "was",   "with",
    "be",    "by",    "on",    "not",   "he",     "this",  "are",   "or",     "his",    "from",  "at",    "which",
    "but",   "have",  "an",    "they",  "you",    "were",  "her",   "she",    "there",  "one",   "all",   "we",
    "their", "has",   "been",  "would", "will",   "more",  "if",    "no",     "when",   "what",  "so",    "out",
    "up",    "who",   "about", "them",  "can",    "said",  "into",  "time",   "than",   "only",  "some",  "could",
    "new",   "other", "then",  "two",   "may",    "do",    "first", "any",    "now",    "such",  "like",  "its",
    "over",  "also",  "after", "most",  "made",   "world", "where", "these",  "many",   "very",  "before", "way",
    "state", "through", "well", "year", "back",   "much",  "how",   "good",   "work",   "day",   "long",  "should",
    "great", "even",  "still", "city",  "own",    "same",  "part",  "while",  "people", "know",  "find",  "take",
    "give",  "next",  "since", "place", "right",  "small", "end",   "under",  "both",   "high",  "life",  "last",
    "man",   "old",   "us",    "school", "water", "never", "house", "come",   "home",   "left",  "few",   "must",
    "found", "early", "each",  "light", "hand",   "point", "line",  "name",   "open",   "group", "make",  "room",
    "game",  "side",  "again", "story", "face",   "off",   "far",   "run",    "set"};
constexpr std::string_view kCodeNames[] = {"data", "value", "item", "result", "count", "index", "total", "node",
                                           "key",  "buf",   "size", "name",   "path",  "line",  "text",  "user"};
constexpr std::string_view kCodeOps[] = {"+", "-", "*", "//"};
// Tokens of one generated function, as the SmolLM2 and Gemma tokenizers count it (roughly).
constexpr int64_t kTokensPerFunction = 24;
// The same for EditCode's functions and PassageText's sentences (SmolLM2, measured on seed 0).
constexpr int64_t kTokensPerEditFunction = 50;
constexpr int64_t kTokensPerSentence = 11;
// Plain, concrete words so the sentences read as ordinary prose a small model will copy.
constexpr std::string_view kAdjectives[] = {"old", "small", "quiet", "busy", "green", "cold", "bright", "long",
                                            "narrow", "new", "wooden", "empty", "warm", "tall", "dark", "open"};
constexpr std::string_view kNouns[] = {"river", "village", "teacher", "market", "bridge", "garden", "road",
                                       "farmer", "library", "train", "harbour", "school", "forest", "baker",
                                       "castle", "station"};
constexpr std::string_view kVerbs[] = {"stood", "waited", "grew", "opened", "closed", "turned", "moved", "stayed",
                                       "started", "changed"};
constexpr std::string_view kTimes[] = {"morning", "evening", "spring", "summer", "winter", "autumn", "night"};
constexpr std::string_view kPeople[] = {"Anna", "Tom", "Maria", "James", "Lucy", "Peter", "Sara", "David"};

template <typename T, size_t N>
const T& Pick(BenchRng& rng, const T (&items)[N]) {
  return items[rng.UniformInt(0, static_cast<int64_t>(N) - 1)];
}

}  // namespace

BenchRng::BenchRng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull) { Next(); }

uint64_t BenchRng::Next() {
  state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
  // Output permutation (xorshift + multiply) so that low bits are as good as high ones.
  uint64_t x = state_;
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  return x;
}

int64_t BenchRng::UniformInt(int64_t lo, int64_t hi) {
  EMBER_CHECK(lo <= hi, "UniformInt({}, {})", lo, hi);
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(Next());  // the whole 64-bit range
  // Rejection: draws from the top partial copy of [0, span) would bias the result.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t x = Next();
  while (x >= limit) x = Next();
  return lo + static_cast<int64_t>(x % span);
}

double BenchRng::Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

double BenchRng::Exponential(double rate) { return -std::log1p(-Uniform01()) / rate; }

std::string RandomWords(BenchRng& rng, int64_t words) {
  std::string out;
  for (int64_t i = 0; i < words; ++i) {
    if (i > 0) out += ' ';
    out += Pick(rng, kWords);
  }
  return out;
}

std::string CodeText(BenchRng& rng, int64_t tokens) {
  std::string out;
  for (int64_t emitted = 0; emitted < tokens; emitted += kTokensPerFunction) {
    // Three distinct names: two arguments and the local.
    const std::string_view a = Pick(rng, kCodeNames);
    std::string_view b = Pick(rng, kCodeNames);
    while (b == a) b = Pick(rng, kCodeNames);
    std::string_view c = Pick(rng, kCodeNames);
    while (c == a || c == b) c = Pick(rng, kCodeNames);
    const std::string_view op = Pick(rng, kCodeOps);
    const int64_t k = rng.UniformInt(1, 99);
    if (!out.empty()) out += '\n';
    out += fmt::format("def {0}_{1}({0}, {1}):\n    {2} = {0} {3} {1} * {4}\n    return {2}\n", a, b, c, op, k);
  }
  return out;
}

std::string EditCode(BenchRng& rng, int64_t tokens, std::string* local) {
  std::string out;
  for (int64_t emitted = 0; emitted < tokens; emitted += kTokensPerEditFunction) {
    // Four distinct names: the list, the threshold, the accumulator and the loop variable.
    std::string_view n[4];
    for (int i = 0; i < 4; ++i) {
      bool clash = true;
      while (clash) {
        n[i] = Pick(rng, kCodeNames);
        clash = false;
        for (int j = 0; j < i; ++j) clash = clash || n[j] == n[i];
      }
    }
    if (out.empty() && local != nullptr) *local = std::string(n[2]);
    const std::string_view op = Pick(rng, kCodeOps);
    const int64_t k = rng.UniformInt(1, 99);
    if (!out.empty()) out += "\n\n";
    out += fmt::format(
        "def sum_{0}_over_{1}({0}, {1}):\n    {2} = 0\n    for {3} in {0}:\n        if {3} > {1}:\n"
        "            {2} = {2} + {3} {4} {5}\n    return {2}\n",
        n[0], n[1], n[2], n[3], op, k);
  }
  return out;
}

std::string PassageText(BenchRng& rng, int64_t tokens) {
  std::string out;
  for (int64_t emitted = 0; emitted < tokens; emitted += kTokensPerSentence) {
    if (!out.empty()) out += ' ';
    switch (rng.UniformInt(0, 2)) {
      case 0:
        out += fmt::format("The {} {} {} near the {} {}.", Pick(rng, kAdjectives), Pick(rng, kNouns),
                           Pick(rng, kVerbs), Pick(rng, kAdjectives), Pick(rng, kNouns));
        break;
      case 1:
        out += fmt::format("In the {}, the {} by the {} {} again.", Pick(rng, kTimes), Pick(rng, kNouns),
                           Pick(rng, kNouns), Pick(rng, kVerbs));
        break;
      default:
        out += fmt::format("{} said that the {} was {} and {}.", Pick(rng, kPeople), Pick(rng, kNouns),
                           Pick(rng, kAdjectives), Pick(rng, kAdjectives));
    }
  }
  return out;
}

int64_t SampleLength(BenchRng& rng, int64_t mean, double ratio) {
  const int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(mean) * (1 - ratio)));
  const int64_t hi = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(mean) * (1 + ratio)));
  return rng.UniformInt(lo, hi);
}

namespace {

// The file, the instruction, and the answer's first two lines (the def line as it was, the
// renamed accumulator's initialisation): the model is already copying when generation starts.
std::string EditPrompt(BenchRng& rng, int64_t tokens) {
  std::string local;
  const std::string code = EditCode(rng, tokens, &local);
  const std::string renamed = "new_" + local;
  const size_t def_end = code.find('\n');
  return fmt::format(
      "Old version of utils.py:\n```python\n{0}```\n\nNew version of utils.py, where the variable `{1}` is "
      "renamed to `{2}` and nothing else changes:\n```python\n{3}\n    {2} = 0\n",
      code, local, renamed, code.substr(0, def_end));
}

std::string QuotePrompt(BenchRng& rng, int64_t tokens) {
  const std::string passage = PassageText(rng, tokens);
  const std::string_view instruction = rng.UniformInt(0, 1) == 0
                                           ? "Quote the passage exactly:"
                                           : "Summarise the passage, quoting its key sentences word for word:";
  const size_t first_end = passage.find(". ");
  return fmt::format("Passage:\n{}\n\n{}\n{}", passage, instruction,
                     passage.substr(0, first_end == std::string::npos ? passage.size() : first_end + 1));
}

}  // namespace

Expected<std::vector<Session>> JsonlSessions(std::string_view text, const DatasetOptions& o) {
  std::vector<Session> sessions;
  int64_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size() && static_cast<int64_t>(sessions.size()) < o.num_prompts) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const auto where = [&] { return fmt::format("{} line {}", o.path.empty() ? "jsonl dataset" : o.path, line_number); };
    if (!row.is_object() || !row.contains("prompt") || !row["prompt"].is_string() || row["prompt"].get_ref<const std::string&>().empty()) {
      return InvalidArgument(fmt::format("{}: expected an object with a non-empty string \"prompt\"", where()));
    }
    int64_t output_len = o.output_len;
    if (const auto len = row.find("output_len"); len != row.end()) {
      if (!len->is_number_integer() || len->get<int64_t>() < 1) {
        return InvalidArgument(fmt::format("{}: \"output_len\" must be a positive integer", where()));
      }
      output_len = len->get<int64_t>();
    }
    sessions.push_back({{{row["prompt"].get<std::string>(), output_len}}});
  }
  if (sessions.empty()) return InvalidArgument(fmt::format("{}: no prompts", o.path.empty() ? "jsonl dataset" : o.path));
  return sessions;
}

Expected<std::vector<Session>> BuildSessions(const DatasetOptions& o) {
  if (o.num_prompts < 1) return InvalidArgument("--num-prompts must be at least 1");
  if (o.input_len < 1 || o.output_len < 1) return InvalidArgument("--input-len and --output-len must be at least 1");
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) {
    return InvalidArgument(fmt::format("--range-ratio must be in [0, 1), got {}", o.range_ratio));
  }
  if (o.name == "jsonl") {
    if (o.path.empty()) return InvalidArgument("--dataset jsonl needs --dataset-path FILE");
    std::ifstream file(o.path);
    if (!file) return InvalidArgument(fmt::format("--dataset-path {}: cannot open it", o.path));
    std::ostringstream text;
    text << file.rdbuf();
    return JsonlSessions(text.str(), o);
  }
  BenchRng rng(o.seed);
  std::vector<Session> sessions;
  if (o.name == "random" || o.name == "code") {
    for (int64_t i = 0; i < o.num_prompts; ++i) {
      const int64_t input = SampleLength(rng, o.input_len, o.range_ratio);
      std::string prompt = o.name == "random" ? RandomWords(rng, input) : CodeText(rng, input);
      sessions.push_back({{{std::move(prompt), SampleLength(rng, o.output_len, o.range_ratio)}}});
    }
    return sessions;
  }
  if (o.name == "mixed") {
    if (o.long_input_len < 1 || !(o.long_fraction >= 0 && o.long_fraction <= 1)) {
      return InvalidArgument("--long-input-len must be at least 1 and --long-fraction in [0, 1]");
    }
    for (int64_t i = 0; i < o.num_prompts; ++i) {
      const bool long_prompt = rng.Uniform01() < o.long_fraction;
      const int64_t input = SampleLength(rng, long_prompt ? o.long_input_len : o.input_len, o.range_ratio);
      sessions.push_back({{{RandomWords(rng, input), SampleLength(rng, o.output_len, o.range_ratio)}}});
    }
    return sessions;
  }
  if (o.name == "edit" || o.name == "quote") {
    for (int64_t i = 0; i < o.num_prompts; ++i) {
      const int64_t input = SampleLength(rng, o.input_len, o.range_ratio);
      sessions.push_back({{{o.name == "edit" ? EditPrompt(rng, input) : QuotePrompt(rng, input),
                            SampleLength(rng, o.output_len, o.range_ratio)}}});
    }
    return sessions;
  }
  if (o.name == "prefix") {
    if (o.turns < 1 || o.prefix_len < 0) return InvalidArgument("--turns must be at least 1 and --prefix-len >= 0");
    std::string prefix = "You are an agent. Tools: ";
    prefix += RandomWords(rng, o.prefix_len);
    const int64_t num_sessions = std::max<int64_t>(1, o.num_prompts / o.turns);
    for (int64_t s = 0; s < num_sessions; ++s) {
      Session session;
      std::string history = prefix;
      for (int64_t t = 0; t < o.turns; ++t) {
        history += fmt::format("\nUser {}.{}: ", s, t);
        history += RandomWords(rng, SampleLength(rng, o.input_len, o.range_ratio));
        history += "\nAssistant:";
        session.requests.push_back({history, SampleLength(rng, o.output_len, o.range_ratio)});
        // The next turn carries a fixed stand-in for this turn's answer, so the dataset does not
        // depend on what the server generated.
        history += ' ';
        history += RandomWords(rng, o.output_len);
      }
      sessions.push_back(std::move(session));
    }
    return sessions;
  }
  return InvalidArgument(fmt::format("--dataset must be random, mixed, prefix, code, edit, quote or jsonl; got '{}'", o.name));
}

}  // namespace ember::tools::bench
