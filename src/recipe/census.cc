#include "recipe/census.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <numeric>

#include "core/check.h"
#include "recipe/embedded_data.h"

namespace ember::recipe {

std::string_view ComponentName(Component c) {
  switch (c) {
    case Component::kExperts: return "experts";
    case Component::kAttention: return "attention";
    case Component::kLatentProjections: return "latent_projections";
    case Component::kDenseMlp: return "dense_mlp";
    case Component::kRouter: return "router";
    case Component::kNorms: return "norms";
    case Component::kEmbeddings: return "embeddings";
    case Component::kLmHead: return "lm_head";
    case Component::kMultimodalTowers: return "multimodal_towers";
  }
  return "?";
}

ComponentBytes SumByComponent(const std::vector<TensorEntry>& tensors) {
  ComponentBytes sums{};
  for (const TensorEntry& t : tensors) sums[static_cast<int>(t.component)] += t.bytes;
  return sums;
}

int64_t TotalBytes(const std::vector<TensorEntry>& tensors) {
  int64_t total = 0;
  for (const TensorEntry& t : tensors) total += t.bytes;
  return total;
}

Expected<std::vector<CheckpointFormat>> ParseFormats(std::string_view json_text) {
  const auto json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("formats") || !json["formats"].is_array()) {
    return InvalidArgument("formats data: expected an object with a 'formats' array");
  }
  std::vector<CheckpointFormat> formats;
  for (const auto& f : json["formats"]) {
    CheckpointFormat format;
    try {
      format.name = f.at("name").get<std::string>();
      format.description = f.at("description").get<std::string>();
      format.muse_spark_open_repo = f.at("muse_spark_open_repo").get<std::string>();
      EMBER_ASSIGN_OR_RETURN(format.quantized_expert_layers,
                             Expr::Parse(f.at("quantized_expert_layers").get<std::string>()));
      format.code_bits = f.at("code_bits").get<int>();
      format.block_rows = f.at("block_rows").get<int64_t>();
      format.block_cols = f.at("block_cols").get<int64_t>();
      format.scale_dtype = f.at("scale_dtype").get<std::string>();
      format.scale_bytes = f.at("scale_bytes").get<int64_t>();
      format.per_expert_f32_gate_up = f.at("per_expert_f32_gate_up").get<int64_t>();
      format.per_expert_f32_down = f.at("per_expert_f32_down").get<int64_t>();
      format.assumed = f.at("assumed").get<bool>();
      format.source = f.at("source").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument(fmt::format("formats data: {}", e.what()));
    }
    if (format.block_rows <= 0 || format.block_cols <= 0 || (format.code_bits != 4 && format.code_bits != 8 &&
                                                             format.code_bits != 16)) {
      return InvalidArgument(fmt::format("format {}: code_bits must be 4, 8 or 16 and blocks positive", format.name));
    }
    formats.push_back(std::move(format));
  }
  return formats;
}

const std::vector<CheckpointFormat>& BuiltinFormats() {
  static const std::vector<CheckpointFormat> formats = [] {
    auto parsed = ParseFormats(EmbeddedFormatsJson());
    EMBER_CHECK(parsed.ok(), "built-in formats.json: {}", parsed.status().ToString());
    return std::move(*parsed);
  }();
  return formats;
}

Expected<const CheckpointFormat*> FindFormat(std::string_view name) {
  std::string known;
  for (const CheckpointFormat& f : BuiltinFormats()) {
    if (f.name == name) return &f;
    known += (known.empty() ? "" : ", ") + f.name;
  }
  return InvalidArgument(fmt::format("unknown checkpoint format '{}': use one of {}", name, known));
}

