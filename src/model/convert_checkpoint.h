// `ember convert`: writes a bf16 checkpoint's routed experts quantized, in a layout its producer's
// consumers (and ember) read, so that loading skips the conversion:
//
//   nvfp4  ModelOpt: <experts>.gate_up_proj U8 + _weight_scale F8_E4M3 + _weight_scale_2 F32 [E, 2]
//          (gate and up halves with their own global scales), down_proj with [E];
//          hf_quant_config.json and config.json quantization_config (quant_method "modelopt")
//   mxfp4  Quark-style: <experts>.<param> U8 + _weight_scale U8 (e8m0); config.json
//          quantization_config (quant_method "quark", fp4, group 32, e8m0, scale_calculation_mode
//          "even" or "floor" as `mxfp4_rounding` chose)
//   fp8    <experts>.<param> F8_E4M3 + _weight_scale_inv F32 [E, ceil(R/128), ceil(C/128)];
//          config.json quantization_config (quant_method "fp8", weight_block_size [128, 128])
//
// Stacked expert tensors are those named *.mlp.experts.gate_up_proj / *.mlp.experts.down_proj
// (rank 3, bf16/f32); everything else is copied byte for byte, shard by shard, and every other
// file of the directory (tokenizer, generation config, chat template) is copied. The quantization
// is the load-time one (QuantizeStack), so the converted checkpoint loads to the same model.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "quant/block_scaled.h"

namespace ember {

struct ConvertStats {
  int64_t tensors_converted = 0;
  int64_t bytes_in = 0;   // tensor bytes read
  int64_t bytes_out = 0;  // tensor bytes written
};

// Converts `in_dir` into `out_dir` (created; must not exist or be empty). `progress` is called
// with (done, total) after each converted tensor. The input must not be quantized already.
Expected<ConvertStats> ConvertCheckpoint(const std::string& in_dir, const std::string& out_dir,
                                         quant::WeightFormat format,
                                         const std::function<void(int64_t, int64_t)>& progress = {},
                                         quant::Mxfp4ScaleRounding mxfp4_rounding = quant::Mxfp4ScaleRounding::kEven);

}  // namespace ember
