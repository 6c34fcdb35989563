// ConstraintCompiler and its matchers over a small synthetic vocabulary: every mask is checked
// against brute force (each token accepted or refused by a fresh matcher), and random walks
// through the masks must produce text that a reference checker (nlohmann's parser plus the
// schema's rules written out by hand, std::regex for regexes) accepts.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "structured/compiler.h"

namespace ember::structured {
namespace {

// Single characters, a few multi-character pieces (so that tokens straddle JSON structure), the
// two bytes of "é" on their own (a real vocabulary can spell every string, byte by byte), an
// empty special token and the stop token last.
std::vector<std::string> Vocabulary() {
  std::vector<std::string> v;
  for (int c = 0x20; c < 0x7f; ++c) v.push_back(std::string(1, static_cast<char>(c)));
  for (const char* piece : {"{\"", "\": ", "\", \"", "true", "false", "null", "12", "ab", "\"}", "}", "né", "\n", "\xc3", "\xa9"}) {
    v.push_back(piece);
  }
  v.push_back("");    // a special token: never allowed
  v.push_back("<eos>");  // the stop token (its text is dropped by the compiler)
  return v;
}

int32_t StopId() { return static_cast<int32_t>(Vocabulary().size()) - 1; }

ConstraintCompiler& Compiler() {
  static ConstraintCompiler compiler(Vocabulary(), {StopId()});
  return compiler;
}

bool Allowed(const std::vector<uint32_t>& mask, int32_t t) { return (mask[t / 32] >> (t % 32)) & 1u; }

ConstraintSpec Spec(ConstraintSpec::Kind kind, std::string text) {
  ConstraintSpec s;
  s.kind = kind;
  s.text = std::move(text);
  return s;
}

// Random walks: at each step a uniformly drawn allowed token, the mask of every step checked
// against brute force on the first walk. Returns the texts that ended with the stop token.
std::vector<std::string> Walk(const ConstraintSpec& spec, int walks, int max_steps, bool brute_force_first) {
  auto compiled = Compiler().Compile(spec);
  EXPECT_TRUE(compiled.ok()) << compiled.status().message();
  if (!compiled.ok()) return {};
  const std::vector<std::string> vocab = Vocabulary();
  const int32_t vocab_size = static_cast<int32_t>(vocab.size());
  const std::vector<int32_t> stops = {StopId()};
  std::vector<std::string> outputs;
  std::mt19937 rng(1234);
  for (int w = 0; w < walks; ++w) {
    auto matcher = (*compiled)->NewMatcher(stops);
    std::vector<int32_t> emitted;
    std::string text;
    std::vector<uint32_t> mask((vocab_size + 31) / 32);
    for (int step = 0; step < max_steps; ++step) {
      matcher->FillNextTokenBitmask(mask);
      if (w == 0 && brute_force_first) {
        for (int32_t t = 0; t < vocab_size - 2; ++t) {  // not the special token (below) nor the stop token
          auto probe = (*compiled)->NewMatcher(stops);
          bool replayed = true;
          for (int32_t e : emitted) replayed = replayed && probe->AcceptToken(e);
          EXPECT_TRUE(replayed);
          EXPECT_EQ(Allowed(mask, t), probe->AcceptToken(t)) << "token " << t << " '" << vocab[t] << "' after '" << text << "'";
        }
      }
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < vocab_size; ++t) {
        if (Allowed(mask, t)) allowed.push_back(t);
      }
      EXPECT_FALSE(Allowed(mask, vocab_size - 2)) << "the special token is never allowed";
      if (allowed.empty()) {
        ADD_FAILURE() << "nothing allowed after '" << text << "'";
        break;
      }
      // Prefer going on for a while so that walks are not all trivially short.
      int32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      if (t == StopId() && allowed.size() > 1 && step < 8) t = allowed[0] == StopId() ? allowed[1] : allowed[0];
      EXPECT_TRUE(matcher->AcceptToken(t));
      emitted.push_back(t);
      if (t == StopId()) {
        EXPECT_TRUE(matcher->IsTerminated());
        outputs.push_back(text);
        break;
      }
      text += vocab[t];
    }
  }
  return outputs;
}

TEST(ConstraintCompiler, JsonSchemaWalksFollowTheSchema) {
  const std::string schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6},
      "level": {"type": "integer", "minimum": 1, "maximum": 5},
      "ok": {"type": "boolean"},
      "tag": {"enum": ["ab", "né"]}},
    "required": ["name", "level", "ok", "tag"], "additionalProperties": false})";
  const std::vector<std::string> outputs = Walk(Spec(ConstraintSpec::Kind::kJsonSchema, schema), 40, 200, true);
  ASSERT_GE(outputs.size(), 30u);
  for (const std::string& text : outputs) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_EQ(j.size(), 4u) << text;
    ASSERT_TRUE(j.contains("name") && j["name"].is_string()) << text;
    const std::string name = j["name"].get<std::string>();
    const auto chars = std::count_if(name.begin(), name.end(), [](char c) { return (c & 0xc0) != 0x80; });
    EXPECT_LE(chars, 6) << text;  // maxLength counts characters, not bytes
    ASSERT_TRUE(j.contains("level") && j["level"].is_number_integer()) << text;
    EXPECT_GE(j["level"].get<int>(), 1) << text;
    EXPECT_LE(j["level"].get<int>(), 5) << text;
    ASSERT_TRUE(j.contains("ok") && j["ok"].is_boolean()) << text;
    ASSERT_TRUE(j.contains("tag")) << text;
    EXPECT_TRUE(j["tag"] == "ab" || j["tag"] == "né") << text;
  }
}

