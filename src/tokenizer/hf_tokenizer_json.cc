#include "tokenizer/hf_tokenizer_json.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>

namespace ember {
namespace {

using Json = nlohmann::json;

// The Split regexes of real byte-level tokenizer.json files that ember's hand-written
// pre-tokenizers implement, and the llama.cpp pre-tokenizer name of each.
constexpr std::pair<std::string_view, std::string_view> kKnownSplitRegexes[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama3"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "qwen2"},
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "gpt2"},
};

// Real tokenizer.json files nest about five levels; anything much deeper is refused while parsing,
// before the recursive readers and dump() below could run out of stack on it.
constexpr int kMaxDepth = 64;

// An integer field (token ids): a float or an out-of-range number is an error, never a cast.
Expected<int64_t> Integer(const Json& j, const char* what) {
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return InvalidArgument(std::string("tokenizer.json ") + what + " is too large");
  }
  if (!j.is_number_integer()) return InvalidArgument(std::string("tokenizer.json ") + what + " is not an integer");
  return j.get<int64_t>();
}

std::string Describe(const Json& j) {
  std::string s = j.dump();
  return s.size() > 200 ? s.substr(0, 200) + "..." : s;
}

std::string TypeOf(const Json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return "";
  return j["type"].get<std::string>();
}

bool IsFalseOrAbsent(const Json& obj, const char* key) {
  return !obj.contains(key) || obj[key].is_null() || (obj[key].is_boolean() && !obj[key].get<bool>());
}

// A ByteLevel pre-tokenizer as ember runs it: no prefix space; use_regex as required.
Status CheckByteLevel(const Json& j, bool want_regex) {
  if (!IsFalseOrAbsent(j, "add_prefix_space")) {
    return Unimplemented("tokenizer.json ByteLevel pre-tokenizer with add_prefix_space=true");
  }
  const bool use_regex = !j.contains("use_regex") || j["use_regex"].get<bool>();
  if (use_regex != want_regex) {
    return Unimplemented(std::string("tokenizer.json ByteLevel pre-tokenizer with use_regex=") +
                         (use_regex ? "true" : "false") + " in this position: " + Describe(j));
  }
  return Status::Ok();
}

// Maps the pre_tokenizer to a llama.cpp pre-tokenizer name.
Expected<std::string> PreTokenizerName(const Json& pre) {
  const std::string type = TypeOf(pre);
  if (type == "ByteLevel") {
    EMBER_RETURN_IF_ERROR(CheckByteLevel(pre, /*want_regex=*/true));
    return std::string("gpt2");
  }
  if (type == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].size() == 2) {
    const Json& first = pre["pretokenizers"][0];
    const Json& second = pre["pretokenizers"][1];
    if (TypeOf(first) == "Digits" && TypeOf(second) == "ByteLevel") {
      if (!first.value("individual_digits", false)) {
        return Unimplemented("tokenizer.json Digits pre-tokenizer without individual_digits");
      }
      EMBER_RETURN_IF_ERROR(CheckByteLevel(second, /*want_regex=*/true));
      return std::string("smollm");
    }
    if (TypeOf(first) == "Split" && TypeOf(second) == "ByteLevel") {
      EMBER_RETURN_IF_ERROR(CheckByteLevel(second, /*want_regex=*/false));
      const Json& pattern = first.value("pattern", Json());
      if (!pattern.is_object() || !pattern.contains("Regex") ||
          first.value("behavior", "") != "Isolated" || first.value("invert", false)) {
        return Unimplemented("tokenizer.json Split pre-tokenizer of an unsupported form: " +
                             Describe(first));
      }
      const std::string regex = pattern["Regex"].get<std::string>();
      for (const auto& [known, name] : kKnownSplitRegexes) {
        if (regex == known) return std::string(name);
      }
      return Unimplemented("tokenizer.json Split regex ember has no pre-tokenizer for: " + regex);
    }
  }
  return Unimplemented("tokenizer.json pre_tokenizer ember does not support: " + Describe(pre));
}

// BOS/EOS from a TemplateProcessing post-processor's "single" template.
Status ReadTemplate(const Json& proc, const std::vector<std::string>& tokens, TokenizerSpec* spec) {
  const std::string type = TypeOf(proc);
  if (type == "ByteLevel") return Status::Ok();  // offsets only
  if (type == "Sequence") {
    for (const Json& p : proc.value("processors", Json::array())) {
      EMBER_RETURN_IF_ERROR(ReadTemplate(p, tokens, spec));
    }
    return Status::Ok();
  }
  if (type != "TemplateProcessing") {
    return Unimplemented("tokenizer.json post_processor ember does not support: " + Describe(proc));
  }
  const Json& single = proc.value("single", Json::array());
  // (at() rather than [] on these const objects: a missing key throws instead of being undefined.)
  auto special_id = [&](const Json& piece) -> Expected<int64_t> {
    const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
    const Json& ids = proc.at("special_tokens").at(name).at("ids");
    if (ids.empty()) return int64_t{-1};
    return Integer(ids.at(0), "special token id");
  };
  for (size_t i = 0; i < single.size(); ++i) {
    if (!single[i].contains("SpecialToken")) continue;
    EMBER_ASSIGN_OR_RETURN(const int64_t id, special_id(single[i]));
    if (id < 0 || id >= static_cast<int64_t>(tokens.size())) {
      return InvalidArgument("tokenizer.json template names an unknown token: " + Describe(single[i]));
    }
    if (i == 0) {
      spec->add_bos = true;
      spec->bos_id = static_cast<int32_t>(id);
    } else if (i + 1 == single.size()) {
      spec->add_eos = true;
      spec->eos_id = static_cast<int32_t>(id);
    } else {
      return Unimplemented("tokenizer.json template with a special token in the middle");
    }
  }
  return Status::Ok();
}

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

