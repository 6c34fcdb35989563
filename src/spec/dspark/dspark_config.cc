#include "spec/dspark/dspark_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>

#include "formats/json_fields.h"

namespace ember::spec::dspark {
namespace {

using nlohmann::json;

Status Bad(const std::string& where, const std::string& what) {
  return InvalidArgument(fmt::format("DSpark drafter config {}: {}", where, what));
}

// A field read at the top level first, then inside dflash_config (vLLM reads both).
const json* Pick(const json& top, const json* sub, const char* key) {
  if (top.contains(key) && !top.at(key).is_null()) return &top.at(key);
  if (sub != nullptr && sub->contains(key) && !sub->at(key).is_null()) return &sub->at(key);
  return nullptr;
}

Status ReadInt(const json* v, const std::string& where, const char* key, int64_t* out) {
  if (v == nullptr) return Bad(where, fmt::format("\"{}\" is missing", key));
  if (!v->is_number_integer()) return Bad(where, fmt::format("\"{}\" must be an integer", key));
  *out = v->get<int64_t>();
  return Status::Ok();
}

Status ReadBool(const json* v, const std::string& where, const char* key, bool* out) {
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) return Bad(where, fmt::format("\"{}\" must be true or false", key));
  *out = v->get<bool>();
  return Status::Ok();
}

Status ReadShapes(const json& d, const std::string& where, DSparkConfig& c) {
  struct Field {
    const char* key;
    int64_t* out;
  };
  for (const Field& f : {Field{"hidden_size", &c.hidden_size}, Field{"num_hidden_layers", &c.num_layers},
                         Field{"num_attention_heads", &c.num_heads}, Field{"num_key_value_heads", &c.num_kv_heads},
                         Field{"intermediate_size", &c.intermediate_size}, Field{"vocab_size", &c.vocab_size}}) {
    EMBER_RETURN_IF_ERROR(ReadInt(Pick(d, nullptr, f.key), where, f.key, f.out));
    if (*f.out <= 0) return Bad(where, fmt::format("\"{}\" is {}: it must be positive", f.key, *f.out));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return Bad(where, fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}", c.num_heads,
                                  c.num_kv_heads));
  }
  c.head_dim = c.hidden_size / c.num_heads;
  if (const json* v = Pick(d, nullptr, "head_dim")) EMBER_RETURN_IF_ERROR(ReadInt(v, where, "head_dim", &c.head_dim));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) {
    return Bad(where, fmt::format("head_dim {} must be positive and even (RoPE rotates pairs)", c.head_dim));
  }
  if (const json* v = Pick(d, nullptr, "max_position_embeddings")) {
    EMBER_RETURN_IF_ERROR(ReadInt(v, where, "max_position_embeddings", &c.max_position_embeddings));
  }
  const json* eps = Pick(d, nullptr, "rms_norm_eps");
  if (eps == nullptr || !eps->is_number()) return Bad(where, "\"rms_norm_eps\" is missing or not a number");
  c.rms_norm_eps = eps->get<float>();
  return Status::Ok();
}