// xgrammar's own ipv4 pattern allows leading zeros ("020.1.1.1"), which reference validators
// refuse; ember tightens it (TightenFormats). Checked octet by octet here.
TEST(ConstraintCompiler, Ipv4FormatHasNoLeadingZeros) {
  const std::vector<std::string> outputs =
      Walk(Spec(ConstraintSpec::Kind::kJsonSchema, R"({"type": "string", "format": "ipv4"})"), 60, 40, false);
  ASSERT_GE(outputs.size(), 50u);
  for (const std::string& text : outputs) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_string()) << text;
    std::string ip = j.get<std::string>() + ".";
    int octets = 0;
    for (size_t at = 0, dot; (dot = ip.find('.', at)) != std::string::npos; at = dot + 1, ++octets) {
      const std::string octet = ip.substr(at, dot - at);
      ASSERT_FALSE(octet.empty()) << text;
      EXPECT_TRUE(octet.size() == 1 || octet[0] != '0') << text;
      EXPECT_LE(std::stoi(octet), 255) << text;
    }
    EXPECT_EQ(octets, 4) << text;
  }
}

TEST(ConstraintCompiler, RegexWalksMatchStdRegex) {
  const std::string pattern = "[a-c]{2,4}-(x|yz)[0-9]+";
  const std::vector<std::string> outputs = Walk(Spec(ConstraintSpec::Kind::kRegex, pattern), 40, 60, true);
  ASSERT_GE(outputs.size(), 30u);
  const std::regex re(pattern);
  for (const std::string& text : outputs) EXPECT_TRUE(std::regex_match(text, re)) << text;
}

TEST(ConstraintCompiler, ChoiceWalksAreOneOfTheChoices) {
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kChoice;
  spec.choices = {"true", "false", "ab\"c", "né"};
  const std::vector<std::string> outputs = Walk(spec, 30, 20, true);
  ASSERT_EQ(outputs.size(), 30u);
  for (const std::string& text : outputs) {
    EXPECT_TRUE(text == "true" || text == "false" || text == "ab\"c" || text == "né") << text;
  }
}

TEST(ConstraintCompiler, GrammarWalksFollowTheGrammar) {
  const std::string ebnf = R"g(root ::= "(" expr ")"
expr ::= term (("+" | "*") term)*
term ::= [0-9] | "(" expr ")")g";
  const std::vector<std::string> outputs = Walk(Spec(ConstraintSpec::Kind::kGrammar, ebnf), 30, 80, true);
  ASSERT_GE(outputs.size(), 20u);
  for (const std::string& text : outputs) {
    // Balanced parentheses and digits/operators only, alternating term and operator.
    int depth = 0;
    for (char c : text) {
      depth += c == '(' ? 1 : c == ')' ? -1 : 0;
      EXPECT_GE(depth, 0) << text;
      EXPECT_TRUE(std::string("()+*0123456789").find(c) != std::string::npos) << text;
    }
    EXPECT_EQ(depth, 0) << text;
    EXPECT_EQ(text.front(), '(') << text;
  }
}

