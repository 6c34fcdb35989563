// Unicode facts the tokenizers need: UTF-8 decoding that behaves like llama.cpp's on bad input,
// and the general category / White_Space property of a code point.
//
// The category table is src/tokenizer/unicode_tables.h, generated from Unicode 15.1 by
// scripts/gen_unicode_tables.py (15.1 because that is what llama.cpp's tokenizer uses, and ember
// is checked token for token against it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::unicode {

// Unicode general categories. The order is the index used by unicode_tables.h.
enum class Category : uint8_t {
  kCn, kLu, kLl, kLt, kLm, kLo, kMn, kMc, kMe, kNd, kNl, kNo, kPc, kPd, kPs,
  kPe, kPi, kPf, kPo, kSm, kSc, kSk, kSo, kZs, kZl, kZp, kCc, kCf, kCs, kCo,
};

// Bit flags for the regex classes the pre-tokenizers use.
enum Flag : uint16_t {
  kLetter = 1 << 0,      // \p{L}
  kNumber = 1 << 1,      // \p{N}
  kMark = 1 << 2,        // \p{M}
  kPunctuation = 1 << 3, // \p{P}
  kSymbol = 1 << 4,      // \p{S}
  kSeparator = 1 << 5,   // \p{Z}
  kOther = 1 << 6,       // \p{C} except Cn
  kUnassigned = 1 << 7,  // Cn
  kWhitespace = 1 << 8,  // \s: the White_Space property
};

// The replacement character, what invalid UTF-8 decodes to.
inline constexpr uint32_t kReplacement = 0xFFFD;

Category CategoryOf(uint32_t cp);

// The flags of `cp`; 0 for values past U+10FFFF (which only come from malformed input).
uint16_t FlagsOf(uint32_t cp);

inline bool IsLetter(uint32_t cp) { return FlagsOf(cp) & kLetter; }
inline bool IsNumber(uint32_t cp) { return FlagsOf(cp) & kNumber; }
inline bool IsWhitespace(uint32_t cp) { return FlagsOf(cp) & kWhitespace; }

// Length of the UTF-8 sequence that starts with `lead`, judged from its top four bits only
// (1 for ASCII and for stray continuation bytes, 2, 3 or 4 otherwise). This is how llama.cpp
// cuts text into symbols before merging, so SentencePiece-style merging must use exactly it.
size_t SequenceLength(uint8_t lead);

// Decodes UTF-8 to code points. A malformed sequence decodes to U+FFFD and consumes one byte,
// as llama.cpp's decoder does (ember must see the same code points to split text the same way).
std::vector<uint32_t> DecodeUtf8(std::string_view text);

// Appends the UTF-8 encoding of `cp`; values past U+10FFFF are written as U+FFFD.
void AppendUtf8(uint32_t cp, std::string* out);
std::string EncodeUtf8(uint32_t cp);

// The number of leading bytes of `bytes` that form complete UTF-8 sequences; the rest is a
// prefix of a multi-byte character that more bytes may complete. Malformed bytes count as
// complete (they can never become valid), so streaming output never stalls on them.
size_t CompleteUtf8Prefix(std::string_view bytes);

// `bytes` with every ill-formed sequence replaced by U+FFFD, one per maximal subpart (Unicode's
// recommended practice, which Python's decode(errors="replace") and nlohmann's JSON writer follow):
// the text a client receives for these bytes. Valid UTF-8 comes back unchanged.
std::string ToValidUtf8(std::string_view bytes);

}  // namespace ember::unicode