// Only what ember computes: SwiGLU, no attention biases, plain RoPE.
Status ReadBlockKind(const json& d, const std::string& where, DSparkConfig& c) {
  if (const json* v = Pick(d, nullptr, "architectures"); v != nullptr && v->is_array()) {
    const bool dspark = std::any_of(v->begin(), v->end(), [](const json& a) {
      return a.is_string() && a.get<std::string>().find("DSpark") != std::string::npos;
    });
    if (!dspark) return Bad(where, fmt::format("architectures {} names no DSpark model: is this a DSpark drafter?", v->dump()));
  }
  if (const json* v = Pick(d, nullptr, "hidden_act"); v != nullptr && *v != "silu") {
    return Bad(where, fmt::format("hidden_act {} is not supported: DSpark drafters use silu (SwiGLU)", v->dump()));
  }
  bool bias = false;
  EMBER_RETURN_IF_ERROR(ReadBool(Pick(d, nullptr, "attention_bias"), where, "attention_bias", &bias));
  if (bias) return Bad(where, "attention_bias true is not supported");
  const json* rope = Pick(d, nullptr, "rope_parameters");
  if (rope == nullptr) rope = Pick(d, nullptr, "rope_scaling");
  if (rope != nullptr && rope->is_object()) {
    if (rope->contains("rope_type") && rope->at("rope_type") != "default") {
      return Bad(where, fmt::format("rope_type {} is not supported (only default RoPE)", rope->at("rope_type").dump()));
    }
    if (rope->contains("rope_theta")) c.rope_theta = rope->at("rope_theta").get<double>();
  }
  if (rope == nullptr || !rope->is_object() || !rope->contains("rope_theta")) {
    if (const json* v = Pick(d, nullptr, "rope_theta")) c.rope_theta = v->get<double>();
  }
  bool from_anchor = true;
  EMBER_RETURN_IF_ERROR(ReadBool(Pick(d, nullptr, "sample_from_anchor"), where, "sample_from_anchor", &from_anchor));
  if (!from_anchor) {
    return Bad(where, "sample_from_anchor false (DFlash's mask-slot predictions) is not supported: ember drafts "
                      "DSpark's sample-from-anchor blocks");
  }
  if (const json* v = Pick(d, nullptr, "logit_scale")) c.logit_scale = v->get<float>();
  return Status::Ok();
}

// Per-layer window and causality, as vLLM's _resolve_layer_attention and _dflash_layer_causal.
Status ReadAttentionKinds(const json& d, const json* sub, const std::string& where, DSparkConfig& c) {
  std::vector<std::string> types;
  if (const json* v = Pick(d, nullptr, "layer_types")) {
    if (!v->is_array()) return Bad(where, "\"layer_types\" must be a list");
    for (const json& t : *v) {
      if (t != "sliding_attention" && t != "full_attention") {
        return Bad(where, fmt::format("layer_types has {}: expected \"sliding_attention\" or \"full_attention\"",
                                      t.dump()));
      }
      types.push_back(t.get<std::string>());
    }
    if (static_cast<int64_t>(types.size()) != c.num_layers) {
      return Bad(where, fmt::format("layer_types has {} entries for num_hidden_layers {}", types.size(), c.num_layers));
    }
  }
  bool use_swa = false;
  if (sub != nullptr) EMBER_RETURN_IF_ERROR(ReadBool(Pick(*sub, nullptr, "use_swa"), where, "dflash_config.use_swa", &use_swa));
  const bool any_sliding = std::count(types.begin(), types.end(), "sliding_attention") > 0;
  int64_t window = -1;
  const json* w = sub != nullptr ? Pick(*sub, nullptr, "swa_window_size") : nullptr;
  if (w == nullptr) w = Pick(d, nullptr, "sliding_window");
  if (w != nullptr) EMBER_RETURN_IF_ERROR(ReadInt(w, where, "sliding_window", &window));
  std::optional<bool> causal_override;
  if (const json* v = Pick(d, sub, "is_causal")) {
    bool value = false;
    EMBER_RETURN_IF_ERROR(ReadBool(v, where, "is_causal", &value));
    causal_override = value;
  } else if (const json* v2 = sub != nullptr ? Pick(*sub, nullptr, "causal") : nullptr) {
    bool value = false;
    EMBER_RETURN_IF_ERROR(ReadBool(v2, where, "dflash_config.causal", &value));
    causal_override = value;
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const bool listed_sliding = !types.empty() && types[i] == "sliding_attention";
    const bool sliding = types.empty() || (use_swa && !any_sliding) ? use_swa : listed_sliding;
    if (sliding && window <= 0) {
      return Bad(where, fmt::format("layer {} is sliding_attention but sliding_window (or dflash_config."
                                    "swa_window_size) is {}: give a positive window", i, window));
    }
    c.layer_window.push_back(sliding ? window : -1);
    c.layer_causal.push_back(causal_override.value_or(listed_sliding));
  }
  return Status::Ok();
}

