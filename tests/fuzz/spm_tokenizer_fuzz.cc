// SentencePiece-style BPE with byte fallback (Gemma 3's 262,144 tokens, thousands of them
// user-defined); the checks are tokenizer_fuzz.h's.
#include "tokenizer_fuzz.h"

// Loads the vocabulary before the first input, so that its seconds under ASan are not taken for a
// slow input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)ember::fuzz::FixtureTokenizer("gemma3_vocab.bin.gz");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ember::fuzz::FuzzTokenizer(ember::fuzz::FixtureTokenizer("gemma3_vocab.bin.gz"), /*sentencepiece=*/true,
                                    data, size);
}
