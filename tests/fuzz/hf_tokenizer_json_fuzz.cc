// Hugging Face tokenizer.json (tokenizer/hf_tokenizer_json.h), then the tokenizer it describes:
// what a model directory from anywhere feeds ember. Beyond "no crash, no sanitizer report": a
// spec the reader accepts either builds a Tokenizer or is refused with a Status, and the tokenizer
// it builds encodes to ids inside its vocabulary and decodes any ids.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = ember::TokenizerSpecFromHfJson(text);
  if (!spec.ok()) return 0;
  auto tokenizer = ember::Tokenizer::Create(std::move(*spec));
  if (!tokenizer.ok()) return 0;
  const ember::Tokenizer& tok = **tokenizer;
  const int32_t n = tok.vocab_size();
  for (std::string_view sample : {std::string_view("Hello world 123, it's  caf\xC3\xA9\n\t<|endoftext|>\xF0\x9F\x98\x80"),
                                  std::string_view("\xFF\xC3 ab\xE2\x82"), text.substr(0, 64)}) {
    for (bool parse_special : {false, true}) {
      const std::vector<int32_t> ids = tok.Encode(sample, /*add_special=*/true, parse_special);
      for (int32_t id : ids) {
        if (id < 0 || id >= n) __builtin_trap();
      }
      (void)tok.Decode(ids, /*skip_special=*/parse_special);
    }
  }
  const std::vector<int32_t> odd_ids = {-7, -1, 0, n - 1, n, n + 1, 1 << 30};
  (void)tok.Decode(odd_ids, false);
  return 0;
}
