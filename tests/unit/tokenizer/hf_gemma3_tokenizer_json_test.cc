// Gemma 3's SentencePiece-style tokenizer.json (BPE with byte_fallback, a Replace(" " -> U+2581)
// normalizer): ember's reader against Hugging Face `tokenizers` running the same file
// (scripts/make_gemma3_hf_fixtures.py). The file is ~33 MB, so the test rebuilds it from the
// committed vocabulary extract and the committed rest of the file (testdata/gemma3_hf_tokenizer.json),
// checks the rebuild against the converter's digests, and then parses it with the production
// reader. With a directory made by scripts/gguf_to_hf_dir.py in the model cache, its
// tokenizer.json is checked against the same reference ids too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/model_tokenizer.h"
#include "tokenizer_fixtures.h"

namespace ember {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;
using tokenizer_testing::FixturePath;
using tokenizer_testing::IsValidUtf8;
using tokenizer_testing::ReadFileBytes;
using tokenizer_testing::ReadIds;
using tokenizer_testing::ReadRecords;
using tokenizer_testing::ReadVocab;

constexpr const char* kSpaceMark = "\xE2\x96\x81";

std::string Fnv1a64(const std::vector<std::string>& chunks) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const std::string& chunk : chunks) {
    for (unsigned char c : chunk) h = (h ^ c) * 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// Byte offsets of the code points of s.
std::vector<size_t> CodePointStarts(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<uint8_t>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  return starts;
}

// The tokenizer.json, rebuilt by the rules the fixture's generator states (and asserts).
std::string RebuildGemma3TokenizerJson() {
  const Json fixture = Json::parse(ReadFileBytes(FixturePath("gemma3_hf_tokenizer.json")));
  const TokenizerSpec extract = ReadVocab("gemma3_vocab.bin.gz");
  std::vector<std::string> pieces = extract.tokens;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (extract.token_types[i] != TokenizerSpec::kUserDefined) continue;
    std::string& p = pieces[i];
    for (size_t at = p.find(' '); at != std::string::npos; at = p.find(' ', at)) {
      p.replace(at, 1, kSpaceMark);
      at += 3;
    }
  }
  std::unordered_map<std::string, int32_t> index;
  for (size_t i = 0; i < pieces.size(); ++i) index.emplace(pieces[i], static_cast<int32_t>(i));
  EXPECT_EQ(index.size(), pieces.size());

  Json doc = fixture["tokenizer_json"];
  Json vocab = Json::object();
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = i;
  Json merges = Json::array();
  std::vector<std::string> merge_chunks;
  for (const std::string& p : pieces) {
    const std::vector<size_t> starts = CodePointStarts(p);
    for (size_t k = 1; k < starts.size(); ++k) {
      std::string left = p.substr(0, starts[k]), right = p.substr(starts[k]);
      if (!index.count(left) || !index.count(right)) continue;
      merge_chunks.insert(merge_chunks.end(), {left, std::string(1, '\0'), right, std::string(1, '\0')});
      merges.push_back(Json::array({std::move(left), std::move(right)}));
    }
  }
  Json added = Json::array();
  std::vector<std::string> added_chunks;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const int32_t type = extract.token_types[i];
    if (type != TokenizerSpec::kUnknown && type != TokenizerSpec::kControl && type != TokenizerSpec::kUserDefined) {
      continue;
    }
    const bool special = type != TokenizerSpec::kUserDefined;
    added.push_back({{"id", i}, {"content", pieces[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", special}});
    added_chunks.insert(added_chunks.end(), {pieces[i], std::string(1, '\0'), special ? "1" : "0"});
  }
  EXPECT_EQ(merges.size(), fixture["merges"]["count"].get<size_t>());
  EXPECT_EQ(Fnv1a64(merge_chunks), fixture["merges"]["fnv1a64"].get<std::string>());
  EXPECT_EQ(added.size(), fixture["added_tokens"]["count"].get<size_t>());
  EXPECT_EQ(Fnv1a64(added_chunks), fixture["added_tokens"]["fnv1a64"].get<std::string>());
  doc["model"]["vocab"] = std::move(vocab);
  doc["model"]["merges"] = std::move(merges);
  doc["added_tokens"] = std::move(added);
  return doc.dump();
}

const std::string& Gemma3TokenizerJson() {
  static const std::string* text = new std::string(RebuildGemma3TokenizerJson());
  return *text;
}

const Tokenizer& Gemma3Tokenizer() {
  static const Tokenizer* tok = [] {
    auto spec = TokenizerSpecFromHfJson(Gemma3TokenizerJson());
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    auto created = Tokenizer::Create(std::move(spec).value());
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created->release();
  }();
  return *tok;
}

// Compares `tok` with tokenizers' ids on every valid-UTF-8 corpus record, both modes, and checks
// that decoding gives the record back.
void ExpectMatchesReference(const Tokenizer& tok, const char* what) {
  const auto ids = ReadIds("gemma3_hf_ids.bin.gz");
  std::vector<std::string> records;
  for (const auto& r : ReadRecords("corpus.bin.gz")) {
    if (IsValidUtf8(r)) records.push_back(r);
  }
  ASSERT_EQ(records.size(), ids.plain.size());
  size_t mismatches = 0, tokens = 0, lossy = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    for (bool parse_special : {false, true}) {
      const auto& want = parse_special ? ids.special[i] : ids.plain[i];
      tokens += want.size();
      const auto got = tok.Encode(records[i], /*add_special=*/false, parse_special);
      if (got != want && ++mismatches <= 3) {
        size_t k = 0;
        while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
        ADD_FAILURE() << what << " record " << i << " parse_special=" << parse_special << " differs at token "
                      << k << " (" << (k < got.size() ? got[k] : -1) << " vs " << (k < want.size() ? want[k] : -1)
                      << "): " << records[i].substr(0, 100);
      }
      // Lossless except that a typed U+2581 comes back as a space (SentencePiece's decoding).
      const std::string decoded = tok.Decode(got, /*skip_special=*/false);
      if (records[i].find(kSpaceMark) == std::string::npos) {
        EXPECT_EQ(decoded, records[i]) << what << " record " << i;
      } else {
        ++lossy;
      }
    }
  }
  std::printf("[ %s ] %zu records, %zu tokens, %zu mismatches (%zu decodes with a typed U+2581 not compared)\n",
              what, records.size(), tokens, mismatches, lossy);
  EXPECT_EQ(mismatches, 0u);
}

TEST(HfGemma3TokenizerJsonTest, MatchesHuggingFaceTokenizers) {
  ExpectMatchesReference(Gemma3Tokenizer(), "gemma3 tokenizer.json");
}

TEST(HfGemma3TokenizerJsonTest, ReadsTheSentencePieceLayout) {
  auto spec = TokenizerSpecFromHfJson(Gemma3TokenizerJson());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->model, TokenizerSpec::Model::kSentencePieceBpe);
  EXPECT_EQ(spec->flavor, TokenizerSpec::Flavor::kHuggingFace);
  EXPECT_EQ(spec->tokens.size(), 262144u);
  EXPECT_TRUE(spec->add_bos);
  EXPECT_EQ(spec->tokens[spec->bos_id], "<bos>");
  EXPECT_EQ(spec->tokens[spec->unk_id], "<unk>");
  EXPECT_FALSE(spec->add_space_prefix);
  const auto byte_a = std::find(spec->tokens.begin(), spec->tokens.end(), "<0x41>") - spec->tokens.begin();
  EXPECT_EQ(spec->token_types[byte_a], TokenizerSpec::kByte);
  const auto eot = std::find(spec->tokens.begin(), spec->tokens.end(), "<end_of_turn>") - spec->tokens.begin();
  EXPECT_EQ(spec->token_types[eot], TokenizerSpec::kControl);
  EXPECT_EQ(spec->token_types[138], TokenizerSpec::kUserDefined);  // "▁▁"
  EXPECT_EQ(spec->tokens[138], std::string(kSpaceMark) + kSpaceMark);
}

// Where Hugging Face and SentencePiece/llama.cpp part: tokenizers merges space runs by rank (32
// spaces are two 16-space pieces; SentencePiece gives its 31-space piece and "▁b"), matches added tokens in the raw
// text (a typed "▁▁" is the added token, two spaces are merged text), keeps Gemma's "</s>" a
// plain added token (llama.cpp makes it a control token), and decodes added tokens through the
// Replace decoder.
TEST(HfGemma3TokenizerJsonTest, HuggingFaceSemantics) {
  const Tokenizer& tok = Gemma3Tokenizer();
  // tokenizers: [236746, 152, 152, 236763]; sentencepiece: [236746, 167, 518].
  EXPECT_EQ(tok.Encode("a" + std::string(32, ' ') + "b", false, false),
            (std::vector<int32_t>{236746, 152, 152, 236763}));
  const auto typed = tok.Encode(std::string(kSpaceMark) + kSpaceMark + "hi", false, false);
  ASSERT_FALSE(typed.empty());
  EXPECT_EQ(typed[0], 138);
  EXPECT_EQ(tok.Decode(typed, false), "  hi");
  const auto eos_text = tok.Encode("x</s>y", false, /*parse_special=*/false);
  ASSERT_EQ(eos_text.size(), 3u);
  EXPECT_EQ(tok.TokenText(eos_text[1]), "</s>");
  EXPECT_EQ(tok.Decode(eos_text, /*skip_special=*/true), "x</s>y");
  // Control tokens only with parse_special; BOS from the post-processor.
  const auto turn = tok.Encode("<start_of_turn>user\nhi", /*add_special=*/true, /*parse_special=*/true);
  ASSERT_GE(turn.size(), 3u);
  EXPECT_EQ(turn[0], 2);
  EXPECT_EQ(tok.TokenText(turn[1]), "<start_of_turn>");
  EXPECT_NE(tok.Encode("<start_of_turn>", false, false).size(), 1u);
  // A character the vocabulary lacks falls back to bytes, and decodes back.
  const std::string rare = "\xF0\x9F\xAB\xA8\xF0\x9F\xAB\xA8";  // U+1FAE8 twice
  EXPECT_EQ(tok.Decode(tok.Encode(rare, false, false), false), rare);
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// A small document of the same layout, for the shapes ember refuses.
const std::string kSmallSentencePiece = R"({
  "added_tokens": [{"id": 0, "content": "<bos>", "special": true, "normalized": false}],
  "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
  "pre_tokenizer": null,
  "post_processor": null,
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}]},
  "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": null,
            "vocab": {"<bos>": 0, "a": 1, "▁": 2, "▁a": 3, "<0x62>": 4},
            "merges": [["▁", "a"]]}
})";

