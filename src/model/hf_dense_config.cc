#include "model/hf_dense_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>

#include "formats/json_fields.h"
#include "kernels/ops.h"

namespace ember {
namespace {

Expected<nlohmann::json> ReadJsonFile(const std::string& path, bool required) {
  std::ifstream in(path);
  if (!in) {
    if (!required) return nlohmann::json();
    return NotFound(fmt::format("cannot open {}: a Hugging Face model directory has config.json beside its "
                                "*.safetensors", path));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return InvalidArgument(fmt::format("{}: not a JSON object", path));
  return json;
}

// One RoPE parameter set: transformers 5's rope_parameters entry, or the legacy pair
// (rope_theta, rope_scaling). `scaling` may be null.
Expected<HfRope> ParseRope(double theta, const nlohmann::json* scaling, const std::string& where) {
  HfRope rope;
  rope.theta = theta;
  if (scaling == nullptr || scaling->is_null()) return rope;
  if (!scaling->is_object()) return InvalidArgument(fmt::format("{}: must be an object or null", where));
  JsonFields f(*scaling, where);
  if (f.Has("rope_theta")) EMBER_RETURN_IF_ERROR(f.Double("rope_theta", &rope.theta));
  // "type" is the name older configs used.
  if (f.Has("rope_type")) {
    EMBER_RETURN_IF_ERROR(f.String("rope_type", &rope.type));
  } else if (f.Has("type")) {
    EMBER_RETURN_IF_ERROR(f.String("type", &rope.type));
  }
  if (f.Has("partial_rotary_factor")) {
    double partial = 1.0;
    EMBER_RETURN_IF_ERROR(f.Double("partial_rotary_factor", &partial));
    if (partial != 1.0) return Unimplemented(fmt::format("{}: partial_rotary_factor {} is not supported", where, partial));
  }
  if (rope.type == "default") return rope;
  if (rope.type == "linear" || rope.type == "llama3") {
    EMBER_RETURN_IF_ERROR(f.Double("factor", &rope.factor));
    if (!(rope.factor > 0)) return InvalidArgument(fmt::format("{}: factor must be positive", where));
  }
  if (rope.type == "linear") return rope;
  if (rope.type == "llama3") {
    EMBER_RETURN_IF_ERROR(f.Double("low_freq_factor", &rope.low_freq_factor));
    EMBER_RETURN_IF_ERROR(f.Double("high_freq_factor", &rope.high_freq_factor));
    EMBER_RETURN_IF_ERROR(f.Int("original_max_position_embeddings", &rope.original_max_position_embeddings));
    if (!(rope.high_freq_factor > rope.low_freq_factor) || rope.original_max_position_embeddings <= 0) {
      return InvalidArgument(fmt::format("{}: llama3 RoPE needs high_freq_factor > low_freq_factor and a positive "
                                         "original_max_position_embeddings", where));
    }
    return rope;
  }
  return Unimplemented(fmt::format("{}: RoPE type '{}' is not supported (ember runs default, linear and llama3)",
                                   where, rope.type));
}

std::string ModelTypeOf(const nlohmann::json& json) {
  auto it = json.find("model_type");
  return it != json.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Status RequireFalse(JsonFields& f, const char* key, const std::string& why) {
  bool value = false;
  EMBER_RETURN_IF_ERROR(f.Bool(key, &value, false));
  if (value) return Unimplemented(fmt::format("{}", why));
  return Status::Ok();
}

Status ParseLayerTypes(JsonFields& f, HfDenseConfig& c, const std::string& where) {
  std::vector<std::string> names;
  if (f.Has("layer_types")) {
    EMBER_RETURN_IF_ERROR(f.StringList("layer_types", &names));
  } else if (c.family == HfDenseFamily::kGemma3) {
    // Gemma3TextConfig before layer_types: every sliding_window_pattern-th layer is global.
    int64_t pattern = 6;
    EMBER_RETURN_IF_ERROR(f.Int("sliding_window_pattern", &pattern, false));
    if (pattern <= 0) return InvalidArgument(fmt::format("{}: sliding_window_pattern must be positive", where));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      names.push_back((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
    }
  } else {
    names.assign(c.num_hidden_layers, "full_attention");
  }
  if (static_cast<int64_t>(names.size()) != c.num_hidden_layers) {
    return InvalidArgument(fmt::format("{}: layer_types has {} entries for {} layers", where, names.size(),
                                       c.num_hidden_layers));
  }
  for (const std::string& name : names) {
    if (name != "full_attention" && name != "sliding_attention") {
      return InvalidArgument(fmt::format("{}: layer_types has '{}'; expected full_attention or sliding_attention",
                                         where, name));
    }
    c.sliding.push_back(name == "sliding_attention");
  }
  return Status::Ok();
}

// The decoder's fields: the whole config.json, or Gemma3ForConditionalGeneration's text_config.
Status ParseText(const nlohmann::json& json, const std::string& where, HfDenseConfig& c) {
  JsonFields f(json, where);
  const bool gemma = c.family == HfDenseFamily::kGemma3;
  EMBER_RETURN_IF_ERROR(f.Int("vocab_size", &c.vocab_size));
  EMBER_RETURN_IF_ERROR(f.Int("hidden_size", &c.hidden_size));
  EMBER_RETURN_IF_ERROR(f.Int("num_hidden_layers", &c.num_hidden_layers));
  EMBER_RETURN_IF_ERROR(f.Int("num_attention_heads", &c.num_attention_heads));
  EMBER_RETURN_IF_ERROR(f.Int("intermediate_size", &c.intermediate_size));
  c.num_key_value_heads = c.num_attention_heads;
  EMBER_RETURN_IF_ERROR(f.Int("num_key_value_heads", &c.num_key_value_heads, false));
  // head_dim: LlamaConfig derives it, Qwen3Config and Gemma3TextConfig default to 128 and 256.
  c.head_dim = c.family == HfDenseFamily::kQwen3 ? 128
               : gemma                           ? 256
               : c.num_attention_heads > 0       ? c.hidden_size / c.num_attention_heads
                                                 : 0;
  EMBER_RETURN_IF_ERROR(f.Int("head_dim", &c.head_dim, false));
  EMBER_RETURN_IF_ERROR(f.Double("rms_norm_eps", &c.rms_norm_eps, false));
  c.max_position_embeddings = gemma ? 131072 : c.family == HfDenseFamily::kQwen3 ? 32768 : 2048;
  EMBER_RETURN_IF_ERROR(f.Int("max_position_embeddings", &c.max_position_embeddings, false));
  c.tie_word_embeddings = gemma;
  EMBER_RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &c.tie_word_embeddings, false));

  std::string act = gemma ? "gelu_pytorch_tanh" : "silu";
  EMBER_RETURN_IF_ERROR(f.String(gemma ? "hidden_activation" : "hidden_act", &act, false));
  if (act != (gemma ? "gelu_pytorch_tanh" : "silu")) {
    return Unimplemented(fmt::format("{}: activation '{}' is not supported for {} (expected {})", where, act,
                                     c.model_type, gemma ? "gelu_pytorch_tanh" : "silu"));
  }
  EMBER_RETURN_IF_ERROR(RequireFalse(f, "attention_bias", where + ": attention_bias true (biased q/k/v/o "
                                     "projections) is not supported"));
  EMBER_RETURN_IF_ERROR(RequireFalse(f, "mlp_bias", where + ": mlp_bias true is not supported"));
  if (f.Has("attn_logit_softcapping")) {
    return Unimplemented(fmt::format("{}: attn_logit_softcapping is not supported (Gemma 2 style attention)", where));
  }
  if (f.Has("partial_rotary_factor")) {
    double partial = 1.0;
    EMBER_RETURN_IF_ERROR(f.Double("partial_rotary_factor", &partial));
    if (partial != 1.0) return Unimplemented(fmt::format("{}: partial_rotary_factor {} is not supported", where, partial));
  }
  if (f.Has("pretraining_tp")) {
    int64_t tp = 1;
    EMBER_RETURN_IF_ERROR(f.Int("pretraining_tp", &tp));  // transformers ignores it in forward
  }
  EMBER_RETURN_IF_ERROR(RequireFalse(f, "use_bidirectional_attention", where + ": use_bidirectional_attention true "
                                     "(an embedding model, not a causal LM) is not supported"));
  if (c.family == HfDenseFamily::kQwen3) {
    EMBER_RETURN_IF_ERROR(RequireFalse(f, "use_sliding_window", where + ": use_sliding_window true is not "
                                       "supported for Qwen3"));
  }

  // RoPE: transformers 5 writes rope_parameters (per layer type for Gemma 3); older configs
  // rope_theta, rope_scaling and Gemma's rope_local_base_freq.
  const double default_theta = gemma ? 1000000.0 : 10000.0;
  if (const nlohmann::json* params = f.Object("rope_parameters"); params != nullptr && !params->is_null()) {
    if (gemma && params->contains("full_attention")) {
      EMBER_ASSIGN_OR_RETURN(c.rope, ParseRope(default_theta, &params->at("full_attention"),
                                               where + ": rope_parameters.full_attention"));
      const nlohmann::json* local = params->contains("sliding_attention") ? &params->at("sliding_attention") : nullptr;
      EMBER_ASSIGN_OR_RETURN(c.local_rope, ParseRope(10000.0, local, where + ": rope_parameters.sliding_attention"));
    } else {
      EMBER_ASSIGN_OR_RETURN(c.rope, ParseRope(default_theta, params, where + ": rope_parameters"));
      c.local_rope = c.rope;
    }
  } else {
    double theta = default_theta;
    EMBER_RETURN_IF_ERROR(f.Double("rope_theta", &theta, false));
    EMBER_ASSIGN_OR_RETURN(c.rope, ParseRope(theta, f.Object("rope_scaling"), where + ": rope_scaling"));
    c.local_rope = c.rope;
    if (gemma) {
      double local = 10000.0;
      EMBER_RETURN_IF_ERROR(f.Double("rope_local_base_freq", &local, false));
      c.local_rope = HfRope{};
      c.local_rope.theta = local;
    }
  }

  EMBER_RETURN_IF_ERROR(ParseLayerTypes(f, c, where));
  if (gemma) {
    c.sliding_window = 4096;
    EMBER_RETURN_IF_ERROR(f.Int("sliding_window", &c.sliding_window, false));
    c.query_pre_attn_scalar = 256;
    EMBER_RETURN_IF_ERROR(f.Double("query_pre_attn_scalar", &c.query_pre_attn_scalar, false));
    EMBER_RETURN_IF_ERROR(f.Double("final_logit_softcapping", &c.final_logit_softcapping, false));
    if (c.sliding_window <= 0 || !(c.query_pre_attn_scalar > 0)) {
      return InvalidArgument(fmt::format("{}: sliding_window and query_pre_attn_scalar must be positive", where));
    }
  } else {
    for (bool s : c.sliding) {
      if (s) return Unimplemented(fmt::format("{}: sliding_attention layers are not supported for {}", where,
                                              c.model_type));
    }
  }
  if (f.Has("bos_token_id")) EMBER_RETURN_IF_ERROR(f.Int("bos_token_id", &c.bos_token_id));
  return f.IntOrIntList("eos_token_id", &c.eos_token_ids, false);
}

Status Validate(const HfDenseConfig& c, const std::string& where) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_hidden_layers <= 0 || c.intermediate_size <= 0) {
    return InvalidArgument(fmt::format("{}: vocab_size, hidden_size, num_hidden_layers and intermediate_size must "
                                       "be positive", where));
  }
  if (c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads ||
      c.head_dim <= 0 || c.head_dim % 2 != 0) {
    return InvalidArgument(fmt::format("{}: {} heads, {} KV heads, head_dim {}: heads must be a positive multiple "
                                       "of the KV heads and head_dim positive and even", where,
                                       c.num_attention_heads, c.num_key_value_heads, c.head_dim));
  }
  if (c.max_position_embeddings <= 0 || !(c.rms_norm_eps > 0)) {
    return InvalidArgument(fmt::format("{}: max_position_embeddings and rms_norm_eps must be positive", where));
  }
  return Status::Ok();
}

}  // namespace

