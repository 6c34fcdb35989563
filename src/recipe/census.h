// Tensor census: every weight tensor of a model with its shape, dtype and bytes, grouped by
// component. Checkpoint sizes in `ember recipe` are sums over this list (shape x dtype bytes),
// never constants: for Muse Spark the list is generated from the config and a checkpoint layout
// (formats.json), for a GGUF it is the file's own tensor table.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "formats/gguf.h"
#include "model/muse_spark_config.h"
#include "recipe/expr.h"

namespace ember::recipe {

// How a tensor is sharded depends on what it is (memory.cc).
enum class Component {
  kExperts,            // routed expert FFNs (and their quantization scales)
  kAttention,          // q, k, v, output gate, o projections
  kLatentProjections,  // Muse Spark's pre/post expert projections into the latent expert space
  kDenseMlp,           // dense (non-MoE) FFNs
  kRouter,             // router weights and correction biases
  kNorms,              // norm gains and residual gates
  kEmbeddings,         // token embedding table
  kLmHead,             // output projection (absent when tied)
  kMultimodalTowers,   // vision and audio encoders
};
inline constexpr int kNumComponents = 9;
std::string_view ComponentName(Component c);  // "experts", "attention", ...

struct TensorEntry {
  std::string name;
  Component component = Component::kAttention;
  std::vector<int64_t> shape;  // PyTorch order (outermost first)
  std::string dtype;           // "bf16", "f32", "e2m1x2" (two 4-bit codes per byte), "e4m3", "e8m0", GGUF type names
  int64_t bytes = 0;
};

using ComponentBytes = std::array<int64_t, kNumComponents>;
ComponentBytes SumByComponent(const std::vector<TensorEntry>& tensors);
int64_t TotalBytes(const std::vector<TensorEntry>& tensors);

// A checkpoint layout from formats.json: which expert layers are quantized and how.
struct CheckpointFormat {
  std::string name;  // bf16, nvfp4, mxfp4, fp8
  std::string muse_spark_open_repo;  // the published checkpoint of this format, "" if none
  std::string description;
  Expr quantized_expert_layers;  // over `layer` and `num_layers`
  int code_bits = 16;
  int64_t block_rows = 1;  // one scale per block_rows x block_cols weights
  int64_t block_cols = 1;
  std::string scale_dtype;
  int64_t scale_bytes = 0;
  int64_t per_expert_f32_gate_up = 0;  // per-expert f32 scalars (global and input scales)
  int64_t per_expert_f32_down = 0;
  bool assumed = false;  // the layout is not documented for this model
  std::string source;
};

// The formats built into ember (src/recipe/formats.json).
const std::vector<CheckpointFormat>& BuiltinFormats();
Expected<const CheckpointFormat*> FindFormat(std::string_view name);
Expected<std::vector<CheckpointFormat>> ParseFormats(std::string_view json_text);

// The Muse Spark text model (reference/muse_spark.md §1.2 names and shapes) in `format`, plus
// `tower_parameters` BF16 elements of vision/audio encoders as one entry (0 = none counted).
Expected<std::vector<TensorEntry>> MuseSparkCensus(const MuseSparkConfig& config, const CheckpointFormat& format,
                                                   int64_t tower_parameters);

// A GGUF file's tensors as stored, classified by their llama.cpp names.
std::vector<TensorEntry> GgufCensus(const GgufFile& file);

}  // namespace ember::recipe
