#include "recipe/model_source.h"

#include <fmt/format.h>

#include <filesystem>

namespace ember::recipe {

namespace {

ModelDescription FromMuseConfig(const MuseSparkConfig& c) {
  ModelDescription d;
  d.architecture = "muse_spark";
  d.max_position_embeddings = c.max_position_embeddings;
  d.num_layers = c.num_hidden_layers;
  d.num_heads = c.num_attention_heads;
  d.mlp_intermediate = c.intermediate_size;
  d.expert_intermediate = c.moe_intermediate_size;
  d.num_experts = c.num_local_experts;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    d.is_moe |= c.mlp_layer_types[l] == MlpKind::kSparse;
    kv::LayerKvSpec s;
    s.kind = c.IsSliding(l) ? kv::AttentionKind::kSlidingWindow : kv::AttentionKind::kFull;
    s.window = c.IsSliding(l) ? c.sliding_window : 0;
    s.num_kv_heads = c.num_key_value_heads;
    s.head_dim = c.head_dim;
    d.kv_layers.push_back(s);
  }
  // The drafter was trained for the released 816B shape only.
  const MuseSparkConfig open = MuseSparkConfig::MuseSparkOpen();
  d.has_dspark = c.hidden_size == open.hidden_size && c.num_hidden_layers == open.num_hidden_layers &&
                 c.num_local_experts == open.num_local_experts && c.vocab_size == open.vocab_size;
  d.default_kv_dtype = kv::KvDtype::kBF16;
  d.muse = c;
  return d;
}

Expected<ModelDescription> FromGguf(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  const auto arch = file->GetString("general.architecture");
  if (!arch) return InvalidArgument(fmt::format("{}: no general.architecture key", path));
  const std::string a(*arch);
  auto get = [&](const std::string& suffix) { return file->GetInt(a + "." + suffix); };
  const auto layers = get("block_count");
  const auto heads = get("attention.head_count");
  const auto hidden = get("embedding_length");
  if (!layers || !heads || !hidden || *heads <= 0 || *layers <= 0) {
    return InvalidArgument(fmt::format("{}: {}.block_count, attention.head_count or embedding_length is missing", path, a));
  }
  ModelDescription d;
  d.name = std::filesystem::path(path).filename().string();
  d.path = path;
  d.source = "gguf";
  d.architecture = a;
  d.num_layers = *layers;
  d.num_heads = *heads;
  d.mlp_intermediate = get("feed_forward_length").value_or(0);
  d.num_experts = get("expert_count").value_or(0);
  // Same defaults as the loaders in src/model/arch (gguf_common.cc, gemma3.cc).
  d.max_position_embeddings = get("context_length").value_or(4096);
  const int64_t kv_heads = get("attention.head_count_kv").value_or(*heads);
  const int64_t head_dim = get("attention.key_length").value_or(*hidden / *heads);
  const int64_t window = get("attention.sliding_window").value_or(a == "gemma3" ? 512 : 0);
  const int64_t pattern = get("attention.sliding_window_pattern").value_or(a == "gemma3" ? 6 : 0);
  for (int64_t l = 0; l < *layers; ++l) {
    kv::LayerKvSpec s;
    const bool sliding = window > 0 && pattern > 0 && (l + 1) % pattern != 0;
    s.kind = sliding ? kv::AttentionKind::kSlidingWindow : kv::AttentionKind::kFull;
    s.window = sliding ? window : 0;
    s.num_kv_heads = kv_heads;
    s.head_dim = head_dim;
    d.kv_layers.push_back(s);
  }
  d.stored_tensors = GgufCensus(*file);
  for (const TensorEntry& t : d.stored_tensors) d.is_moe |= t.component == Component::kExperts;
  d.default_kv_dtype = kv::KvDtype::kF16;  // llama.cpp's default, as ember uses for GGUF
  return d;
}

}  // namespace

Expected<ModelDescription> DescribeModel(const std::string& model) {
  if (model == kMuseSparkOpenPreset) {
    ModelDescription d = FromMuseConfig(MuseSparkConfig::MuseSparkOpen());
    d.name = kMuseSparkOpenPreset;
    d.source = "preset";
    d.tower_parameters = kMuseSparkOpenTowerParameters;
    return d;
  }
  namespace fs = std::filesystem;
  if (model.size() > 5 && model.substr(model.size() - 5) == ".gguf") return FromGguf(model);
  fs::path config = model;
  if (fs::is_directory(config)) config /= "config.json";
  if (!fs::exists(config)) {
    return NotFound(fmt::format("'{}' is not {}, a .gguf file, a config.json or a directory holding one", model,
                                kMuseSparkOpenPreset));
  }
  auto parsed = MuseSparkConfig::FromFile(config.string());
  if (!parsed.ok()) {
    return InvalidArgument(fmt::format("{} (ember recipe reads Muse Spark config.json files; other models as GGUF)",
                                       parsed.status().message()));
  }
  ModelDescription d = FromMuseConfig(*parsed);
  d.name = fs::is_directory(model) ? fs::path(model).filename().string() : config.parent_path().filename().string();
  d.path = fs::is_directory(model) ? model : config.parent_path().string();
  d.source = "config";
  return d;
}

Expected<std::vector<TensorEntry>> CensusFor(const ModelDescription& model, const std::string& checkpoint) {
  if (model.source == "gguf") {
    if (checkpoint != "gguf") {
      return InvalidArgument(fmt::format("{} is a GGUF file: its tensors keep their stored types (checkpoint gguf, not {})",
                                         model.name, checkpoint));
    }
    return model.stored_tensors;
  }
  EMBER_ASSIGN_OR_RETURN(const CheckpointFormat* format, FindFormat(checkpoint));
  return MuseSparkCensus(*model.muse, *format, model.tower_parameters);
}

}  // namespace ember::recipe
