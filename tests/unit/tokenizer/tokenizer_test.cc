// Unit tests on hand-made vocabularies: each rule of the two algorithms (merge order, byte
// fallback, special-token matching, the space prefix, decoding, streaming) in isolation.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace ember {
namespace {

using Ids = std::vector<int32_t>;

// Byte-level vocabulary: every single byte-encoded character used below, then merged pieces.
TokenizerSpec TinyBpe() {
  TokenizerSpec s;
  s.model = TokenizerSpec::Model::kBytePairGpt2;
  s.pre_tokenizer = "gpt2";
  s.tokens = {"a", "b", "c", "Ġ", "ab", "abc", "Ġa", "<|x|>", "<u>", "1", "2", "Ċ", "Ã", "©", "é"};
  s.token_types.assign(s.tokens.size(), TokenizerSpec::kNormal);
  s.token_types[7] = TokenizerSpec::kControl;
  s.token_types[8] = TokenizerSpec::kUserDefined;
  s.merges = {"a b", "ab c", "Ġ a"};
  s.bos_id = 7;
  s.eos_id = 7;
  return s;
}

TEST(BpeTokenizerTest, MergesByRankNotByPosition) {
  auto tok = Tokenizer::Create(TinyBpe());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // "abc": a+b (rank 0) then ab+c (rank 1). " ab": a+b (rank 0) beats Ġ+a (rank 2), after which
  // no rule joins Ġ and ab.
  EXPECT_EQ((*tok)->Encode("abc ab", false, false), (Ids{5, 3, 4}));
  EXPECT_EQ((*tok)->Encode(" a", false, false), (Ids{6}));
  EXPECT_EQ((*tok)->Decode(Ids{5, 3, 4}, false), "abc ab");
}

TEST(BpeTokenizerTest, BytesOfMultiByteCharacters) {
  auto tok = Tokenizer::Create(TinyBpe());
  ASSERT_TRUE(tok.ok());
  // "é" is bytes C3 A9, byte-encoded as "Ã" and "©"; no merge joins them.
  EXPECT_EQ((*tok)->Encode("\xC3\xA9", false, false), (Ids{12, 13}));
  EXPECT_EQ((*tok)->Decode(Ids{12, 13}, false), "\xC3\xA9");
}

TEST(BpeTokenizerTest, SpecialTokens) {
  auto spec = TinyBpe();
  spec.add_bos = true;
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok());
  // Control tokens only with parse_special; user-defined ones always.
  EXPECT_EQ((*tok)->Encode("a<u>b", false, false), (Ids{0, 8, 1}));
  EXPECT_EQ((*tok)->Encode("a<|x|>", true, true), (Ids{7, 0, 7}));
  const Ids plain = (*tok)->Encode("a<|x|>", false, false);
  EXPECT_NE(plain, (Ids{0, 7}));
  EXPECT_EQ((*tok)->Decode(Ids{7, 0, 8, 7}, /*skip_special=*/true), "a<u>");
  EXPECT_EQ((*tok)->Decode(Ids{7, 0, 8, 7}, /*skip_special=*/false), "<|x|>a<u><|x|>");
  EXPECT_TRUE((*tok)->IsSpecial(7));
  EXPECT_FALSE((*tok)->IsSpecial(8));
  EXPECT_EQ((*tok)->TokenText(3), "Ġ");
  EXPECT_EQ((*tok)->TokenPiece(3, false), " ");
  EXPECT_EQ((*tok)->TokenId("abc"), 5);
  EXPECT_FALSE((*tok)->TokenId("zzz").has_value());
}

TEST(BpeTokenizerTest, LongestSpecialTokenWins) {
  auto spec = TinyBpe();
  spec.tokens.push_back("<u><u>");
  spec.token_types.push_back(TokenizerSpec::kControl);
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ((*tok)->Encode("<u><u><u>", false, true), (Ids{15, 8}));
  EXPECT_EQ((*tok)->Encode("<u><u><u>", false, false), (Ids{8, 8, 8}));
}

