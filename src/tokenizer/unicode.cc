#include "tokenizer/unicode.h"

#include <array>
#include <memory>

#include "tokenizer/unicode_tables.h"

namespace ember::unicode {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

uint16_t FlagsOfCategory(Category c) {
  switch (c) {
    case Category::kLu: case Category::kLl: case Category::kLt: case Category::kLm:
    case Category::kLo:
      return kLetter;
    case Category::kMn: case Category::kMc: case Category::kMe:
      return kMark;
    case Category::kNd: case Category::kNl: case Category::kNo:
      return kNumber;
    case Category::kPc: case Category::kPd: case Category::kPs: case Category::kPe:
    case Category::kPi: case Category::kPf: case Category::kPo:
      return kPunctuation;
    case Category::kSm: case Category::kSc: case Category::kSk: case Category::kSo:
      return kSymbol;
    case Category::kZs: case Category::kZl: case Category::kZp:
      return kSeparator;
    case Category::kCc: case Category::kCf: case Category::kCs: case Category::kCo:
      return kOther;
    case Category::kCn:
      return kUnassigned;
  }
  return kUnassigned;
}

// PropList.txt, White_Space (stable since Unicode 6.3).
constexpr uint32_t kWhiteSpace[] = {
    0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
    0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
};

// One entry per code point (2.2 MB, built once): the pre-tokenizers ask for every character of
// every input, and a flat array is the cheapest answer.
struct Tables {
  std::unique_ptr<uint8_t[]> category;
  std::unique_ptr<uint16_t[]> flags;

  Tables()
      : category(new uint8_t[kMaxCodePoint + 1]), flags(new uint16_t[kMaxCodePoint + 1]) {
    using internal::kCategoryRunCount;
    using internal::kCategoryRuns;
    for (int i = 0; i < kCategoryRunCount; ++i) {
      const uint32_t end = i + 1 < kCategoryRunCount ? kCategoryRuns[i + 1].first
                                                     : kMaxCodePoint + 1;
      const auto cat = static_cast<Category>(kCategoryRuns[i].category);
      const uint16_t f = FlagsOfCategory(cat);
      for (uint32_t cp = kCategoryRuns[i].first; cp < end; ++cp) {
        category[cp] = kCategoryRuns[i].category;
        flags[cp] = f;
      }
    }
    for (uint32_t cp : kWhiteSpace) flags[cp] |= kWhitespace;
  }
};

const Tables& GetTables() {
  static const Tables* tables = new Tables();  // never destroyed: used from static contexts
  return *tables;
}

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

Category CategoryOf(uint32_t cp) {
  if (cp > kMaxCodePoint) return Category::kCn;
  return static_cast<Category>(GetTables().category[cp]);
}

uint16_t FlagsOf(uint32_t cp) {
  if (cp > kMaxCodePoint) return 0;
  return GetTables().flags[cp];
}

size_t SequenceLength(uint8_t lead) {
  static constexpr std::array<uint8_t, 16> kByHighNibble = {1, 1, 1, 1, 1, 1, 1, 1,
                                                           1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

std::vector<uint32_t> DecodeUtf8(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b0 = s[i];
    // Like llama.cpp, this checks the lead byte's pattern and that enough continuation bytes
    // follow, and nothing else: overlong forms and surrogates decode to their (odd) values.
    size_t len = 0;
    uint32_t cp = 0;
    if (b0 < 0x80) {
      len = 1;
      cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2;
      cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3;
      cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4;
      cp = b0 & 0x07;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = IsContinuation(s[i + k]);
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (!ok) {
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > kMaxCodePoint) cp = kReplacement;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(uint32_t cp) {
  std::string out;
  AppendUtf8(cp, &out);
  return out;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  // A character is at most 4 bytes, so only a lead byte among the last 3 can be waiting.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(bytes[n - back]);
    if (IsContinuation(b)) continue;
    size_t need = 1;
    if (b >= 0xC2 && b <= 0xDF) need = 2;
    else if (b >= 0xE0 && b <= 0xEF) need = 3;
    else if (b >= 0xF0 && b <= 0xF4) need = 4;
    return back < need ? n - back : n;
  }
  return n;
}

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    const auto lead = static_cast<uint8_t>(bytes[i]);
    if (lead < 0x80) {
      out.push_back(static_cast<char>(lead));
      ++i;
      continue;
    }
    // The sequence length and the range of the second byte (which rules out overlong forms,
    // surrogates and values past U+10FFFF); later bytes are any continuation byte.
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      len = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      len = 3;
      if (lead == 0xE0) lo = 0xA0;
      if (lead == 0xED) hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      len = 4;
      if (lead == 0xF0) lo = 0x90;
      if (lead == 0xF4) hi = 0x8F;
    }
    size_t good = 1;  // bytes of the sequence seen valid so far, the lead included
    while (len > 0 && good < len && i + good < n) {
      const auto b = static_cast<uint8_t>(bytes[i + good]);
      if (good == 1 ? (b < lo || b > hi) : !IsContinuation(b)) break;
      ++good;
    }
    if (len > 0 && good == len) {
      out.append(bytes.substr(i, len));
    } else {
      AppendUtf8(kReplacement, &out);  // one for the maximal subpart: the lead and what fitted
    }
    i += good;
  }
  return out;
}

}  // namespace ember::unicode
