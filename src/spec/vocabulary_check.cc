#include "spec/vocabulary_check.h"

#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/model_tokenizer.h"

namespace ember::spec {

namespace {

constexpr const char* kAdvice = "the drafter's tokens would mean other tokens to the target: use a draft model with "
                                "the target's tokenizer (a smaller model of the same family)";

std::string TextAt(const TokenizerSpec& spec, size_t id) {
  return id < spec.tokens.size() ? fmt::format("'{}'", spec.tokens[id]) : std::string("no token");
}

}  // namespace

Status CheckSameVocabulary(const TokenizerSpec& target, const TokenizerSpec& drafter) {
  const size_t common = std::min(target.tokens.size(), drafter.tokens.size());
  size_t id = std::mismatch(target.tokens.begin(), target.tokens.begin() + common, drafter.tokens.begin()).first -
              target.tokens.begin();
  if (id < common || target.tokens.size() != drafter.tokens.size()) {
    return InvalidArgument(fmt::format(
        "draft_model: the tokenizers differ at token id {} (target {}, drafter {}; the target has {} tokens, the "
        "drafter {}): {}",
        id, TextAt(target, id), TextAt(drafter, id), target.tokens.size(), drafter.tokens.size(), kAdvice));
  }
  if (target.bos_id != drafter.bos_id || target.eos_id != drafter.eos_id) {
    return InvalidArgument(fmt::format(
        "draft_model: the tokenizers differ in their special ids (target BOS {} EOS {}, drafter BOS {} EOS {}): {}",
        target.bos_id, target.eos_id, drafter.bos_id, drafter.eos_id, kAdvice));
  }
  return Status::Ok();
}

Status CheckSameTokenizer(const std::string& target_path, const std::string& drafter_path) {
  Expected<std::unique_ptr<Tokenizer>> target = LoadModelTokenizer(target_path);
  Expected<std::unique_ptr<Tokenizer>> drafter = LoadModelTokenizer(drafter_path);
  const bool target_missing = !target.ok() && target.status().code() == StatusCode::kNotFound;
  const bool drafter_missing = !drafter.ok() && drafter.status().code() == StatusCode::kNotFound;
  if (target_missing && drafter_missing) return Status::Ok();
  if (target_missing != drafter_missing) {
    return InvalidArgument(fmt::format(
        "draft_model: only the {} carries a tokenizer ({} has none), so the vocabularies cannot be compared: give "
        "both models their tokenizer",
        target_missing ? "drafter" : "target", target_missing ? target_path : drafter_path));
  }
  if (!target.ok()) return target.status();
  if (!drafter.ok()) return drafter.status();
  return CheckSameVocabulary((*target)->spec(), (*drafter)->spec());
}

}  // namespace ember::spec
