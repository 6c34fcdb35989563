// The tokenizer that belongs to a model: from a GGUF file's tokenizer.ggml.* metadata, or from
// a Hugging Face model directory's tokenizer.json.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace ember {

// Reads tokenizer.ggml.{model, pre, tokens, scores, token_type, merges, *_token_id,
// add_bos_token, add_eos_token, add_space_prefix}; missing optional keys take llama.cpp's defaults.
Expected<TokenizerSpec> TokenizerSpecFromGguf(const GgufFile& file);

// `model_path` is a .gguf file or a directory with tokenizer.json.
Expected<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& model_path);

// The model's chat template source: tokenizer.chat_template in a GGUF, or chat_template.jinja /
// tokenizer_config.json's "chat_template" in a model directory. NotFound if it carries none.
Expected<std::string> LoadModelChatTemplateSource(const std::string& model_path);

}  // namespace ember
