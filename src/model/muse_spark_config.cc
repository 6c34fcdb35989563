#include "model/muse_spark_config.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "formats/json_fields.h"

namespace ember {
namespace {

// Keys every transformers PreTrainedConfig writes that do not change inference.
void IgnoreGenericKeys(JsonFields& f) {
  f.Ignore({"transformers_version", "architectures", "output_hidden_states", "return_dict", "dtype",
            "torch_dtype", "chunk_size_feed_forward", "is_encoder_decoder", "id2label", "label2id",
            "problem_type", "_name_or_path", "model_type", "output_attentions", "use_cache",
            "initializer_range", "attention_dropout", "output_router_logits", "tie_encoder_decoder",
            "torchscript", "pruned_heads", "add_cross_attention", "tokenizer_class", "prefix",
            "sep_token_id", "decoder_start_token_id", "task_specific_params", "finetuning_task"});
  // Read by ReadQuantScheme (model/quant_scheme.h), which checks it.
  f.Ignore({"quantization_config"});
}

Status ParseLayerTypes(JsonFields& f, MuseSparkConfig& c, const std::string& where) {
  std::vector<std::string> names;
  if (f.Has("layer_types")) {
    EMBER_RETURN_IF_ERROR(f.StringList("layer_types", &names));
  } else {
    // transformers' default: full attention on every 4th layer counted back from the last.
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      names.push_back((c.num_hidden_layers - 1 - i) % 4 == 0 ? "full_attention" : "sliding_attention");
  }
  for (const std::string& name : names) {
    if (name == "full_attention") {
      c.layer_types.push_back(AttentionKind::kFull);
    } else if (name == "sliding_attention") {
      c.layer_types.push_back(AttentionKind::kSliding);
    } else {
      return InvalidArgument(fmt::format("{}: layer_types has '{}'; expected 'full_attention' or "
                                         "'sliding_attention'", where, name));
    }
  }
  if (f.Has("layer_rope_theta")) {
    EMBER_RETURN_IF_ERROR(f.DoubleList("layer_rope_theta", &c.layer_rope_theta));
  } else {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_rope_theta.push_back((c.num_hidden_layers - 1 - i) % 4 == 0 ? 0.0 : c.rope_theta);
  }
  std::vector<std::string> mlp;
  if (f.Has("mlp_layer_types")) {
    EMBER_RETURN_IF_ERROR(f.StringList("mlp_layer_types", &mlp));
  } else {
    mlp.assign(c.num_hidden_layers, "sparse");
  }
  for (const std::string& name : mlp) {
    if (name == "sparse") {
      c.mlp_layer_types.push_back(MlpKind::kSparse);
    } else if (name == "dense") {
      c.mlp_layer_types.push_back(MlpKind::kDense);
    } else {
      return InvalidArgument(fmt::format("{}: mlp_layer_types has '{}'; expected 'sparse' or 'dense'", where, name));
    }
  }
  return Status::Ok();
}

Status ParseRope(JsonFields& f, MuseSparkConfig& c, const std::string& where) {
  const nlohmann::json* rope = f.Object("rope_parameters");
  if (rope == nullptr) {
    if (f.Has("rope_theta")) return f.Double("rope_theta", &c.rope_theta);
    return Status::Ok();  // transformers' default: default RoPE, theta 500000
  }
  JsonFields r(*rope, where + ": rope_parameters");
  std::string type = "default";
  EMBER_RETURN_IF_ERROR(r.String("rope_type", &type, /*required=*/false));
  if (type != "default") {
    return Unimplemented(fmt::format("{}: rope_type '{}' is not supported (Muse Spark uses 'default')", where, type));
  }
  EMBER_RETURN_IF_ERROR(r.Double("rope_theta", &c.rope_theta));
  return r.RejectUnknown();
}

Status ParseTextConfig(const nlohmann::json& json, const std::string& where, MuseSparkConfig& c) {
  JsonFields f(json, where);
  IgnoreGenericKeys(f);
  EMBER_RETURN_IF_ERROR(f.Int("vocab_size", &c.vocab_size));
  EMBER_RETURN_IF_ERROR(f.Int("hidden_size", &c.hidden_size));
  EMBER_RETURN_IF_ERROR(f.Int("num_hidden_layers", &c.num_hidden_layers));
  EMBER_RETURN_IF_ERROR(f.Int("num_attention_heads", &c.num_attention_heads));
  EMBER_RETURN_IF_ERROR(f.Int("num_key_value_heads", &c.num_key_value_heads));
  c.head_dim = 0;
  EMBER_RETURN_IF_ERROR(f.Int("head_dim", &c.head_dim, /*required=*/false));
  if (c.head_dim == 0 && c.num_attention_heads > 0) c.head_dim = c.hidden_size / c.num_attention_heads;
  c.intermediate_size = 16384;
  EMBER_RETURN_IF_ERROR(f.Int("intermediate_size", &c.intermediate_size, false));
  c.max_position_embeddings = 1048576;
  EMBER_RETURN_IF_ERROR(f.Int("max_position_embeddings", &c.max_position_embeddings, false));
  EMBER_RETURN_IF_ERROR(f.Double("rms_norm_eps", &c.rms_norm_eps, false));
  EMBER_RETURN_IF_ERROR(f.Double("post_norm_eps", &c.post_norm_eps, false));
  EMBER_RETURN_IF_ERROR(ParseRope(f, c, where));
  c.sliding_window = 2048;
  EMBER_RETURN_IF_ERROR(f.Int("sliding_window", &c.sliding_window, false));
  c.final_logit_softcapping = 20.0;
  EMBER_RETURN_IF_ERROR(f.Double("final_logit_softcapping", &c.final_logit_softcapping, false));
  c.qk_scale_factor = 5.4730064863875;
  EMBER_RETURN_IF_ERROR(f.Double("qk_scale_factor", &c.qk_scale_factor, false));
  c.output_multiplier = 0.1767766952966369;
  EMBER_RETURN_IF_ERROR(f.Double("output_multiplier", &c.output_multiplier, false));
  c.residual_gate_temperature = 0.3;
  EMBER_RETURN_IF_ERROR(f.Double("residual_gate_temperature", &c.residual_gate_temperature, false));
  EMBER_RETURN_IF_ERROR(f.Int("num_local_experts", &c.num_local_experts));
  EMBER_RETURN_IF_ERROR(f.Int("num_experts_per_tok", &c.num_experts_per_tok));
  EMBER_RETURN_IF_ERROR(f.Int("moe_hidden_size", &c.moe_hidden_size));
  EMBER_RETURN_IF_ERROR(f.Int("moe_intermediate_size", &c.moe_intermediate_size));
  EMBER_RETURN_IF_ERROR(f.Double("routed_scaling_factor", &c.routed_scaling_factor, false));
  // Ignored, as the reference ignores it: transformers' MuseSparkForConditionalGeneration has no
  // _tied_weights_keys, so its tie_weights() ties nothing and the logits always come from its own
  // lm_head.weight, whatever this flag says.
  f.Ignore({"tie_word_embeddings"});
  EMBER_RETURN_IF_ERROR(f.Int("bos_token_id", &c.bos_token_id, false));
  EMBER_RETURN_IF_ERROR(f.Int("pad_token_id", &c.pad_token_id, false));
  EMBER_RETURN_IF_ERROR(f.IntOrIntList("eos_token_id", &c.eos_token_ids, false));

  std::string act = "silu";
  EMBER_RETURN_IF_ERROR(f.String("hidden_act", &act, false));
  if (act != "silu") return Unimplemented(fmt::format("{}: hidden_act '{}' is not supported (expected silu)", where, act));
  bool attention_bias = false;
  EMBER_RETURN_IF_ERROR(f.Bool("attention_bias", &attention_bias, false));
  if (attention_bias) return Unimplemented(fmt::format("{}: attention_bias=true is not supported", where));
  int64_t shared_experts = 0;
  EMBER_RETURN_IF_ERROR(f.Int("num_shared_experts", &shared_experts, false));
  if (shared_experts != 0) {
    return Unimplemented(fmt::format("{}: num_shared_experts={} (Muse Spark has none)", where, shared_experts));
  }
  EMBER_RETURN_IF_ERROR(ParseLayerTypes(f, c, where));
  return f.RejectUnknown();
}

}  // namespace

Expected<MuseSparkConfig> MuseSparkConfig::FromJson(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object()) return InvalidArgument(where + ": expected a JSON object");
  MuseSparkConfig config;
  const std::string model_type = json.value("model_type", std::string());
  if (json.contains("text_config")) {
    if (model_type != "muse_spark") {
      return InvalidArgument(fmt::format("{}: model_type is '{}', expected 'muse_spark'", where, model_type));
    }
    JsonFields top(json, where);
    IgnoreGenericKeys(top);
    // The vision and audio towers are not executed by the text decoder.
    top.Ignore({"vision_config", "audio_config", "image_token_id", "video_token_id", "audio_token_id",
                "out_hidden_size", "projector_hidden_size", "projector_hidden_act", "bos_token_id",
                "eos_token_id", "pad_token_id", "tie_word_embeddings"});
    const nlohmann::json* text = top.Object("text_config");
    if (text == nullptr) return InvalidArgument(where + ": text_config must be an object");
    EMBER_RETURN_IF_ERROR(top.RejectUnknown());
    EMBER_RETURN_IF_ERROR(ParseTextConfig(*text, where + ": text_config", config));
    config.tensor_prefix = "model.language_model.";
  } else {
    if (model_type != "muse_spark_text") {
      return InvalidArgument(fmt::format("{}: model_type is '{}', expected 'muse_spark' or 'muse_spark_text'",
                                         where, model_type));
    }
    EMBER_RETURN_IF_ERROR(ParseTextConfig(json, where, config));
    config.tensor_prefix = "model.";
  }
  EMBER_RETURN_IF_ERROR(config.Validate());
  return config;
}

