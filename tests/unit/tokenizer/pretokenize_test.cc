// The hand-written pre-tokenizer regexes and the Unicode helpers under them.
#include "tokenizer/pretokenize.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/unicode.h"

namespace ember {
namespace {

using tokenizer_internal::PreTokenizer;
using Words = std::vector<std::string>;

Words Split(PreTokenizer kind, const std::string& text) {
  const auto cps = unicode::DecodeUtf8(text);
  Words words;
  size_t pos = 0;
  for (size_t len : tokenizer_internal::SplitWords(kind, cps)) {
    std::string w;
    for (size_t i = pos; i < pos + len; ++i) unicode::AppendUtf8(cps[i], &w);
    words.push_back(w);
    pos += len;
  }
  EXPECT_EQ(pos, cps.size());
  return words;
}

TEST(PreTokenizeTest, Gpt2) {
  const auto k = PreTokenizer::kGpt2;
  EXPECT_EQ(Split(k, "Hello world's  end"), (Words{"Hello", " world", "'s", " ", " end"}));
  EXPECT_EQ(Split(k, "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Split(k, "x  "), (Words{"x", "  "}));
  EXPECT_EQ(Split(k, "12345 678"), (Words{"12345", " 678"}));
  EXPECT_EQ(Split(k, "\tword"), (Words{"\t", "word"}));
  EXPECT_EQ(Split(k, "don'T ?!x"), (Words{"don", "'", "T", " ?!", "x"}));
  EXPECT_EQ(Split(k, "日本語 テスト"), (Words{"日本語", " テスト"}));
  EXPECT_EQ(Split(k, "😀😀 😀"), (Words{"😀😀", " 😀"}));
}

TEST(PreTokenizeTest, SmolLmIsolatesDigitsFirst) {
  const auto k = PreTokenizer::kDigitsThenGpt2;
  EXPECT_EQ(Split(k, "12345"), (Words{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(Split(k, " 123"), (Words{" ", "1", "2", "3"}));
  EXPECT_EQ(Split(k, "abc4def"), (Words{"abc", "4", "def"}));
  EXPECT_EQ(Split(k, "x ٣½"), (Words{"x", " ", "٣", "½"}));  // every \p{N}, not only 0-9
}

TEST(PreTokenizeTest, Llama3AndQwen2) {
  const auto k = PreTokenizer::kLlama3;
  EXPECT_EQ(Split(k, "Hello WORLD'S\r\n\r\n  foo!!\n"),
            (Words{"Hello", " WORLD", "'S", "\r\n\r\n", " ", " foo", "!!\n"}));
  EXPECT_EQ(Split(k, "\tword"), (Words{"\tword"}));
  EXPECT_EQ(Split(k, "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(Split(k, "a \n b"), (Words{"a", " \n", " b"}));
  EXPECT_EQ(Split(PreTokenizer::kQwen2, "1234"), (Words{"1", "2", "3", "4"}));
}

TEST(PreTokenizeTest, NamesLikeLlamaCpp) {
  using tokenizer_internal::LookUpPreTokenizer;
  EXPECT_EQ(LookUpPreTokenizer("smollm")->kind, PreTokenizer::kDigitsThenGpt2);
  EXPECT_EQ(LookUpPreTokenizer("gpt-2")->kind, PreTokenizer::kGpt2);
  EXPECT_TRUE(LookUpPreTokenizer("llama-bpe")->ignore_merges);
  EXPECT_FALSE(LookUpPreTokenizer("qwen2")->ignore_merges);
  EXPECT_FALSE(LookUpPreTokenizer("default").has_value());
}

TEST(UnicodeTest, Categories) {
  using unicode::Category;
  EXPECT_EQ(unicode::CategoryOf('A'), Category::kLu);
  EXPECT_EQ(unicode::CategoryOf(0x4E00), Category::kLo);
  EXPECT_EQ(unicode::CategoryOf(0x0661), Category::kNd);
  EXPECT_EQ(unicode::CategoryOf(0x0301), Category::kMn);
  EXPECT_EQ(unicode::CategoryOf(0x1F600), Category::kSo);
  EXPECT_EQ(unicode::CategoryOf(0x0378), Category::kCn);
  EXPECT_EQ(unicode::CategoryOf(0x2FFC), Category::kSo);  // assigned in Unicode 15.1
  EXPECT_TRUE(unicode::IsWhitespace(0x3000));
  EXPECT_TRUE(unicode::IsWhitespace(0x85));
  EXPECT_FALSE(unicode::IsWhitespace(0x200B));
  EXPECT_TRUE(unicode::IsNumber(0x00BD));
  EXPECT_EQ(unicode::FlagsOf(0x110000), 0);
}

TEST(UnicodeTest, DecodesBadUtf8LikeLlamaCpp) {
  using V = std::vector<uint32_t>;
  EXPECT_EQ(unicode::DecodeUtf8("a\xC3\xA9"), (V{'a', 0xE9}));
  EXPECT_EQ(unicode::DecodeUtf8("\x80z"), (V{0xFFFD, 'z'}));
  EXPECT_EQ(unicode::DecodeUtf8("\xE2\x82"), (V{0xFFFD, 0xFFFD}));
  EXPECT_EQ(unicode::DecodeUtf8("\xC0\x80"), (V{0}));  // overlong, accepted as llama.cpp does
  EXPECT_EQ(unicode::DecodeUtf8("\xFF"), (V{0xFFFD}));
  EXPECT_EQ(unicode::EncodeUtf8(0x1F600), "\xF0\x9F\x98\x80");
}

TEST(UnicodeTest, CompletePrefix) {
  EXPECT_EQ(unicode::CompleteUtf8Prefix("ab"), 2u);
  EXPECT_EQ(unicode::CompleteUtf8Prefix("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(unicode::CompleteUtf8Prefix("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(unicode::CompleteUtf8Prefix("\xC3"), 0u);
  EXPECT_EQ(unicode::CompleteUtf8Prefix("\x80\x80\x80\x80"), 4u);
  EXPECT_EQ(unicode::CompleteUtf8Prefix("\xFF"), 1u);
}

}  // namespace
}  // namespace ember
