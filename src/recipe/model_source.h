// What the planner needs to know about a model, from one of three inputs: the built-in preset
// `muse-spark-open` (reference/muse_spark.md §1.1–1.2), a Hugging Face config.json (or the
// directory holding it) of a Muse Spark model, or a GGUF file. Nothing here loads weights.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/spec.h"
#include "model/muse_spark_config.h"
#include "recipe/census.h"

namespace ember::recipe {

inline constexpr const char* kMuseSparkOpenPreset = "muse-spark-open";

// Vision (Perception Encoder) + audio tower parameters of Muse Spark Open: the §1.2 checkpoint
// census (821,906,490,368 BF16 elements) minus the text model that MuseSparkCensus counts from
// the config. The towers' own shapes are not in the sources, so this one number is declared.
inline constexpr int64_t kMuseSparkOpenTowerParameters = 2'045'977'600;

struct ModelDescription {
  std::string name;          // preset name or file name
  std::string path;          // what `ember serve` would load ("" for the preset)
  std::string source;        // "preset", "config" or "gguf"
  std::string architecture;  // "muse_spark", "llama", "gemma3", ...
  bool is_moe = false;
  bool has_dspark = false;   // a DSpark drafter exists (Inferact/Muse-Spark-Open-DSpark, §4.1)
  int64_t max_position_embeddings = 0;
  int64_t num_layers = 0;
  // What tensor parallelism divides (src/model/tensor_parallel.h): query heads, the dense MLP's
  // width (0 when unknown) and each expert's FFN width (0 for dense models).
  int64_t num_heads = 0;
  int64_t mlp_intermediate = 0;
  int64_t expert_intermediate = 0;
  int64_t num_experts = 0;  // routed experts per MoE layer (0 for dense models)
  std::vector<kv::LayerKvSpec> kv_layers;
  kv::KvDtype default_kv_dtype = kv::KvDtype::kBF16;  // what `--kv-cache-dtype auto` picks in ember
  std::optional<MuseSparkConfig> muse;  // set for preset and config inputs: the census is derived
  int64_t tower_parameters = 0;
  std::vector<TensorEntry> stored_tensors;  // GGUF inputs: the file's tensors as stored
};

// `model` is "muse-spark-open", a .gguf path, a config.json path or a model directory.
Expected<ModelDescription> DescribeModel(const std::string& model);

// The tensor list of `model` in checkpoint format `checkpoint` (bf16, nvfp4, mxfp4, fp8; "gguf"
// for GGUF inputs, whose tensors are what they are).
Expected<std::vector<TensorEntry>> CensusFor(const ModelDescription& model, const std::string& checkpoint);

}  // namespace ember::recipe
