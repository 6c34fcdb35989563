#include "model/quantized_linear.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "core/int_math.h"

namespace ember {
namespace {

using quant::BlockScaledMatrix;
using quant::Fp8ScaleKind;
using quant::WeightFormat;


float ScalarF32(const TensorView& t, int64_t i) {
  return t.dtype == DType::kBF16 ? BF16ToF32(t.As<uint16_t>()[i]) : t.As<float>()[i];
}

Status CheckGlobal(float g, const std::string& name) {
  if (!(std::isfinite(g) && g > 0)) {
    return InvalidArgument(fmt::format("tensor '{}' is {}; a global scale must be finite and positive", name, g));
  }
  return Status::Ok();
}

Status Missing(const QuantScheme& scheme, const std::string& module, const std::string& missing, bool dense) {
  return InvalidArgument(fmt::format(
      "{} quantizes module '{}' (it matches no exclusion), but tensor '{}' is missing{}; a module kept in bf16 "
      "must be listed in the checkpoint's exclusions", scheme.Describe(), module, missing,
      dense ? fmt::format(" while '{}.weight' is present", module) : ""));
}

// A scalar stored as [] or [1].
Expected<float> RequireScalar(WeightSource& w, const std::string& name) {
  Expected<TensorView> t = w.Require(name, {DType::kF32}, Shape{1});
  if (!t.ok()) t = w.Require(name, {DType::kF32}, Shape{});
  if (!t.ok()) return t.status();
  return t->As<float>()[0];
}

}  // namespace

Expected<BlockScaledMatrix> ReadCompressedTensorsMatrix(WeightSource& w, const QuantScheme& scheme,
                                                        const std::string& base, int64_t rows, int64_t cols,
                                                        std::deque<std::vector<float>>& owned) {
  const bool fp8 = scheme.format == WeightFormat::kFp8E4m3;
  BlockScaledMatrix m;
  m.format = scheme.format;
  m.rows = rows;
  m.cols = cols;
  const std::string codes_name = base + (fp8 ? ".weight" : ".weight_packed");
  const std::string scale_name = base + ".weight_scale";
  if (fp8) {
    EMBER_ASSIGN_OR_RETURN(TensorView codes, w.Require(codes_name, {DType::kF8E4M3}, Shape{rows, cols}));
    // Per-tensor scales are [1]; per-channel and block scales are 2-D.
    Expected<TensorView> scalar = w.Require(scale_name, {DType::kF32, DType::kBF16}, Shape{1});
    TensorView s;
    if (scalar.ok()) {
      s = *scalar;
    } else {
      EMBER_ASSIGN_OR_RETURN(s, w.Require(scale_name, {DType::kF32, DType::kBF16}, Shape{-1, -1}));
    }
    m.codes = codes.As<uint8_t>();
    m.codes_row_stride = cols;
    const Shape block{CeilDiv(rows, 128), CeilDiv(cols, 128)};
    if (s.NumElements() == 1) {
      m.fp8_scale_kind = Fp8ScaleKind::kPerTensor;
      m.global_scale = ScalarF32(s, 0);
    } else if (s.shape == Shape{rows, 1} || s.shape == block) {
      m.fp8_scale_kind = s.shape == block ? Fp8ScaleKind::kBlock128 : Fp8ScaleKind::kPerChannel;
      std::vector<float>& f = owned.emplace_back(s.NumElements());
      for (int64_t i = 0; i < s.NumElements(); ++i) f[i] = ScalarF32(s, i);
      m.scales = f.data();
      m.scales_row_stride = m.fp8_scale_kind == Fp8ScaleKind::kBlock128 ? 4 * block[1] : 4;
    } else {
      return InvalidArgument(fmt::format("tensor '{}' has shape {}; an FP8 weight_scale for a [{}, {}] weight is "
                                         "[1] (tensor), [{}, 1] (channel) or {} (128x128 blocks)",
                                         scale_name, s.shape.ToString(), rows, cols, rows, block.ToString()));
    }
  } else {
    if (cols % quant::kNvfp4BlockSize != 0) {
      return InvalidArgument(fmt::format("tensor '{}': {} input features are not a multiple of 16", codes_name, cols));
    }
    EMBER_ASSIGN_OR_RETURN(TensorView codes, w.Require(codes_name, {DType::kU8}, Shape{rows, cols / 2}));
    EMBER_ASSIGN_OR_RETURN(TensorView s, w.Require(scale_name, {DType::kF8E4M3}, Shape{rows, cols / 16}));
    const std::string g_name = base + ".weight_global_scale";
    EMBER_ASSIGN_OR_RETURN(TensorView g, w.Require(g_name, {DType::kF32}, Shape{1}));
    EMBER_RETURN_IF_ERROR(CheckGlobal(g.As<float>()[0], g_name));
    m.codes = codes.As<uint8_t>();
    m.codes_row_stride = cols / 2;
    m.scales = s.data;
    m.scales_row_stride = cols / 16;
    // compressed-tensors stores global = 448 * 6 / amax and dequantizes code * (scale / global).
    m.global_scale = 1.0f / g.As<float>()[0];
  }
  EMBER_RETURN_IF_ERROR(quant::ValidateBlockScaledMatrix(m));
  return m;
}

Expected<OwnedBlockScaledMatrix> ReadQuantizedMatrix(WeightSource& w, const QuantScheme& scheme,
                                                     const std::string& module, int64_t rows, int64_t cols) {
  const WeightFormat format = scheme.format;
  const bool fp8 = format == WeightFormat::kFp8E4m3;
  const bool dense = w.Has(module + ".weight");
  if (scheme.producer == QuantProducer::kCompressedTensors) {
    const std::string codes_name = module + (fp8 ? ".weight" : ".weight_packed");
    if (!w.Has(codes_name)) return Missing(scheme, module, codes_name, dense);
    if (!w.Has(module + ".weight_scale")) return Missing(scheme, module, module + ".weight_scale", false);
    auto owned = std::make_shared<std::deque<std::vector<float>>>();
    EMBER_ASSIGN_OR_RETURN(BlockScaledMatrix m, ReadCompressedTensorsMatrix(w, scheme, module, rows, cols, *owned));
    return OwnedBlockScaledMatrix{m, std::move(owned)};
  }
  // ModelOpt, Quark and FP8 scale_inv name the codes `weight`, as a bf16 checkpoint would.
  const std::string codes_name = module + ".weight";
  const std::string scale_name = module + (fp8 ? ".weight_scale_inv" : ".weight_scale");
  if (!w.Has(scale_name)) return Missing(scheme, module, scale_name, dense);
  if (!fp8 && cols % quant::KBlockSize(format) != 0) {
    return InvalidArgument(fmt::format("tensor '{}': {} input features are not a multiple of the {} block of {}",
                                       codes_name, cols, quant::WeightFormatName(format), quant::KBlockSize(format)));
  }
  const int64_t code_cols = fp8 ? cols : quant::CodesRowBytes(format, cols);
  EMBER_ASSIGN_OR_RETURN(TensorView codes, w.Require(codes_name, {fp8 ? DType::kF8E4M3 : DType::kU8},
                                                     Shape{rows, code_cols}));
  BlockScaledMatrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.codes = codes.As<uint8_t>();
  m.codes_row_stride = code_cols;
  if (fp8) {
    EMBER_ASSIGN_OR_RETURN(TensorView s, w.Require(scale_name, {DType::kF32}, Shape{CeilDiv(rows, 128),
                                                                                   CeilDiv(cols, 128)}));
    m.scales = s.data;
    m.scales_row_stride = 4 * CeilDiv(cols, 128);
    m.fp8_scale_kind = Fp8ScaleKind::kBlock128;
  } else {
    const Shape shape{rows, quant::ScalesRowBytes(format, cols)};
    TensorView s;
    if (format == WeightFormat::kNvfp4) {
      EMBER_ASSIGN_OR_RETURN(s, w.Require(scale_name, {DType::kF8E4M3}, shape));
      const std::string g_name = module + ".weight_scale_2";
      EMBER_ASSIGN_OR_RETURN(m.global_scale, RequireScalar(w, g_name));
      EMBER_RETURN_IF_ERROR(CheckGlobal(m.global_scale, g_name));
      // Activation scales are for W4A4 kernels; ember keeps activations in f32.
      if (w.Has(module + ".input_scale")) (void)RequireScalar(w, module + ".input_scale");
    } else {  // e8m0 bytes, stored as U8 by Quark or as F8_E8M0
      EMBER_ASSIGN_OR_RETURN(s, w.Require(scale_name, {DType::kU8, DType::kE8M0}, shape));
    }
    m.scales = s.data;
    m.scales_row_stride = quant::ScalesRowBytes(format, cols);
  }
  EMBER_RETURN_IF_ERROR(quant::ValidateBlockScaledMatrix(m));
  return OwnedBlockScaledMatrix{m, nullptr};
}

Expected<Linear> ReadQuantizedLinear(WeightSource& w, const QuantScheme& scheme, const std::string& module,
                                     int64_t rows, int64_t cols) {
  EMBER_ASSIGN_OR_RETURN(OwnedBlockScaledMatrix read, ReadQuantizedMatrix(w, scheme, module, rows, cols));
  return Linear::BlockScaled(read.matrix, std::move(read.owner));
}

}  // namespace ember
