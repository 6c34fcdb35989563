// A drafter's token ids mean something only if they mean the same to the target: the two models
// must share their tokenizer's vocabulary, id for id. vocab_size alone does not show it (two
// families can both pad to 32000), so the draft-model loader compares the tokenizers too.
#pragma once

#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace ember::spec {

// OK when both vocabularies hold the same token texts at the same ids and the same BOS and EOS
// ids. Otherwise InvalidArgument naming the first differing id (or BOS/EOS) and both values.
Status CheckSameVocabulary(const TokenizerSpec& target, const TokenizerSpec& drafter);

// The tokenizers of two model paths (a .gguf file or a model directory, as LoadModelTokenizer)
// compared with CheckSameVocabulary. When neither carries a tokenizer (token-id-only models,
// such as test fixtures) there is nothing to compare and it is OK; when only one does, an error.
Status CheckSameTokenizer(const std::string& target_path, const std::string& drafter_path);

}  // namespace ember::spec
