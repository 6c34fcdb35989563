// Reading quantized expert weights in the producers' checkpoint layouts, and quantizing bf16 ones
// while loading (--quantization).
//
// Tensor names for the stacked experts `<module>.<param>` (module "...layers.N.mlp.experts",
// param "gate_up_proj" [E, 2I, Hm] with gate rows first, or "down_proj" [E, Hm, I]):
//
//   ModelOpt NVFP4  <m>.<p> U8 [E, R, C/2]; <m>.<p>_weight_scale F8_E4M3 [E, R, C/16];
//                   <m>.<p>_weight_scale_2 F32 [E, 2] for gate_up (gate, up), [E] for down;
//                   <m>.<p>_input_scale is not used (activations stay f32)
//   Quark MXFP4     <m>.<p> U8 [E, R, C/2]; <m>.<p>_weight_scale U8 or F8_E8M0 [E, R, C/32]
//                   (the per-linear Quark names `.weight` / `.weight_scale` applied to the fused
//                   parameter as ModelOpt does; the released Quark card was not available)
//   FP8 scale_inv   <m>.<p> F8_E4M3 [E, R, C]; <m>.<p>_weight_scale_inv F32 [E, ceil(R/128), ceil(C/128)]
//   compressed-     per-expert linears <m>.<e>.{gate_proj,up_proj,down_proj}, as llm-compressor
//   tensors         writes MoE experts: NVFP4 .weight_packed U8 [r, c/2], .weight_scale F8_E4M3
//                   [r, c/16], .weight_global_scale F32 [1] (stored inverted: value = code * scale /
//                   global, so ember multiplies by 1/global); FP8 .weight F8_E4M3 [r, c] with
//                   .weight_scale F32/BF16 [1] (tensor), [r, 1] (channel) or [ceil(r/128),
//                   ceil(c/128)] (block)
//
// Modules the scheme excludes (and every module of an unquantized checkpoint) are read as bf16/f32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "model/expert_weights.h"
#include "model/quant_scheme.h"
#include "model/weight_source.h"

namespace ember {

struct ExpertTensor {
  std::string module;  // "model.language_model.layers.1.mlp.experts"
  std::string param;   // "gate_up_proj" or "down_proj"
  int64_t experts = 0, rows = 0, cols = 0;
  // 2 for gate_up (gate rows, then up rows; NVFP4 keeps a global scale per half), 1 otherwise.
  int64_t halves = 1;

  std::string Name() const { return module + "." + param; }
};

// The stacked experts `t` as `scheme` stores them. Errors name the tensor and what was expected
// (a missing scale tensor, a wrong dtype or shape, a module the scheme quantizes stored in bf16).
Expected<ExpertWeights> ReadExpertWeights(WeightSource& source, const QuantScheme& scheme, const ExpertTensor& t,
                                          PackForGemm pack = PackForGemm::kYes);

// A stack [E, rows, cols] quantized into dense split planes (ember convert writes these bytes).
struct QuantizedStack {
  quant::WeightFormat format = quant::WeightFormat::kNvfp4;
  int64_t experts = 0, rows = 0, cols = 0, halves = 1;
  std::vector<uint8_t> codes;  // E * rows * CodesRowBytes (FP8: cols bytes per row)
  // MXFP4 / NVFP4: E * rows * ScalesRowBytes bytes; FP8: E * ceil(rows/128) * ceil(cols/128) f32 (128x128 blocks)
  std::vector<uint8_t> scales;
  std::vector<float> globals;  // NVFP4: E * halves weight_scale_2 values; empty otherwise

  // Views over the planes, shared with `self` (which must be this object).
  ExpertWeights View(std::shared_ptr<const QuantizedStack> self, PackForGemm pack = PackForGemm::kYes) const;
};

// Quantizes a bf16/f32 [E, rows, cols] tensor with the reference quantizers of quant/block_scaled.h
// (round to nearest even, deterministic, threaded over experts): NVFP4 with one ModelOpt global
// scale per half, MXFP4 with the scale rule `mxfp4_rounding` (Quark's default "even" unless told),
// FP8 with 128x128 block scales.
Expected<std::shared_ptr<const QuantizedStack>> QuantizeStack(
    const TensorView& stacked, quant::WeightFormat format, int64_t halves,
    quant::Mxfp4ScaleRounding mxfp4_rounding = quant::Mxfp4ScaleRounding::kEven);

// "nvfp4" / "mxfp4" / "fp8" -> format; anything else is InvalidArgument listing the choices.
Expected<quant::WeightFormat> ParseWeightFormat(std::string_view name);

// A --quantization value: the format and, for MXFP4, how block scales are rounded.
struct QuantizationChoice {
  quant::WeightFormat format = quant::WeightFormat::kMxfp4;
  quant::Mxfp4ScaleRounding mxfp4_rounding = quant::Mxfp4ScaleRounding::kEven;
};
// ParseWeightFormat's names, where "mxfp4" rounds scales as Quark does by default ("even", also
// what AMD's AITER quantizes with at run time), plus "mxfp4-floor" (the OCP MX v1.0 rule, Quark's
// "floor") and "mxfp4-even" (explicit). Anything else, "" included, is InvalidArgument listing the
// choices: callers say "no quantization" with no value, not with "".
Expected<QuantizationChoice> ParseQuantization(std::string_view name);

}  // namespace ember
