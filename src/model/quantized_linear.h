// One quantized linear of a dense layer as the producers store it (one module, not stacked
// experts; quantized_weights.h has those), mapped with no copy. For module `m`
// ("model.layers.0.self_attn.q_proj") of a [rows, cols] weight:
//
//   ModelOpt NVFP4      m.weight U8 [rows, cols/2]; m.weight_scale F8_E4M3 [rows, cols/16];
//                       m.weight_scale_2 F32 [] or [1]; m.input_scale is not used
//   Quark MXFP4         m.weight U8 [rows, cols/2]; m.weight_scale U8 or F8_E8M0 [rows, cols/32]
//   FP8 scale_inv       m.weight F8_E4M3 [rows, cols]; m.weight_scale_inv F32
//                       [ceil(rows/128), ceil(cols/128)]
//   compressed-tensors  NVFP4: m.weight_packed U8 [rows, cols/2], m.weight_scale F8_E4M3
//                       [rows, cols/16], m.weight_global_scale F32 [1] (inverted); FP8: m.weight
//                       F8_E4M3 [rows, cols], m.weight_scale F32/BF16 [1], [rows, 1] or 128x128 blocks
//
// A module the scheme quantizes but whose codes or scales are missing is an error naming both.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/linear.h"
#include "model/quant_scheme.h"
#include "model/weight_source.h"

namespace ember {

// compressed-tensors' layout of the linear `base` (names as above with base for m) as a view;
// FP8 scales that are not f32 (bf16) are widened into a vector appended to `owned`, which must
// outlive the view. The caller has checked that the codes and the scale exist.
Expected<quant::BlockScaledMatrix> ReadCompressedTensorsMatrix(WeightSource& source, const QuantScheme& scheme,
                                                               const std::string& base, int64_t rows, int64_t cols,
                                                               std::deque<std::vector<float>>& owned);

// A block-scaled matrix with whatever keeps its bytes alive (null when they live in the mapping).
struct OwnedBlockScaledMatrix {
  quant::BlockScaledMatrix matrix;
  std::shared_ptr<const void> owner;
};

// The linear `module` as the scheme stores it: the matrix, then the Linear over it.
Expected<OwnedBlockScaledMatrix> ReadQuantizedMatrix(WeightSource& source, const QuantScheme& scheme,
                                                     const std::string& module, int64_t rows, int64_t cols);
Expected<Linear> ReadQuantizedLinear(WeightSource& source, const QuantScheme& scheme, const std::string& module,
                                     int64_t rows, int64_t cols);

}  // namespace ember
