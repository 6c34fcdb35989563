// Python str semantics over UTF-8 std::string, for the Jinja engine.
//
// Chat templates are rendered by Python's jinja2, where strings are sequences of code points and
// methods such as strip(), split() and upper() follow Python's Unicode rules. Rendering
// byte-identically means reproducing those rules here: lengths and indices count code points,
// "whitespace" is Python's str.isspace() set, and floats print as Python's repr().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::jinja::py {

// Decodes UTF-8. A byte that is not part of a valid sequence becomes U+DC80 + byte (Python's
// "surrogateescape"), so Encode(Decode(s)) == s for any input.
std::u32string Decode(std::string_view s);
std::string Encode(std::u32string_view s);
void AppendUtf8(std::string& out, char32_t c);

// Number of code points.
int64_t Length(std::string_view s);

// Python's str.isspace() for one code point.
bool IsSpace(char32_t c);
// Python's str.isprintable() for one code point (approximate outside the BMP's common blocks).
bool IsPrintable(char32_t c);
// Whether the regex class \w matches the code point (letters, digits and underscore; approximate
// outside the common blocks: punctuation, symbols, combining marks and emoji are excluded).
bool IsWordChar(char32_t c);

// str.strip / lstrip / rstrip. chars == nullopt strips whitespace (IsSpace).
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split / rsplit. sep == nullopt splits on runs of whitespace and drops empty parts.
// maxsplit < 0 means no limit. An empty separator is an error the caller reports.
std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> RSplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
// str.splitlines(keepends) with Python's set of line boundaries.
std::vector<std::string> SplitLines(std::string_view s, bool keepends);
// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts between code points.
std::string Replace(std::string_view s, std::string_view old, std::string_view replacement,
                    int64_t count);
// str.find / rfind over code-point indices; -1 if absent.
int64_t Find(std::string_view s, std::string_view sub);
int64_t RFind(std::string_view s, std::string_view sub);
int64_t Count(std::string_view s, std::string_view sub);

// Case mapping. Covers ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and fullwidth Latin,
// including the one-to-many mappings Python applies there (e.g. "ß".upper() == "SS").
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string SwapCase(std::string_view s);
std::string Title(std::string_view s);       // str.title()
std::string Capitalize(std::string_view s);  // str.capitalize()
bool IsCased(char32_t c);
bool IsUpperChar(char32_t c);
bool IsLowerChar(char32_t c);
// str.islower() / str.isupper(): at least one cased character and none of the other case.
bool IsLower(std::string_view s);
bool IsUpper(std::string_view s);

// repr() of a str: quotes chosen and characters escaped as CPython does.
std::string ReprString(std::string_view s);
// repr() / str() of a float: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string ReprFloat(double v);

// int(s) for base 10 and float(s): surrounding whitespace, a sign and single underscores between
// digits are accepted as Python accepts them. nullopt where Python raises ValueError.
std::optional<int64_t> ParseInt(std::string_view s);
std::optional<double> ParseFloat(std::string_view s);

}  // namespace ember::jinja::py