TEST(BpeTokenizerTest, ControlLookingNamesBecomeControl) {
  // llama.cpp treats "</s>" and friends as control tokens even when typed user-defined.
  auto spec = TinyBpe();
  spec.tokens.push_back("</s>");
  spec.token_types.push_back(TokenizerSpec::kUserDefined);
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok());
  EXPECT_TRUE((*tok)->IsSpecial(15));
  EXPECT_EQ((*tok)->Decode(Ids{0, 15}, true), "a");
}

TEST(BpeTokenizerTest, CreateRejectsBadSpecs) {
  auto bad = [](auto mutate) {
    TokenizerSpec s = TinyBpe();
    mutate(s);
    return Tokenizer::Create(s).status();
  };
  EXPECT_EQ(bad([](TokenizerSpec& s) { s.tokens.clear(); }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](TokenizerSpec& s) { s.scores = {1.0f}; }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](TokenizerSpec& s) { s.token_types.pop_back(); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](TokenizerSpec& s) { s.bos_id = 99; }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](TokenizerSpec& s) { s.bos_id = -1, s.add_bos = true; }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](TokenizerSpec& s) { s.merges.push_back("ab"); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](TokenizerSpec& s) { s.pre_tokenizer = "default"; }).code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(TokenizerSpec::ModelFromGgufName("bert").status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(*TokenizerSpec::ModelFromGgufName("llama"), TokenizerSpec::Model::kSentencePieceBpe);
}

// SentencePiece vocabulary: <unk>, <s>, </s>, 256 byte tokens, then scored pieces.
TokenizerSpec TinySpm() {
  TokenizerSpec s;
  s.model = TokenizerSpec::Model::kSentencePieceBpe;
  s.pre_tokenizer = "default";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {TokenizerSpec::kUnknown, TokenizerSpec::kControl, TokenizerSpec::kControl};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    s.tokens.push_back(name);
    s.token_types.push_back(TokenizerSpec::kByte);
  }
  s.scores.assign(s.tokens.size(), 0.0f);
  const std::vector<std::pair<const char*, float>> pieces = {
      {"\xE2\x96\x81", -1}, {"a", -2}, {"b", -3}, {"ab", -9}, {"\xE2\x96\x81" "a", -4},
      {"\xE2\x96\x81" "ab", -5}, {"bb", -6}, {"\n\n", -1000}};
  for (const auto& [text, score] : pieces) {
    s.tokens.push_back(text);
    s.scores.push_back(score);
    s.token_types.push_back(TokenizerSpec::kNormal);
  }
  s.token_types.back() = TokenizerSpec::kUserDefined;  // "\n\n", as Gemma has
  s.bos_id = 1;
  s.eos_id = 2;
  s.unk_id = 0;
  s.add_bos = true;
  return s;
}
constexpr int32_t kSpace = 259, kA = 260, kB = 261, kAB = 262, kSpaceA = 263, kSpaceAB = 264,
                  kBB = 265, kNewlines = 266;

TEST(SpmTokenizerTest, MergesHighestScoreFirst) {
  auto tok = Tokenizer::Create(TinySpm());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // "▁abb": the pairs are ▁a (-4), ab (-9), bb (-6). ▁a merges first; then ▁a|b = "▁ab" (-5)
  // beats b|b (-6), leaving a lone b. Without the space, bb (-6) beats ab (-9).
  EXPECT_EQ((*tok)->Encode(" abb", false, false), (Ids{kSpaceAB, kB}));
  EXPECT_EQ((*tok)->Encode("abb", true, false), (Ids{1, kA, kBB}));
}