Status ReadDrafting(const json& d, const json* sub, const std::string& where, DSparkConfig& c) {
  const json* taps = Pick(d, sub, "target_layer_ids");
  if (taps == nullptr || !taps->is_array() || taps->empty()) {
    return Bad(where, "\"target_layer_ids\" is missing or empty: the target layers the drafter reads");
  }
  for (const json& t : *taps) {
    if (!t.is_number_integer()) return Bad(where, "\"target_layer_ids\" must be integers");
    const int64_t id = t.get<int64_t>();
    if (id < -1 || (!c.target_layer_ids.empty() && id <= c.target_layer_ids.back())) {
      return Bad(where, fmt::format("target_layer_ids {} must be strictly increasing, each -1 (the embedding "
                                    "output) or a target layer", taps->dump()));
    }
    c.target_layer_ids.push_back(static_cast<int32_t>(id));
  }
  int64_t value = 0;
  EMBER_RETURN_IF_ERROR(ReadInt(Pick(d, sub, "block_size"), where, "block_size", &value));
  if (value < 1 || value > 64) return Bad(where, fmt::format("block_size {} must be in [1, 64]", value));
  c.block_size = static_cast<int32_t>(value);
  EMBER_RETURN_IF_ERROR(ReadInt(Pick(d, sub, "mask_token_id"), where, "mask_token_id", &value));
  if (value < 0 || value >= c.vocab_size) {
    return Bad(where, fmt::format("mask_token_id {} is outside the vocabulary [0, {})", value, c.vocab_size));
  }
  c.mask_token_id = static_cast<int32_t>(value);
  c.target_hidden_size = c.hidden_size;
  if (const json* v = Pick(d, nullptr, "target_hidden_size")) {
    EMBER_RETURN_IF_ERROR(ReadInt(v, where, "target_hidden_size", &c.target_hidden_size));
  }
  if (c.target_hidden_size != c.hidden_size) {
    return Bad(where, fmt::format("target_hidden_size {} differs from hidden_size {}: the drafter shares the target's "
                                  "embedding and lm_head, so both must be the target's hidden size",
                                  c.target_hidden_size, c.hidden_size));
  }
  if (const json* v = Pick(d, nullptr, "draft_vocab_size")) {
    EMBER_RETURN_IF_ERROR(ReadInt(v, where, "draft_vocab_size", &value));
    if (value != c.vocab_size) {
      return Bad(where, fmt::format("draft_vocab_size {} differs from vocab_size {}: reduced-vocabulary drafters "
                                    "(d2t) are not supported", value, c.vocab_size));
    }
  }
  if (const json* v = Pick(d, nullptr, "num_target_layers")) {
    EMBER_RETURN_IF_ERROR(ReadInt(v, where, "num_target_layers", &c.num_target_layers));
  }

  EMBER_RETURN_IF_ERROR(ReadInt(Pick(d, sub, "markov_rank"), where, "markov_rank", &c.markov_rank));
  if (c.markov_rank < 0) return Bad(where, fmt::format("markov_rank {} is negative", c.markov_rank));
  std::string type = "vanilla";
  if (const json* v = Pick(d, sub, "markov_head_type")) type = v->is_string() ? v->get<std::string>() : v->dump();
  if (c.markov_rank == 0) {
    c.markov_head_type = MarkovHeadType::kNone;
  } else if (type == "vanilla") {
    c.markov_head_type = MarkovHeadType::kVanilla;
  } else if (type == "gated") {
    c.markov_head_type = MarkovHeadType::kGated;
  } else {
    return Bad(where, fmt::format("markov_head_type \"{}\" is not supported (vanilla or gated)", type));
  }
  EMBER_RETURN_IF_ERROR(
      ReadBool(Pick(d, sub, "enable_confidence_head"), where, "enable_confidence_head", &c.enable_confidence_head));
  EMBER_RETURN_IF_ERROR(ReadBool(Pick(d, sub, "confidence_head_with_markov"), where, "confidence_head_with_markov",
                                 &c.confidence_head_with_markov));
  if (!c.enable_confidence_head) c.confidence_head_with_markov = false;
  if (c.confidence_head_with_markov && c.markov_rank == 0) {
    return Bad(where, "confidence_head_with_markov needs a Markov head (markov_rank > 0)");
  }
  c.confidence_temperatures.assign(c.block_size, 1.0f);
  return Status::Ok();
}