bool IsStringPattern(const Json& pattern, std::string_view text) {
  return pattern.is_object() && pattern.contains("String") && pattern["String"].is_string() &&
         pattern["String"].get<std::string>() == text;
}

// Replace(" " -> U+2581): SentencePiece's whitespace escaping, as Gemma's tokenizer.json has it.
bool IsSpaceEscapingNormalizer(const Json& norm) {
  return TypeOf(norm) == "Replace" && IsStringPattern(norm.value("pattern", Json()), " ") &&
         norm.value("content", "") == kSpaceMark;
}

// The SentencePiece-style layout (Gemma): BPE with byte_fallback over U+2581-escaped text.
Status CheckSentencePieceLayout(const Json& doc, const Json& model) {
  if (IsFalseOrAbsent(model, "byte_fallback")) {
    return Unimplemented("tokenizer.json BPE with a U+2581 normalizer but without byte_fallback");
  }
  // No pre-tokenizer, or a Split on " ", which finds nothing once every space is U+2581.
  const Json& pre = doc.value("pre_tokenizer", Json());
  if (!pre.is_null()) {
    if (TypeOf(pre) != "Split" || !IsStringPattern(pre.value("pattern", Json()), " ") ||
        pre.value("invert", false)) {
      return Unimplemented("tokenizer.json pre_tokenizer \"" + TypeOf(pre) +
                           "\" ember does not support with SentencePiece-style BPE: " + Describe(pre));
    }
  }
  // Decoder: Replace(U+2581 -> " "), ByteFallback, Fuse, which is how ember decodes these.
  const Json& dec = doc.value("decoder", Json());
  bool replaces = false;
  const Json& steps = TypeOf(dec) == "Sequence" ? dec.value("decoders", Json::array()) : Json::array({dec});
  for (const Json& step : steps) {
    const std::string type = TypeOf(step);
    if (type == "Replace" && IsStringPattern(step.value("pattern", Json()), kSpaceMark) &&
        step.value("content", "") == " ") {
      replaces = true;
    } else if (type != "ByteFallback" && type != "Fuse") {
      return Unimplemented("tokenizer.json decoder \"" + type +
                           "\" ember does not support with SentencePiece-style BPE: " + Describe(dec));
    }
  }
  if (!replaces) {
    return Unimplemented("tokenizer.json decoder without Replace(U+2581 -> space): " + Describe(dec));
  }
  for (const Json& t : doc.value("added_tokens", Json::array())) {
    if (t.value("normalized", false)) {
      return Unimplemented("tokenizer.json added token matched in normalized text (normalized=true): " +
                           Describe(t));
    }
  }
  return Status::Ok();
}

bool IsBytePiece(const std::string& text) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return text.size() == 6 && text.compare(0, 3, "<0x") == 0 && hex(text[3]) && hex(text[4]) && text[5] == '>';
}