TEST(SpmTokenizerTest, ByteFallbackAndUserDefined) {
  auto tok = Tokenizer::Create(TinySpm());
  ASSERT_TRUE(tok.ok());
  // "é" is not a piece: its two bytes become <0xC3> <0xA9> (ids 3 + byte).
  EXPECT_EQ((*tok)->Encode("a\xC3\xA9", false, false), (Ids{kA, 3 + 0xC3, 3 + 0xA9}));
  // "\n\n" is user-defined: cut out before merging, even without parse_special.
  EXPECT_EQ((*tok)->Encode("a\n\n\nb", false, false), (Ids{kA, kNewlines, 3 + '\n', kB}));
  EXPECT_EQ((*tok)->Decode(Ids{kA, 3 + 0xC3, 3 + 0xA9, kNewlines}, true), "a\xC3\xA9\n\n");
}

// A GGUF may mark any text as a byte token; one that does not spell <0xNN> (std::stoi threw on
// it, taking the loader down) decodes to nothing.
TEST(SpmTokenizerTest, MalformedByteTokensDecodeToNothing) {
  TokenizerSpec spec = TinySpm();
  const size_t first = spec.tokens.size();
  for (const char* text : {"<0xZZ>", "<0x-1>", "<0x4G>", "<0x41]", "<0x>"}) {
    spec.tokens.push_back(text);
    spec.scores.push_back(0.0f);
    spec.token_types.push_back(TokenizerSpec::kByte);
  }
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  for (size_t id = first; id < spec.tokens.size(); ++id) {
    EXPECT_EQ((*tok)->Decode(Ids{static_cast<int32_t>(id)}, false), "") << spec.tokens[id];
  }
}

TEST(SpmTokenizerTest, SpacePrefixAndItsRemoval) {
  auto spec = TinySpm();
  spec.add_space_prefix = true;
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok());
  // The prefix goes before the text at the start and after each special token.
  const Ids ids = (*tok)->Encode("ab</s>ab", true, true);
  EXPECT_EQ(ids, (Ids{1, kSpaceAB, 2, kSpaceAB}));
  EXPECT_EQ((*tok)->Decode(ids, false), "<s>ab</s>ab");
  EXPECT_EQ((*tok)->Decode(ids, true), "abab");
  EXPECT_EQ((*tok)->Decode(Ids{kSpaceA, kSpaceA}, true), "a a");
  for (const std::string text : {"ab", " ab", "  a b ", "</s> a"}) {
    EXPECT_EQ((*tok)->Decode((*tok)->Encode(text, true, true), true),
              text == "</s> a" ? " a" : text);
  }
}

TEST(IncrementalDetokenizerTest, HoldsBackIncompleteCharacters) {
  auto tok = Tokenizer::Create(TinySpm());
  ASSERT_TRUE(tok.ok());
  IncrementalDetokenizer detok(tok->get());
  EXPECT_EQ(detok.Add(1), "");  // <s>, skipped
  EXPECT_EQ(detok.Add(kA), "a");
  // "😀" = F0 9F 98 80, one byte token at a time.
  EXPECT_EQ(detok.Add(3 + 0xF0), "");
  EXPECT_EQ(detok.Add(3 + 0x9F), "");
  EXPECT_EQ(detok.Add(3 + 0x98), "");
  EXPECT_EQ(detok.pending_bytes(), 3u);
  EXPECT_EQ(detok.Add(3 + 0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(detok.Add(kSpaceA), " a");
  // An unfinished character at the end comes out of Flush as its raw bytes.
  EXPECT_EQ(detok.Add(3 + 0xE4), "");
  EXPECT_EQ(detok.Flush(), "\xE4");
  // A byte that can never start a character is not held back.
  EXPECT_EQ(detok.Add(3 + 0xFF), "\xFF");
}

TEST(IncrementalDetokenizerTest, SpacePrefixRuleMatchesDecode) {
  auto spec = TinySpm();
  spec.add_space_prefix = true;
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok());
  const Ids ids = {1, kSpaceA, kSpaceA, 2, kSpaceAB};
  IncrementalDetokenizer detok(tok->get(), /*skip_special=*/true);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.Add(id);
  streamed += detok.Flush();
  EXPECT_EQ(streamed, (*tok)->Decode(ids, true));
  EXPECT_EQ(streamed, "a aab");
}

}  // namespace
}  // namespace ember