Expected<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot read {}", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Status ReadCalibration(const std::string& path, DSparkConfig& c) {
  EMBER_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const json* temps = doc.is_object() && doc.contains("confidence_temperatures") ? &doc.at("confidence_temperatures")
                                                                                  : nullptr;
  if (temps == nullptr || !temps->is_array() || static_cast<int64_t>(temps->size()) < c.block_size) {
    return InvalidArgument(fmt::format("{}: \"confidence_temperatures\" must list one temperature per block position "
                                       "({})", path, c.block_size));
  }
  for (int32_t k = 0; k < c.block_size; ++k) {
    const json& t = temps->at(k);
    if (!t.is_number() || !(t.get<double>() > 0)) {
      return InvalidArgument(fmt::format("{}: confidence temperature {} is {}: it must be positive", path, k, t.dump()));
    }
    c.confidence_temperatures[k] = t.get<float>();
  }
  return Status::Ok();
}

// {"token_ids": [...]}: distinct ids within the vocabulary, most frequent first.
Status ReadDraftVocab(const std::string& path, DSparkConfig& c) {
  EMBER_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const json* ids = doc.is_object() && doc.contains("token_ids") ? &doc.at("token_ids") : nullptr;
  if (ids == nullptr || !ids->is_array() || ids->empty()) {
    return InvalidArgument(fmt::format("{}: \"token_ids\" must be a non-empty list of token ids", path));
  }
  std::vector<bool> seen(static_cast<size_t>(c.vocab_size), false);
  for (const json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= c.vocab_size) {
      return InvalidArgument(fmt::format("{}: token id {} is not in the vocabulary [0, {})", path, id.dump(),
                                         c.vocab_size));
    }
    const auto token = id.get<int32_t>();
    if (seen[token]) return InvalidArgument(fmt::format("{}: token id {} is listed twice", path, token));
    seen[token] = true;
    c.draft_vocab.push_back(token);
  }
  // "counts" (optional): occurrences of each id, in the same order.
  if (doc.contains("counts")) {
    const json& counts = doc.at("counts");
    if (!counts.is_array() || counts.size() != ids->size()) {
      return InvalidArgument(fmt::format("{}: \"counts\" must be a list of as many counts as \"token_ids\" ({})", path,
                                         ids->size()));
    }
    for (const json& n : counts) {
      if (!n.is_number_integer() || n.get<int64_t>() < 0) {
        return InvalidArgument(fmt::format("{}: count {} is not a non-negative integer", path, n.dump()));
      }
      c.draft_vocab_counts.push_back(n.get<int64_t>());
    }
  }
  return Status::Ok();
}

}  // namespace

int64_t DefaultDraftVocabSize(const DSparkConfig& config) {
  const std::vector<int64_t>& counts = config.draft_vocab_counts;
  const int64_t listed = static_cast<int64_t>(config.draft_vocab.size());
  if (counts.size() != config.draft_vocab.size()) return listed;
  int64_t total = 0;
  for (int64_t n : counts) total += n;
  if (total <= 0) return listed;
  int64_t covered = 0;
  for (int64_t i = 0; i < listed; ++i) {
    covered += counts[i];
    if (static_cast<double>(covered) >= kDefaultDraftVocabCoverage * static_cast<double>(total)) return i + 1;
  }
  return listed;
}