Expected<TokenizerSpec> Parse(const Json& doc) {
  const Json& model = doc.value("model", Json());
  const std::string model_type = TypeOf(model);
  if (model_type != "BPE") {
    return Unimplemented("tokenizer.json model type \"" + model_type +
                         "\" is not supported (ember reads \"BPE\": byte-level, or SentencePiece-style "
                         "with byte_fallback)");
  }
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null()) {
      return Unimplemented(std::string("tokenizer.json BPE with ") + key + " set");
    }
  }
  TokenizerSpec spec;
  spec.flavor = TokenizerSpec::Flavor::kHuggingFace;
  const Json& norm = doc.value("normalizer", Json());
  const bool sentencepiece = !norm.is_null() && IsSpaceEscapingNormalizer(norm);
  if (sentencepiece) {
    EMBER_RETURN_IF_ERROR(CheckSentencePieceLayout(doc, model));
    spec.model = TokenizerSpec::Model::kSentencePieceBpe;
    spec.pre_tokenizer = "default";
  } else {
    if (!norm.is_null()) {
      return Unimplemented("tokenizer.json normalizer \"" + TypeOf(norm) + "\" ember does not support: " +
                           Describe(norm));
    }
    if (!IsFalseOrAbsent(model, "byte_fallback")) {
      return Unimplemented(
          "tokenizer.json BPE with byte_fallback but no Replace(\" \" -> U+2581) normalizer");
    }
    spec.model = TokenizerSpec::Model::kBytePairGpt2;
    EMBER_ASSIGN_OR_RETURN(spec.pre_tokenizer, PreTokenizerName(doc.value("pre_tokenizer", Json())));
    if (doc.contains("decoder") && !doc["decoder"].is_null() && TypeOf(doc["decoder"]) != "ByteLevel") {
      return Unimplemented("tokenizer.json decoder ember does not support: " + Describe(doc["decoder"]));
    }
  }
  spec.ignore_merges = model.value("ignore_merges", false);

  // Vocabulary: ids must be dense once the added tokens are in, so none can reach the number of
  // entries there are (which also bounds what is allocated for them).
  const Json& vocab = model.value("vocab", Json::object());
  size_t n = vocab.size();
  const Json& added = doc.value("added_tokens", Json::array());
  const auto most = static_cast<int64_t>(vocab.size() + added.size());
  for (const Json& t : added) {
    EMBER_ASSIGN_OR_RETURN(const int64_t id, Integer(t.at("id"), "added token id"));
    if (id < 0 || id >= most) {
      return InvalidArgument("tokenizer.json added token id " + std::to_string(id) + " is out of range (" +
                             std::to_string(most) + " tokens in all)");
    }
    n = std::max(n, static_cast<size_t>(id) + 1);
  }
  std::vector<bool> seen(n, false);
  spec.tokens.resize(n);
  spec.token_types.assign(n, TokenizerSpec::kNormal);
  for (const auto& [text, id_json] : vocab.items()) {
    EMBER_ASSIGN_OR_RETURN(const int64_t id, Integer(id_json, "vocab id"));
    if (id < 0 || id >= static_cast<int64_t>(n) || seen[id]) {
      return InvalidArgument("tokenizer.json vocab id " + std::to_string(id) + " of \"" + text +
                             "\" is out of range or repeated");
    }
    spec.tokens[id] = text;
    // byte_fallback's <0xNN> pieces decode to their byte (the ByteFallback decoder).
    if (sentencepiece && IsBytePiece(text)) spec.token_types[id] = TokenizerSpec::kByte;
    seen[id] = true;
  }
  for (const Json& t : added) {
    for (const char* key : {"single_word", "lstrip", "rstrip"}) {
      if (t.value(key, false)) {
        return Unimplemented(std::string("tokenizer.json added token with ") + key + ": " + Describe(t));
      }
    }
    const auto id = static_cast<size_t>(t.at("id").get<int64_t>());  // checked above
    spec.tokens[id] = t.at("content").get<std::string>();
    spec.token_types[id] = t.value("special", false) ? TokenizerSpec::kControl
                                                     : TokenizerSpec::kUserDefined;
    seen[id] = true;
  }
  for (size_t id = 0; id < n; ++id) {
    if (!seen[id]) return InvalidArgument("tokenizer.json has no token with id " + std::to_string(id));
  }

  for (const Json& m : model.value("merges", Json::array())) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sep = s.find(' ', 1);
      if (sep == std::string::npos) return InvalidArgument("tokenizer.json merge \"" + s + "\" has no space");
      left = s.substr(0, sep);
      right = s.substr(sep + 1);
    } else if (m.is_array() && m.size() == 2) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return InvalidArgument("tokenizer.json merge of unknown form: " + Describe(m));
    }
    // Stored as GGUF stores them, "left right"; byte-level symbols never contain a space, nor
    // do SentencePiece ones (spaces are U+2581).
    if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos) {
      return Unimplemented("tokenizer.json merge with a space inside a symbol: " + Describe(m));
    }
    spec.merges.push_back(left + " " + right);
  }

  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const auto it = vocab.find(model["unk_token"].get<std::string>());
    if (it != vocab.end()) spec.unk_id = static_cast<int32_t>(it->get<int64_t>());  // a checked vocab id
  }
  if (doc.contains("post_processor") && !doc["post_processor"].is_null()) {
    EMBER_RETURN_IF_ERROR(ReadTemplate(doc["post_processor"], spec.tokens, &spec));
  }
  return spec;
}

}  // namespace

Expected<TokenizerSpec> TokenizerSpecFromHfJson(std::string_view json_text) {
  Json doc;
  bool too_deep = false;
  try {
    doc = Json::parse(json_text, [&too_deep](int depth, Json::parse_event_t event, Json&) {
      const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
      if (opens && depth >= kMaxDepth) too_deep = true;
      return !too_deep;
    });
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("tokenizer.json is not valid JSON: ") + e.what());
  }
  if (too_deep) {
    return InvalidArgument("tokenizer.json nests arrays and objects more than " + std::to_string(kMaxDepth) +
                           " levels deep");
  }
  try {
    return Parse(doc);
  } catch (const Json::exception& e) {
    // A field of the wrong JSON type somewhere in an otherwise valid document.
    return InvalidArgument(std::string("tokenizer.json has an unexpected field: ") + e.what());
  }
}

Expected<TokenizerSpec> LoadHfTokenizerJson(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return IoError("cannot read " + path.string());
  auto spec = TokenizerSpecFromHfJson(text.str());
  if (!spec.ok()) return Status(spec.status().code(), path.string() + ": " + spec.status().message());
  return spec;
}

}  // namespace ember