std::vector<float> HfRope::InverseFrequencies(int64_t head_dim) const {
  std::vector<float> inv(head_dim / 2);
  kernels::RopeInverseFrequencies(theta, head_dim, inv.data());
  if (type == "linear") {
    for (float& f : inv) f /= static_cast<float>(factor);
  } else if (type == "llama3") {
    // transformers' _compute_llama3_parameters, elementwise in f32.
    const float old_len = static_cast<float>(original_max_position_embeddings);
    const float low_wavelen = old_len / static_cast<float>(low_freq_factor);
    const float high_wavelen = old_len / static_cast<float>(high_freq_factor);
    const float fac = static_cast<float>(factor);
    for (float& f : inv) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      float scaled = wavelen > low_wavelen ? f / fac : f;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
        const float smooth = (old_len / wavelen - static_cast<float>(low_freq_factor)) /
                             static_cast<float>(high_freq_factor - low_freq_factor);
        scaled = (1.0f - smooth) * scaled / fac + smooth * scaled;
      }
      f = scaled;
    }
  }
  return inv;
}

Expected<HfDenseConfig> HfDenseConfig::FromJson(const nlohmann::json& json, const std::string& where) {
  HfDenseConfig c;
  c.model_type = ModelTypeOf(json);
  if (c.model_type == "llama") {
    c.family = HfDenseFamily::kLlama;
  } else if (c.model_type == "qwen3") {
    c.family = HfDenseFamily::kQwen3;
  } else if (c.model_type == "gemma3_text" || c.model_type == "gemma3") {
    c.family = HfDenseFamily::kGemma3;
  } else {
    return Unimplemented(fmt::format("{}: model_type '{}' is not a dense architecture ember reads (llama, qwen3, "
                                     "gemma3_text, gemma3)", where, c.model_type));
  }
  // A head other than the language-model one (ForSequenceClassification, ForTokenClassification,
  // ...) computes something else from the same decoder.
  if (auto archs = json.find("architectures"); archs != json.end() && archs->is_array() && !archs->empty()) {
    bool lm = false;
    for (const auto& a : *archs) {
      const std::string name = a.is_string() ? a.get<std::string>() : "";
      lm = lm || name.ends_with("ForCausalLM") || name == "Gemma3ForConditionalGeneration";
    }
    if (!lm) {
      return Unimplemented(fmt::format("{}: architectures {} has no causal-LM head ember runs (expected "
                                       "LlamaForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM or "
                                       "Gemma3ForConditionalGeneration)", where, archs->dump()));
    }
  }
  if (c.model_type == "gemma3") {
    // Gemma3ForConditionalGeneration: the text decoder's config is text_config; ids may sit on
    // the outer config.
    auto text = json.find("text_config");
    if (text == json.end() || !text->is_object()) {
      return InvalidArgument(fmt::format("{}: model_type gemma3 without a text_config object", where));
    }
    EMBER_RETURN_IF_ERROR(ParseText(*text, where + ": text_config", c));
    JsonFields outer(json, where);
    if (c.bos_token_id < 0 && outer.Has("bos_token_id")) EMBER_RETURN_IF_ERROR(outer.Int("bos_token_id", &c.bos_token_id));
    if (c.eos_token_ids.empty()) EMBER_RETURN_IF_ERROR(outer.IntOrIntList("eos_token_id", &c.eos_token_ids, false));
  } else {
    EMBER_RETURN_IF_ERROR(ParseText(json, where, c));
  }
  EMBER_RETURN_IF_ERROR(Validate(c, where));
  return c;
}

Expected<HfDenseConfig> HfDenseConfig::FromDirectory(const std::string& dir) {
  const std::string path = dir + "/config.json";
  EMBER_ASSIGN_OR_RETURN(nlohmann::json json, ReadJsonFile(path, true));
  EMBER_ASSIGN_OR_RETURN(HfDenseConfig c, FromJson(json, path));
  const std::string generation = dir + "/generation_config.json";
  EMBER_ASSIGN_OR_RETURN(nlohmann::json gen, ReadJsonFile(generation, false));
  if (gen.is_object()) {
    JsonFields f(gen, generation);
    std::vector<int64_t> extra;
    EMBER_RETURN_IF_ERROR(f.IntOrIntList("eos_token_id", &extra, false));
    for (int64_t id : extra) {
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
        c.eos_token_ids.push_back(id);
      }
    }
    if (c.bos_token_id < 0 && f.Has("bos_token_id")) EMBER_RETURN_IF_ERROR(f.Int("bos_token_id", &c.bos_token_id));
  }
  return c;
}

}  // namespace ember
