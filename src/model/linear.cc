#include "model/linear.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/matmul.h"
#include "quant/gguf_dequant.h"
#include "quant/gguf_packed.h"

namespace ember {

Linear Linear::Dense(const TensorView& weight) {
  EMBER_CHECK(weight.shape.rank() == 2, "Linear::Dense needs a 2-D weight, got {}", weight.shape.ToString());
  EMBER_CHECK(weight.dtype == DType::kBF16 || weight.dtype == DType::kF32, "Linear::Dense: dtype {}",
              DTypeName(weight.dtype));
  Linear linear;
  linear.dense_ = weight;
  linear.out_features_ = weight.shape[0];
  linear.in_features_ = weight.shape[1];
  linear.bytes_ = weight.NumBytes();
  return linear;
}

Linear Linear::Quantized(const quant::QuantMatrix& weight) {
  EMBER_CHECK(quant::GgufMatMulSupports(weight.type), "Linear::Quantized: unsupported GGML type {}",
              static_cast<int>(weight.type));
  Linear linear;
  linear.kind_ = Kind::kGguf;
  linear.quant_ = weight;
  // A Q5_0 or Q4_K matrix on an AVX-512 host gets a repacked copy for the 16-row GEMM
  // (quant/gguf_packed.h), used while the avx512 dot variant is active.
  linear.owner_ = quant::PackQuantMatrix(weight);
  linear.quant_.packed = linear.owner_.get();
  if (linear.owner_ != nullptr) {
    linear.repacked_bytes_ = weight.type == GgmlType::kQ5_0 ? quant::PackedQ5_0Bytes(weight.rows, weight.cols)
                                                                   : quant::PackedQ4_KBytes(weight.rows, weight.cols);
  }
  linear.out_features_ = weight.rows;
  linear.in_features_ = weight.cols;
  linear.bytes_ = weight.rows * weight.row_bytes;
  return linear;
}

Linear Linear::BlockScaled(const quant::BlockScaledMatrix& weight, std::shared_ptr<const void> owner) {
  const Status valid = quant::ValidateBlockScaledMatrix(weight);
  EMBER_CHECK(valid.ok(), "Linear::BlockScaled: {}", valid.message());
  Linear linear;
  linear.kind_ = Kind::kBlockScaled;
  linear.block_ = weight;
  linear.owner_ = std::move(owner);
  linear.out_features_ = weight.rows;
  linear.in_features_ = weight.cols;
  linear.bytes_ = weight.PackedBytes();
  return linear;
}

void Linear::Apply(const float* x, int64_t m, float* y) const {
  switch (kind_) {
    case Kind::kGguf: quant::GgufMatMul(x, m, quant_, y); break;
    case Kind::kBlockScaled: quant::BlockScaledMatMul(x, m, block_, y); break;
    case Kind::kDense: kernels::MatMul(x, m, dense_, y); break;
  }
}

Status Linear::ReadRow(int64_t row, float* out) const {
  EMBER_CHECK(row >= 0 && row < out_features_, "row {} of {}", row, out_features_);
  if (kind_ == Kind::kBlockScaled) {
    quant::DequantizeRow(block_, row, out);
    return Status::Ok();
  }
  if (kind_ == Kind::kGguf) {
    const auto* data = static_cast<const uint8_t*>(quant_.data) + row * quant_.row_bytes;
    return quant::DequantizeRow(quant_.type, data, in_features_, out);
  }
  const TensorView r = dense_.Slice0(row);
  if (r.dtype == DType::kBF16) {
    for (int64_t i = 0; i < in_features_; ++i) out[i] = BF16ToF32(r.As<uint16_t>()[i]);
  } else {
    std::copy(r.As<float>(), r.As<float>() + in_features_, out);
  }
  return Status::Ok();
}

}  // namespace ember
