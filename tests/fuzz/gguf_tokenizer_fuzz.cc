// A GGUF file's tokenizer (tokenizer/model_tokenizer.h: the tokenizer.ggml.* metadata), built
// and run: what `ember serve some.gguf` does before anything else. Beyond "no crash, no sanitizer
// report" (a malformed vocabulary must be refused with a Status or tokenize safely): the ids
// Encode returns are inside the vocabulary, and any ids decode.
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "file_input.h"
#include "formats/gguf.h"
#include "tokenizer/model_tokenizer.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = ember::GgufFile::Open(ember::fuzz::AsFile(data, size));
  if (!file.ok()) return 0;
  auto spec = ember::TokenizerSpecFromGguf(**file);
  if (!spec.ok()) return 0;
  auto tokenizer = ember::Tokenizer::Create(std::move(*spec));
  if (!tokenizer.ok()) return 0;
  const ember::Tokenizer& tok = **tokenizer;
  const int32_t n = tok.vocab_size();
  for (std::string_view sample : {std::string_view("Hello world 123, it's  caf\xC3\xA9\n<s></s><0x41>\xF0\x9F\x98\x80"),
                                  std::string_view("\xFF\xC3 ab\xE2\x82 \xE2\x96\x81x")}) {
    for (bool parse_special : {false, true}) {
      const std::vector<int32_t> ids = tok.Encode(sample, /*add_special=*/true, parse_special);
      for (int32_t id : ids) {
        if (id < 0 || id >= n) __builtin_trap();
      }
      (void)tok.Decode(ids, /*skip_special=*/parse_special);
    }
  }
  std::vector<int32_t> all(static_cast<size_t>(std::min(n, 4096)));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  all.push_back(-1);
  all.push_back(n);
  (void)tok.Decode(all, false);
  return 0;
}