TEST(ConstraintCompiler, ToolCallWalksParse) {
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kToolCall;
  spec.tool_calls = {{"f\", \"arguments\": ", R"({"type": "object", "properties": {"x": {"type": "integer", "minimum": -1000, "maximum": 1000}},
                      "required": ["x"], "additionalProperties": false})", "}\n</t>"},
                     {"g\", \"arguments\": ", R"({"type": "object", "properties": {"s": {"enum": ["ab", "né"]}}})",
                      "}\n</t>"}};
  const std::vector<std::string> outputs = Walk(spec, 30, 200, true);
  ASSERT_GE(outputs.size(), 20u);
  for (const std::string& text : outputs) {
    const std::string call = "{\"name\": \"" + text;
    ASSERT_GE(call.size(), 5u);
    ASSERT_EQ(call.substr(call.size() - 5), "\n</t>") << text;
    const nlohmann::json j = nlohmann::json::parse(call.substr(0, call.size() - 5), nullptr, false);
    ASSERT_TRUE(j.is_object()) << text;
    ASSERT_TRUE(j["name"] == "f" || j["name"] == "g") << text;
    ASSERT_TRUE(j["arguments"].is_object()) << text;
    if (j["name"] == "f") {
      EXPECT_TRUE(j["arguments"]["x"].is_number_integer()) << text;
      EXPECT_EQ(j["arguments"].size(), 1u) << text;
    }
  }
}

TEST(ConstraintCompiler, RejectsUnsupportedKeywordsByName) {
  for (const auto& [schema, keyword] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type": "array", "uniqueItems": true})", "uniqueItems"},
           {R"({"type": "object", "properties": {"a": {"not": {"type": "string"}}}})", "not"},
           {R"({"type": "string", "format": "credit-card"})", "credit-card"},
           {R"({"type": "number", "multipleOf": 0.5})", "multipleOf"},
           {R"({"$defs": {"x": {"type": "array", "contains": {"type": "integer"}}}, "$ref": "#/$defs/x"})",
            "contains"}}) {
    auto compiled = Compiler().Compile(Spec(ConstraintSpec::Kind::kJsonSchema, schema));
    ASSERT_FALSE(compiled.ok()) << schema;
    EXPECT_NE(compiled.status().message().find(keyword), std::string::npos) << compiled.status().message();
  }
}

TEST(ConstraintCompiler, RejectsInvalidInputs) {
  EXPECT_FALSE(Compiler().Compile(Spec(ConstraintSpec::Kind::kJsonSchema, "{not json")).ok());
  EXPECT_FALSE(Compiler().Compile(Spec(ConstraintSpec::Kind::kJsonSchema, R"({"type": "strange"})")).ok());
  EXPECT_FALSE(Compiler().Compile(Spec(ConstraintSpec::Kind::kRegex, "(unclosed")).ok());
  EXPECT_FALSE(Compiler().Compile(Spec(ConstraintSpec::Kind::kGrammar, "root ::= undefined_rule")).ok());
  EXPECT_FALSE(Compiler().Compile(ConstraintSpec{.kind = ConstraintSpec::Kind::kChoice}).ok());
}

TEST(ConstraintCompiler, CachesBySpec) {
  const ConstraintSpec a = Spec(ConstraintSpec::Kind::kRegex, "cached[0-9]");
  const CompileStats before = Compiler().stats();
  auto first = Compiler().Compile(a);
  auto second = Compiler().Compile(a);
  auto other = Compiler().Compile(Spec(ConstraintSpec::Kind::kGrammar, R"(root ::= "cached" [0-9])"));
  ASSERT_TRUE(first.ok() && second.ok() && other.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_NE(first->get(), other->get());
  EXPECT_EQ(Compiler().stats().compiled, before.compiled + 2);
  EXPECT_EQ(Compiler().stats().cache_hits, before.cache_hits + 1);
}

TEST(ConstraintSpec, EbnfLiteralEscapes) {
  EXPECT_EQ(EbnfLiteral("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
  EXPECT_EQ(EbnfLiteral("né"), "\"né\"");
}

}  // namespace
}  // namespace ember::structured