std::optional<double> DraftVocabCoverage(const DSparkConfig& config, int64_t n) {
  const std::vector<int64_t>& counts = config.draft_vocab_counts;
  if (counts.empty() || counts.size() != config.draft_vocab.size()) return std::nullopt;
  const auto first = counts.begin() + std::clamp<int64_t>(n, 0, static_cast<int64_t>(counts.size()));
  const int64_t covered = std::accumulate(counts.begin(), first, int64_t{0});
  const int64_t total = std::accumulate(first, counts.end(), covered);
  if (total <= 0) return std::nullopt;
  return static_cast<double>(covered) / static_cast<double>(total);
}

int64_t DSparkConfig::context_window() const {
  int64_t widest = 0;
  for (int64_t w : layer_window) {
    if (w <= 0) return -1;
    widest = std::max(widest, w);
  }
  return layer_window.empty() ? -1 : widest;
}

Expected<DSparkConfig> ParseDSparkConfig(const std::string& json_text, const std::string& where) {
  const json d = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (d.is_discarded() || !d.is_object()) return Bad(where, "is not a JSON object");
  const json* sub = Pick(d, nullptr, "dflash_config");
  if (sub != nullptr && !sub->is_object()) return Bad(where, "\"dflash_config\" must be an object");
  DSparkConfig c;
  EMBER_RETURN_IF_ERROR(ReadShapes(d, where, c));
  EMBER_RETURN_IF_ERROR(ReadBlockKind(d, where, c));
  EMBER_RETURN_IF_ERROR(ReadAttentionKinds(d, sub, where, c));
  EMBER_RETURN_IF_ERROR(ReadDrafting(d, sub, where, c));
  return c;
}

Expected<DSparkConfig> LoadDSparkConfig(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  EMBER_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  EMBER_ASSIGN_OR_RETURN(DSparkConfig c, ParseDSparkConfig(text, path));
  const std::string calibration = (std::filesystem::path(dir) / "calibration.json").string();
  if (std::filesystem::exists(calibration)) EMBER_RETURN_IF_ERROR(ReadCalibration(calibration, c));
  const std::string draft_vocab = (std::filesystem::path(dir) / "draft_vocab.json").string();
  if (std::filesystem::exists(draft_vocab)) EMBER_RETURN_IF_ERROR(ReadDraftVocab(draft_vocab, c));
  return c;
}

Status CheckFitsTarget(const DSparkConfig& c, const DSparkTargetInfo& t) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument(fmt::format("DSpark drafter does not fit the target ({}): {}", t.architecture, what));
  };
  if (c.hidden_size != t.hidden_size) {
    return bad(fmt::format("the drafter's hidden_size is {} but the target's is {}; a DSpark drafter reads the "
                           "target's hidden states and shares its embedding and lm_head, so it must be trained for "
                           "this target", c.hidden_size, t.hidden_size));
  }
  if (c.vocab_size != t.vocab_size) {
    return bad(fmt::format("the drafter's vocab_size is {} but the target's is {}; use a drafter trained for this "
                           "target's tokenizer", c.vocab_size, t.vocab_size));
  }
  for (int32_t id : c.target_layer_ids) {
    if (id == -1) {
      return bad("target_layer_ids has -1 (the embedding output), which ember's target forward does not "
                 "report yet; use taps of decoder layers");
    }
    if (id >= t.num_layers) {
      return bad(fmt::format("target_layer_ids has layer {} but the target has {} layers (0 to {})", id, t.num_layers,
                             t.num_layers - 1));
    }
  }
  if (c.num_target_layers > 0 && c.num_target_layers != t.num_layers) {
    return bad(fmt::format("the drafter was trained on a target of {} layers (num_target_layers) but this target "
                           "has {}", c.num_target_layers, t.num_layers));
  }
  return Status::Ok();
}

}  // namespace ember::spec::dspark
