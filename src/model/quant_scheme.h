// How a safetensors checkpoint's weights are quantized, read from the producer's metadata:
//
//   producer            where                                         weights
//   ModelOpt NVFP4      hf_quant_config.json {"quantization": {"quant_algo": "NVFP4", "group_size": 16,
//                       "exclude_modules": [...]}}, or config.json quantization_config
//                       {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore"/"exclude_modules"}
//   Quark MXFP4         config.json quantization_config {"quant_method": "quark", "global_quant_config":
//                       {"weight": {"dtype": "fp4", "group_size": 32, "scale_format": "e8m0"}}, "exclude"}
//   compressed-tensors  config.json quantization_config {"quant_method": "compressed-tensors", "format":
//                       "nvfp4-pack-quantized" | "float-quantized", "config_groups", "ignore"}
//   FP8 block           config.json quantization_config {"quant_method": "fp8", "weight_block_size":
//                       [128, 128]} (`weight_scale_inv` tensors, DeepSeek / Qwen style)
//
// Exclusion lists name modules kept in full precision (glob patterns with * and ?, or "re:<regex>"
// matched from the start of the name as compressed-tensors does). Which tensor names each layout
// uses is in quantized_weights.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "quant/block_scaled.h"

namespace ember {

enum class QuantProducer : uint8_t { kNone, kModelOpt, kQuark, kCompressedTensors, kFp8ScaleInv };

struct QuantScheme {
  QuantProducer producer = QuantProducer::kNone;
  quant::WeightFormat format = quant::WeightFormat::kNvfp4;  // meaningful when producer != kNone
  std::vector<std::string> exclude;                          // modules left in bf16/f32
  std::string source;  // "hf_quant_config.json", "config.json quantization_config"

  bool quantized() const { return producer != QuantProducer::kNone; }
  // Whether `module` (e.g. "model.language_model.layers.0.mlp.experts") matches an exclusion.
  bool Excludes(std::string_view module) const;
  // "ModelOpt NVFP4 (hf_quant_config.json)", "none".
  std::string Describe() const;
};

// Reads `model_dir`'s hf_quant_config.json and config.json (top level or text_config)
// quantization_config. No metadata: producer kNone. Unknown methods or algorithms, or settings
// ember cannot run (an NVFP4 group size other than 16, MX scales other than e8m0, FP8 blocks
// other than 128x128), are errors that name the file and the field.
Expected<QuantScheme> ReadQuantScheme(const std::string& model_dir);
// The same from JSON text: `hf_quant_config` (may be empty) and config.json's
// `quantization_config` object as text (may be empty).
Expected<QuantScheme> ParseQuantScheme(std::string_view hf_quant_config, std::string_view quantization_config);

// Glob (* and ?) or "re:" pattern match of a module name, as used by the exclusion lists.
bool ModuleMatches(std::string_view pattern, std::string_view module);

}  // namespace ember
