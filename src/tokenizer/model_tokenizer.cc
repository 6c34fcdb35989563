#include "tokenizer/model_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/hf_tokenizer_json.h"

namespace ember {

Expected<TokenizerSpec> TokenizerSpecFromGguf(const GgufFile& file) {
  TokenizerSpec spec;
  const auto model = file.GetString("tokenizer.ggml.model");
  if (!model) return InvalidArgument(fmt::format("{}: no tokenizer.ggml.model; the file carries no tokenizer", file.path()));
  EMBER_ASSIGN_OR_RETURN(spec.model, TokenizerSpec::ModelFromGgufName(*model));
  spec.pre_tokenizer = std::string(file.GetString("tokenizer.ggml.pre").value_or("default"));
  const auto tokens = file.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens) return InvalidArgument(fmt::format("{}: tokenizer.ggml.tokens is missing", file.path()));
  spec.tokens.assign(tokens->begin(), tokens->end());
  if (auto scores = file.GetFloatArray("tokenizer.ggml.scores")) spec.scores = std::move(*scores);
  if (auto types = file.GetIntArray("tokenizer.ggml.token_type")) spec.token_types.assign(types->begin(), types->end());
  if (auto merges = file.GetStringArray("tokenizer.ggml.merges")) spec.merges.assign(merges->begin(), merges->end());
  auto id = [&](const char* key) { return static_cast<int32_t>(file.GetInt(key).value_or(-1)); };
  spec.bos_id = id("tokenizer.ggml.bos_token_id");
  spec.eos_id = id("tokenizer.ggml.eos_token_id");
  spec.unk_id = id("tokenizer.ggml.unknown_token_id");
  spec.pad_id = id("tokenizer.ggml.padding_token_id");
  spec.add_bos = file.GetBool("tokenizer.ggml.add_bos_token").value_or(false);
  spec.add_eos = file.GetBool("tokenizer.ggml.add_eos_token").value_or(false);
  spec.add_space_prefix = file.GetBool("tokenizer.ggml.add_space_prefix").value_or(false);
  return spec;
}

namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A tokenizer_config.json special-token entry: a string or an AddedToken object {"content": ...}.
std::string SpecialTokenText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

// bos_token / eos_token of tokenizer_config.json name the ids chat templates see as bos_token and
// eos_token (transformers' tokenizer.bos_token); whether BOS is prepended stays the
// post-processor's (tokenizer.json), as in a fast tokenizer. A token the vocabulary lacks is an error.
Status ApplyHfTokenizerConfig(const std::filesystem::path& path, TokenizerSpec* spec) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return Status::Ok();
  const auto json = nlohmann::json::parse(ReadFile(path), nullptr, false);
  if (json.is_discarded() || !json.is_object()) return InvalidArgument(fmt::format("{}: not a JSON object", path.string()));
  for (const auto& [key, id] : {std::pair<const char*, int32_t*>{"bos_token", &spec->bos_id}, {"eos_token", &spec->eos_id}}) {
    if (!json.contains(key) || json[key].is_null()) continue;
    const std::string text = SpecialTokenText(json[key]);
    const auto it = std::find(spec->tokens.begin(), spec->tokens.end(), text);
    if (text.empty() || it == spec->tokens.end()) {
      return InvalidArgument(fmt::format("{}: {} {} is not a token of tokenizer.json", path.string(), key,
                                         json[key].dump()));
    }
    *id = static_cast<int32_t>(it - spec->tokens.begin());
  }
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& model_path) {
  std::error_code error;
  if (std::filesystem::is_regular_file(model_path, error)) {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(model_path));
    EMBER_ASSIGN_OR_RETURN(TokenizerSpec spec, TokenizerSpecFromGguf(*file));
    return Tokenizer::Create(spec);
  }
  const std::filesystem::path json = std::filesystem::path(model_path) / "tokenizer.json";
  if (!std::filesystem::exists(json, error)) {
    return NotFound(fmt::format("{} has no tokenizer.json; pass token ids with --prompt-ids instead", model_path));
  }
  EMBER_ASSIGN_OR_RETURN(TokenizerSpec spec, LoadHfTokenizerJson(json));
  EMBER_RETURN_IF_ERROR(ApplyHfTokenizerConfig(std::filesystem::path(model_path) / "tokenizer_config.json", &spec));
  return Tokenizer::Create(spec);
}

Expected<std::string> LoadModelChatTemplateSource(const std::string& model_path) {
  std::error_code error;
  if (std::filesystem::is_regular_file(model_path, error)) {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(model_path));
    const auto source = file->GetString("tokenizer.chat_template");
    if (!source) {
      return NotFound(fmt::format("{} carries no chat template (tokenizer.chat_template); use a plain --prompt",
                                  model_path));
    }
    return std::string(*source);
  }
  const std::filesystem::path dir(model_path);
  if (std::filesystem::exists(dir / "chat_template.jinja", error)) return ReadFile(dir / "chat_template.jinja");
  if (std::filesystem::exists(dir / "tokenizer_config.json", error)) {
    const auto json = nlohmann::json::parse(ReadFile(dir / "tokenizer_config.json"), nullptr, false);
    if (json.is_object() && json.contains("chat_template") && json["chat_template"].is_string()) {
      return json["chat_template"].get<std::string>();
    }
  }
  return NotFound(fmt::format("{} carries no chat template; use a plain --prompt", model_path));
}

}  // namespace ember
