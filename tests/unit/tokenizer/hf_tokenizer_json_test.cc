// tokenizer.json loading: two small byte-level BPE tokenizers trained by the PyPI `tokenizers`
// package (scripts/make_tokenizer_corpus.py), whose ids for the first corpus records are the
// reference; and the shapes ember refuses, with the reason.
#include "tokenizer/hf_tokenizer_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer_fixtures.h"

namespace ember {
namespace {

using ::testing::HasSubstr;
using tokenizer_testing::FixturePath;
using tokenizer_testing::IsValidUtf8;
using tokenizer_testing::ReadIds;
using tokenizer_testing::ReadRecords;

class HfFixtureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HfFixtureTest, MatchesHuggingFaceTokenizers) {
  const std::string name = GetParam();
  auto spec = LoadHfTokenizerJson(FixturePath(name + ".json"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto tok = Tokenizer::Create(std::move(spec).value());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const auto ids = ReadIds(name + "_ids.bin.gz");
  // The reference covers the first N records that are valid UTF-8 (the `tokenizers` API takes
  // str), with HF's encode_special_tokens on (plain) and off (special).
  std::vector<std::string> records;
  for (const auto& r : ReadRecords("corpus.bin.gz")) {
    if (records.size() < ids.plain.size() && IsValidUtf8(r)) records.push_back(r);
  }
  ASSERT_EQ(records.size(), ids.plain.size());
  size_t mismatches = 0, tokens = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    for (bool parse_special : {false, true}) {
      const auto& want = parse_special ? ids.special[i] : ids.plain[i];
      tokens += want.size();
      const auto got = (*tok)->Encode(records[i], /*add_special=*/false, parse_special);
      if (got != want && ++mismatches <= 3) {
        ADD_FAILURE() << name << " record " << i << " parse_special=" << parse_special << ": "
                      << records[i].substr(0, 100);
      }
      EXPECT_EQ((*tok)->Decode(got, false), records[i]);
    }
  }
  std::printf("[ %s ] %zu records, %zu tokens, %zu mismatches\n", name.c_str(), records.size(),
              tokens, mismatches);
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfFixtureTest,
                         ::testing::Values("hf_digits_bytelevel", "hf_llama3_split"));

TEST(HfTokenizerJsonTest, ReadsShapeDetails) {
  auto spec = LoadHfTokenizerJson(FixturePath("hf_llama3_split.json"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->pre_tokenizer, "llama3");
  EXPECT_TRUE(spec->ignore_merges);
  EXPECT_EQ(spec->token_types[0], TokenizerSpec::kControl);      // <|endoftext|>, special
  EXPECT_EQ(spec->token_types[1200], TokenizerSpec::kUserDefined);  // <tool>, not special
  EXPECT_EQ(spec->tokens[1200], "<tool>");
  auto smol = LoadHfTokenizerJson(FixturePath("hf_digits_bytelevel.json"));
  ASSERT_TRUE(smol.ok());
  EXPECT_EQ(smol->pre_tokenizer, "smollm");
  // Merges written as "a b" strings and as [a, b] pairs load alike.
  EXPECT_EQ(smol->merges.size(), spec->merges.size());
}

constexpr const char* kMinimal = R"({
  "added_tokens": [{"id": 3, "content": "<s>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [3], "tokens": ["<s>"]}}},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}
})";

TEST(HfTokenizerJsonTest, MinimalWithTemplateBos) {
  auto spec = TokenizerSpecFromHfJson(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->pre_tokenizer, "gpt2");
  EXPECT_TRUE(spec->add_bos);
  EXPECT_EQ(spec->bos_id, 3);
  auto tok = Tokenizer::Create(std::move(spec).value());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->Encode("abab<s>", true, true), (std::vector<int32_t>{3, 2, 2, 3}));
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(HfTokenizerJsonTest, UnsupportedShapesAreUnimplemented) {
  const std::string base = kMinimal;
  struct Case {
    std::string json;
    const char* says;
  };
  const std::vector<Case> cases = {
      {Replace(base, "\"type\": \"BPE\"", "\"type\": \"Unigram\""), "Unigram"},
      {Replace(base, "\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}"), "NFC"},
      {Replace(base, "\"add_prefix_space\": false", "\"add_prefix_space\": true"), "add_prefix_space"},
      {Replace(base, "\"type\": \"ByteLevel\", \"add_prefix_space\"", "\"type\": \"Metaspace\", \"x\""),
       "Metaspace"},
      {Replace(base, "\"decoder\": {\"type\": \"ByteLevel\"}", "\"decoder\": {\"type\": \"WordPiece\"}"),
       "WordPiece"},
      {Replace(base, "\"merges\": [\"a b\"]", "\"merges\": [\"a b\"], \"byte_fallback\": true"),
       "byte_fallback"},
      {Replace(base, "\"special\": true", "\"special\": true, \"lstrip\": true"), "lstrip"},
  };
  for (const auto& c : cases) {
    auto spec = TokenizerSpecFromHfJson(c.json);
    ASSERT_FALSE(spec.ok()) << c.says;
    EXPECT_EQ(spec.status().code(), StatusCode::kUnimplemented) << spec.status().ToString();
    EXPECT_THAT(spec.status().message(), HasSubstr(c.says));
  }
}

TEST(HfTokenizerJsonTest, MalformedInputIsInvalidArgument) {
  EXPECT_EQ(TokenizerSpecFromHfJson("{not json").status().code(), StatusCode::kInvalidArgument);
  const std::string gap = Replace(kMinimal, "\"ab\": 2", "\"ab\": 7");
  EXPECT_EQ(TokenizerSpecFromHfJson(gap).status().code(), StatusCode::kInvalidArgument);
  const std::string bad_merge = Replace(kMinimal, "[\"a b\"]", "[\"ab\"]");
  EXPECT_EQ(TokenizerSpecFromHfJson(bad_merge).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadHfTokenizerJson("/nonexistent/tokenizer.json").status().code(), StatusCode::kIoError);
}

// Shapes that once crashed the reader (an id of -1 or 2^64-1 wrapped into a write far outside the
// vocabulary; a float id was cast; a template naming a token that is not there read a missing key;
// deep nesting ran the recursive readers out of stack): now each is refused with a Status.
TEST(HfTokenizerJsonTest, HostileIdsKeysAndNestingAreInvalidArgument) {
  const std::vector<std::string> cases = {
      Replace(kMinimal, "{\"id\": 3,", "{\"id\": -1,"),
      Replace(kMinimal, "{\"id\": 3,", "{\"id\": 18446744073709551615,"),
      Replace(kMinimal, "{\"id\": 3,", "{\"id\": 1000000000,"),
      Replace(kMinimal, "{\"id\": 3,", "{\"id\": 1.5e300,"),
      Replace(kMinimal, "\"ab\": 2", "\"ab\": 2e300"),
      Replace(kMinimal, "\"ids\": [3]", "\"ids\": [3e300]"),
      Replace(kMinimal, "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Seq", "{\"type_id\": 0}}, {\"Seq"),
      Replace(kMinimal, "\"special_tokens\": {\"<s>\"", "\"special_tokens\": {\"<t>\""),
      Replace(kMinimal, "\"normalizer\": null", "\"normalizer\": " + std::string(100000, '[') + std::string(100000, ']')),
  };
  for (const std::string& json : cases) {
    auto spec = TokenizerSpecFromHfJson(json);
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << json.substr(0, 300);
  }
}

}  // namespace
}  // namespace ember