namespace {

int64_t Product(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

TensorEntry Entry(std::string name, Component c, std::vector<int64_t> shape, std::string dtype, int64_t elem_bytes) {
  TensorEntry t{std::move(name), c, std::move(shape), std::move(dtype), 0};
  t.bytes = Product(t.shape) * elem_bytes;
  return t;
}

// One [E, N, K] expert weight in `format`: BF16, or codes + block scales + per-expert f32 scalars.
Status AddExpertTensor(const std::string& name, int64_t e, int64_t n, int64_t k, bool quantized,
                       const CheckpointFormat& f, int64_t per_expert_f32, std::vector<TensorEntry>* out) {
  if (!quantized || f.code_bits == 16) {
    out->push_back(Entry(name, Component::kExperts, {e, n, k}, "bf16", 2));
    return Status::Ok();
  }
  if (n % f.block_rows != 0 || k % f.block_cols != 0 || (k * f.code_bits) % 8 != 0) {
    return InvalidArgument(fmt::format("{}: [{}, {}, {}] is not a whole number of {}x{} {} blocks", name, e, n, k,
                                       f.block_rows, f.block_cols, f.name));
  }
  TensorEntry codes{name, Component::kExperts, {e, n, k * f.code_bits / 8}, f.code_bits == 4 ? "e2m1x2" : "e4m3", 0};
  codes.bytes = Product(codes.shape);
  out->push_back(std::move(codes));
  out->push_back(Entry(name + "_weight_scale", Component::kExperts, {e, n / f.block_rows, k / f.block_cols},
                       f.scale_dtype, f.scale_bytes));
  if (per_expert_f32 > 0) out->push_back(Entry(name + "_scales_f32", Component::kExperts, {e, per_expert_f32}, "f32", 4));
  return Status::Ok();
}

}  // namespace

Expected<std::vector<TensorEntry>> MuseSparkCensus(const MuseSparkConfig& c, const CheckpointFormat& format,
                                                   int64_t tower_parameters) {
  EMBER_RETURN_IF_ERROR(c.Validate());
  std::vector<TensorEntry> out;
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  const std::string& p = c.tensor_prefix;
  out.push_back(Entry(p + "embed_tokens.weight", Component::kEmbeddings, {c.vocab_size, h}, "bf16", 2));
  out.push_back(Entry("lm_head.weight", Component::kLmHead, {c.vocab_size, h}, "bf16", 2));  // never tied
  out.push_back(Entry(p + "norm.weight", Component::kNorms, {h}, "bf16", 2));
  Facts layer_facts{{"num_layers", Value::Number(static_cast<double>(c.num_hidden_layers))}};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string lp = fmt::format("{}layers.{}.", p, l);
    out.push_back(Entry(lp + "self_attn.q_proj.weight", Component::kAttention, {q, h}, "bf16", 2));
    out.push_back(Entry(lp + "self_attn.k_proj.weight", Component::kAttention, {kv, h}, "bf16", 2));
    out.push_back(Entry(lp + "self_attn.v_proj.weight", Component::kAttention, {kv, h}, "bf16", 2));
    out.push_back(Entry(lp + "self_attn.gate_proj.weight", Component::kAttention, {q, h}, "bf16", 2));
    out.push_back(Entry(lp + "self_attn.o_proj.weight", Component::kAttention, {h, q}, "bf16", 2));
    for (const char* norm : {"input_layernorm.weight", "pre_feedforward_layernorm.weight",
                             "post_feedforward_layernorm.weight", "post_attention_residual_gate.gate",
                             "post_feedforward_residual_gate.gate"}) {
      out.push_back(Entry(lp + norm, Component::kNorms, {h}, "bf16", 2));
    }
    if (c.mlp_layer_types[l] == MlpKind::kDense) {
      const int64_t i = c.intermediate_size;
      out.push_back(Entry(lp + "mlp.gate_proj.weight", Component::kDenseMlp, {i, h}, "bf16", 2));
      out.push_back(Entry(lp + "mlp.up_proj.weight", Component::kDenseMlp, {i, h}, "bf16", 2));
      out.push_back(Entry(lp + "mlp.down_proj.weight", Component::kDenseMlp, {h, i}, "bf16", 2));
      continue;
    }
    const int64_t e = c.num_local_experts, hm = c.moe_hidden_size, i = c.moe_intermediate_size;
    out.push_back(Entry(lp + "mlp.gate.weight", Component::kRouter, {e, h}, "f32", 4));
    out.push_back(Entry(lp + "mlp.gate.e_score_correction_bias", Component::kRouter, {e}, "f32", 4));
    out.push_back(Entry(lp + "mlp.pre_expert_proj.weight", Component::kLatentProjections, {hm, h}, "bf16", 2));
    out.push_back(Entry(lp + "mlp.pre_expert_norm.weight", Component::kNorms, {hm}, "bf16", 2));
    out.push_back(Entry(lp + "mlp.post_expert_proj.weight", Component::kLatentProjections, {h, hm}, "bf16", 2));
    out.push_back(Entry(lp + "mlp.experts.post_expert_norm.weight", Component::kNorms, {hm}, "bf16", 2));
    layer_facts["layer"] = Value::Number(static_cast<double>(l));
    EMBER_ASSIGN_OR_RETURN(const bool quantized, format.quantized_expert_layers.EvalBool(layer_facts));
    EMBER_RETURN_IF_ERROR(AddExpertTensor(lp + "mlp.experts.gate_up_proj", e, 2 * i, hm, quantized, format,
                                          format.per_expert_f32_gate_up, &out));
    EMBER_RETURN_IF_ERROR(AddExpertTensor(lp + "mlp.experts.down_proj", e, hm, i, quantized, format,
                                          format.per_expert_f32_down, &out));
  }
  if (tower_parameters > 0) {
    out.push_back(Entry("model.vision_tower.* + model.audio_tower.*", Component::kMultimodalTowers,
                        {tower_parameters}, "bf16", 2));
  }
  return out;
}

std::vector<TensorEntry> GgufCensus(const GgufFile& file) {
  std::vector<TensorEntry> out;
  for (const GgufTensor& t : file.tensors()) {
    const std::string& n = t.name;
    Component c = Component::kNorms;
    // Multimodal projector files name their encoder tensors v.*, a.* and mm.*; they have
    // attention and FFN tensors of their own, so they are matched first.
    if (n.rfind("v.", 0) == 0 || n.rfind("a.", 0) == 0 || n.rfind("mm.", 0) == 0) c = Component::kMultimodalTowers;
    else if (n.rfind("token_embd", 0) == 0) c = Component::kEmbeddings;
    else if (n.rfind("output.", 0) == 0) c = Component::kLmHead;
    else if (n.find("_exps") != std::string::npos) c = Component::kExperts;
    else if (n.find("ffn_gate_inp") != std::string::npos || n.find("exp_probs_b") != std::string::npos) c = Component::kRouter;
    else if (n.find("norm") != std::string::npos) c = Component::kNorms;
    else if (n.find("attn_") != std::string::npos) c = Component::kAttention;
    else if (n.find("ffn_") != std::string::npos) c = Component::kDenseMlp;
    // GGUF dims are innermost first; the census uses PyTorch order.
    std::vector<int64_t> shape(t.dims.rbegin(), t.dims.rend());
    out.push_back(TensorEntry{n, c, std::move(shape), std::string(t.type.name), t.bytes});
  }
  return out;
}

}  // namespace ember::recipe