TEST(HfGemma3TokenizerJsonTest, SmallDocumentEncodes) {
  auto spec = TokenizerSpecFromHfJson(kSmallSentencePiece);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto tok = Tokenizer::Create(std::move(spec).value());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // "b" is no piece: its byte token; " a" merges.
  EXPECT_EQ((*tok)->Encode("a ab", false, true), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ((*tok)->Decode(std::vector<int32_t>{1, 3, 4}, false), "a ab");
}

// Added tokens the way tokenizers matches them (ids from tokenizers 0.23.3 on this document):
// leftmost-longest in one pass ("abcd" is "ab" then text, where llama.cpp's longest-first gives
// "a", "bcd"); a special token left unparsed stays text and hides the "ab" inside it; spaces
// next to an added token are text of their own.
const std::string kOverlapping = R"({
  "added_tokens": [{"id": 0, "content": "<bos>", "special": true, "normalized": false},
                   {"id": 5, "content": "ab", "special": false, "normalized": false},
                   {"id": 6, "content": "bcd", "special": false, "normalized": false},
                   {"id": 7, "content": "<ab>", "special": true, "normalized": false}],
  "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
  "pre_tokenizer": null,
  "post_processor": null,
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}]},
  "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": null,
            "vocab": {"<bos>": 0, "a": 1, "▁": 2, "▁a": 3, "<0x62>": 4, "ab": 5, "bcd": 6, "<ab>": 7,
                      "c": 8, "d": 9, "<": 10, ">": 11, "<0x3C>": 12, "<0x3E>": 13},
            "merges": [["▁", "a"]]}
})";