Expected<MuseSparkConfig> MuseSparkConfig::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open {}: is this a Hugging Face model directory?", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return InvalidArgument(fmt::format("{}: not valid JSON", path));
  return FromJson(json, path);
}

Status MuseSparkConfig::Validate() const {
  auto fail = [](std::string message) { return InvalidArgument("config: " + message); };
  if (vocab_size <= 0 || hidden_size <= 0 || num_hidden_layers <= 0) {
    return fail("vocab_size, hidden_size and num_hidden_layers must be positive");
  }
  if (num_attention_heads <= 0 || num_key_value_heads <= 0 || head_dim <= 0 || head_dim % 2 != 0) {
    return fail(fmt::format("heads ({}), kv heads ({}) must be positive and head_dim ({}) positive and even",
                            num_attention_heads, num_key_value_heads, head_dim));
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    return fail(fmt::format("num_attention_heads ({}) must be a multiple of num_key_value_heads ({})",
                            num_attention_heads, num_key_value_heads));
  }
  const auto layers = static_cast<size_t>(num_hidden_layers);
  if (layer_types.size() != layers || layer_rope_theta.size() != layers || mlp_layer_types.size() != layers) {
    return fail(fmt::format("layer_types ({}), layer_rope_theta ({}) and mlp_layer_types ({}) must each have "
                            "num_hidden_layers ({}) entries",
                            layer_types.size(), layer_rope_theta.size(), mlp_layer_types.size(), layers));
  }
  for (double theta : layer_rope_theta) {
    if (theta < 0) return fail("layer_rope_theta entries must be >= 0 (0 = no RoPE)");
  }
  for (size_t i = 0; i < layers; ++i) {
    if (layer_types[i] == AttentionKind::kSliding && sliding_window <= 0) {
      return fail(fmt::format("layer {} is sliding_attention but sliding_window is {}", i, sliding_window));
    }
  }
  bool any_sparse = false;
  for (MlpKind kind : mlp_layer_types) any_sparse |= kind == MlpKind::kSparse;
  if (any_sparse) {
    if (num_local_experts <= 0 || num_experts_per_tok <= 0 || num_experts_per_tok > num_local_experts) {
      return fail(fmt::format("need 0 < num_experts_per_tok ({}) <= num_local_experts ({})", num_experts_per_tok,
                              num_local_experts));
    }
    if (moe_hidden_size <= 0 || moe_intermediate_size <= 0) {
      return fail("moe_hidden_size and moe_intermediate_size must be positive");
    }
  }
  if (final_logit_softcapping < 0) return fail("final_logit_softcapping must be >= 0 (0 disables it)");
  if (residual_gate_temperature <= 0) return fail("residual_gate_temperature must be positive");
  if (rms_norm_eps <= 0 || post_norm_eps <= 0) return fail("norm epsilons must be positive");
  return Status::Ok();
}

MuseSparkConfig MuseSparkConfig::MuseSparkOpen() {
  MuseSparkConfig c;
  c.vocab_size = 202048;
  c.hidden_size = 8192;
  c.num_hidden_layers = 62;
  c.num_attention_heads = 128;
  c.num_key_value_heads = 16;
  c.head_dim = 64;
  c.intermediate_size = 16384;
  c.max_position_embeddings = 1048576;
  c.rms_norm_eps = 1e-5;
  c.post_norm_eps = 1e-8;
  c.rope_theta = 500000.0;
  c.sliding_window = 2048;
  c.final_logit_softcapping = 20.0;
  c.qk_scale_factor = 5.4730064863875;
  c.output_multiplier = 0.1767766952966369;
  c.residual_gate_temperature = 0.3;
  c.num_local_experts = 256;
  c.num_experts_per_tok = 8;
  c.moe_hidden_size = 4096;
  c.moe_intermediate_size = 4096;
  c.bos_token_id = 200000;
  c.eos_token_ids = {200001, 200008};
  c.pad_token_id = 200018;
  c.SetDefaultLayerPattern();
  return c;
}

void MuseSparkConfig::SetDefaultLayerPattern() {
  layer_types.clear();
  layer_rope_theta.clear();
  mlp_layer_types.clear();
  for (int64_t i = 0; i < num_hidden_layers; ++i) {
    const bool full = (num_hidden_layers - 1 - i) % 4 == 0;
    layer_types.push_back(full ? AttentionKind::kFull : AttentionKind::kSliding);
    layer_rope_theta.push_back(full ? 0.0 : rope_theta);
    mlp_layer_types.push_back(MlpKind::kSparse);
  }
}

ParameterCounts CountParameters(const MuseSparkConfig& c) {
  ParameterCounts p;
  const int64_t h = c.hidden_size;
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  p.embedding = c.vocab_size * h;
  p.lm_head = c.vocab_size * h;
  p.norms_and_gates = h;  // final norm
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    p.attention += h * q_width * 2 /* q, gate */ + h * kv_width * 2 /* k, v */ + q_width * h /* o */;
    p.norms_and_gates += 3 * h /* input, pre-ffn, post-ffn norms */ + 2 * h /* residual gates */;
    if (c.mlp_layer_types[l] == MlpKind::kDense) {
      p.dense_mlp += 3 * h * c.intermediate_size;
      continue;
    }
    const int64_t hm = c.moe_hidden_size;
    const int64_t per_expert = 2 * c.moe_intermediate_size * hm + hm * c.moe_intermediate_size;
    p.router += c.num_local_experts * h + c.num_local_experts;
    p.latent_projections += 2 * h * hm + 2 * hm /* pre- and post-expert norms */;
    p.experts += c.num_local_experts * per_expert;
    p.active_experts += c.num_experts_per_tok * per_expert;
  }
  return p;
}

}  // namespace ember