TEST(HfGemma3TokenizerJsonTest, AddedTokensMatchLikeTokenizers) {
  auto spec = TokenizerSpecFromHfJson(kOverlapping);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto tok = Tokenizer::Create(std::move(spec).value());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  for (bool parse_special : {false, true}) {
    EXPECT_EQ((*tok)->Encode("abcd", false, parse_special), (std::vector<int32_t>{5, 8, 9}));
    EXPECT_EQ((*tok)->Encode("a ab", false, parse_special), (std::vector<int32_t>{1, 2, 5}));
  }
  EXPECT_EQ((*tok)->Encode("<ab>cd", false, false), (std::vector<int32_t>{10, 1, 4, 11, 8, 9}));
  EXPECT_EQ((*tok)->Encode("<ab>cd", false, true), (std::vector<int32_t>{7, 8, 9}));
}

TEST(HfGemma3TokenizerJsonTest, UnsupportedShapesAreUnimplemented) {
  const std::string base = kSmallSentencePiece;
  struct Case {
    std::string json;
    const char* says;
  };
  const std::vector<Case> cases = {
      {Replace(base, "\"pre_tokenizer\": null", R"("pre_tokenizer": {"type": "Metaspace", "replacement": "▁"})"),
       "Metaspace"},
      {Replace(base, R"("normalizer": {"type": "Replace")", R"("normalizer": {"type": "Precompiled")"),
       "Precompiled"},
      {Replace(base, R"({"type": "Fuse"})", R"({"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1})"),
       "Strip"},
      {Replace(base, "\"byte_fallback\": true", "\"byte_fallback\": false"), "byte_fallback"},
      {Replace(base, "\"normalized\": false", "\"normalized\": true"), "normalized"},
      {Replace(base, "\"pre_tokenizer\": null",
               R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated"})"),
       "Split"},
      {Replace(base, "\"type\": \"BPE\"", "\"type\": \"Unigram\""), "Unigram"},
  };
  for (const auto& c : cases) {
    auto spec = TokenizerSpecFromHfJson(c.json);
    ASSERT_FALSE(spec.ok()) << c.says;
    EXPECT_EQ(spec.status().code(), StatusCode::kUnimplemented) << spec.status().ToString();
    EXPECT_THAT(spec.status().message(), HasSubstr(c.says));
  }
}

// The directory scripts/gguf_to_hf_dir.py makes from the real GGUF: its tokenizer.json (read
// with its tokenizer_config.json, as `ember serve DIR` reads them) tokenizes as the reference.
TEST(HfGemma3TokenizerJsonTest, ConvertedDirectoryMatchesHuggingFaceTokenizers) {
  const char* cache = std::getenv("EMBER_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  const std::string dir = (cache && *cache ? std::string(cache) : std::string(home ? home : "/") +
                                                                       "/.cache/ember/models") +
                          "/gemma-3-270m-q4_k_m-hf-f32";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) {
    GTEST_SKIP() << "needs " << dir << "/tokenizer.json (scripts/gguf_to_hf_dir.py --src gemma-3-270m-q4_k_m.gguf)";
  }
  auto tok = LoadModelTokenizer(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->TokenText((*tok)->bos_id()), "<bos>");
  ExpectMatchesReference(**tok, "gemma3 converted directory");
}

}  // namespace
}  // namespace ember
