#include "model/linear.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/check.h"
#include "kernels/matmul.h"
#include "quant/block_scaled_packed.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_dequant.h"
#include "quant/gguf_packed.h"
#include "quant/gguf_type_kernels.h"

namespace ember {

Linear Linear::Dense(const TensorView& weight, std::shared_ptr<const void> owner) {
  EMBER_CHECK(weight.shape.rank() == 2, "Linear::Dense needs a 2-D weight, got {}", weight.shape.ToString());
  EMBER_CHECK(weight.dtype == DType::kBF16 || weight.dtype == DType::kF32, "Linear::Dense: dtype {}",
              DTypeName(weight.dtype));
  Linear linear;
  linear.dense_ = weight;
  linear.out_features_ = weight.shape[0];
  linear.in_features_ = weight.shape[1];
  linear.bytes_ = weight.NumBytes();
  linear.own_bytes_ = std::move(owner);
  return linear;
}

Linear Linear::Quantized(const quant::QuantMatrix& weight, std::shared_ptr<const void> owner) {
  EMBER_CHECK(quant::GgufMatMulSupports(weight.type), "Linear::Quantized: unsupported GGML type {}",
              static_cast<int>(weight.type));
  Linear linear;
  linear.apply_ = &ApplyGguf;
  linear.read_row_ = &ReadGgufRow;
  linear.quant_ = weight;
  // A type with a packed form (every quantized type, quant/gguf_packed.h) gets a repacked copy for
  // the 16-row GEMM while the avx512 variant is active, or the avx2 one for the 32-element types.
  linear.owner_ = quant::PackQuantMatrix(weight);
  linear.quant_.packed = linear.owner_.get();
  if (linear.owner_ != nullptr) {
    linear.repacked_bytes_ = quant::FindGgufKernels(weight.type)->packed->bytes(weight.rows, weight.cols);
  }
  linear.out_features_ = weight.rows;
  linear.in_features_ = weight.cols;
  linear.bytes_ = weight.rows * weight.row_bytes;
  linear.own_bytes_ = std::move(owner);
  return linear;
}

Linear Linear::BlockScaled(const quant::BlockScaledMatrix& weight, std::shared_ptr<const void> owner) {
  const Status valid = quant::ValidateBlockScaledMatrix(weight);
  EMBER_CHECK(valid.ok(), "Linear::BlockScaled: {}", valid.message());
  Linear linear;
  linear.apply_ = &ApplyBlockScaled;
  linear.read_row_ = &ReadBlockScaledRow;
  linear.block_ = weight;
  linear.owner_ = std::move(owner);
  if (quant::PackedBuffer packed = quant::MaybePackBlockScaledMatrix(weight); packed != nullptr) {
    linear.block_.packed = packed.get();
    linear.repacked_bytes_ = quant::PackedFp4Bytes(weight.format, weight.rows, weight.cols);
    linear.packed_owner_ = std::move(packed);
  }
  linear.out_features_ = weight.rows;
  linear.in_features_ = weight.cols;
  linear.bytes_ = weight.PackedBytes();
  return linear;
}

void Linear::Apply(const float* x, int64_t m, float* y) const { apply_(*this, x, m, y); }

Expected<Linear> Linear::GatherRows(std::span<const int32_t> rows) const {
  for (const int32_t row : rows) {
    if (row < 0 || row >= out_features_) {
      return InvalidArgument(fmt::format("row {} of a matrix of {} rows", row, out_features_));
    }
  }
  const auto n = static_cast<int64_t>(rows.size());
  auto gather = [&](const void* data, int64_t row_bytes) {
    auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n * row_bytes));
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(copy->data() + i * row_bytes, static_cast<const uint8_t*>(data) + rows[i] * row_bytes,
                  static_cast<size_t>(row_bytes));
    }
    return copy;
  };
  if (apply_ == &ApplyDense) {
    const int64_t row_bytes = DTypeBytes(dense_.dtype, in_features_);
    auto copy = gather(dense_.data, row_bytes);
    TensorView view = dense_;
    view.shape = Shape({n, in_features_});
    view.data = copy->data();
    Linear linear = Dense(view);
    linear.own_bytes_ = std::move(copy);
    return linear;
  }
  if (apply_ == &ApplyGguf) {
    auto copy = gather(quant_.data, quant_.row_bytes);
    quant::QuantMatrix m = quant_;
    m.data = copy->data();
    m.rows = n;
    m.packed = nullptr;
    Linear linear = Quantized(m);
    linear.own_bytes_ = std::move(copy);
    return linear;
  }
  return Unimplemented("selecting rows of a block-scaled matrix");
}

Expected<Linear> Linear::QuantizedQ8_0() const {
  constexpr int64_t kBlock = 32;
  if (in_features_ % kBlock != 0) {
    return InvalidArgument(fmt::format("Q8_0 needs in_features a multiple of {}, not {}", kBlock, in_features_));
  }
  const int64_t blocks = in_features_ / kBlock;
  const auto row_bytes = blocks * static_cast<int64_t>(sizeof(quant::BlockQ8_0));
  auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(out_features_ * row_bytes));
  std::vector<float> row(in_features_);
  for (int64_t r = 0; r < out_features_; ++r) {
    EMBER_RETURN_IF_ERROR(ReadRow(r, row.data()));
    quant::QuantizeRowQ8_0(row.data(), in_features_, reinterpret_cast<quant::BlockQ8_0*>(copy->data() + r * row_bytes));
  }
  Linear linear = Quantized({GgmlType::kQ8_0, copy->data(), out_features_, in_features_, row_bytes});
  linear.own_bytes_ = std::move(copy);
  return linear;
}

Status Linear::ReadRow(int64_t row, float* out) const {
  EMBER_CHECK(row >= 0 && row < out_features_, "row {} of {}", row, out_features_);
  return read_row_(*this, row, out);
}

void Linear::ApplyDense(const Linear& self, const float* x, int64_t m, float* y) {
  kernels::MatMul(x, m, self.dense_, y);
}

void Linear::ApplyGguf(const Linear& self, const float* x, int64_t m, float* y) {
  quant::GgufMatMul(x, m, self.quant_, y);
}

void Linear::ApplyShared(std::span<const Linear* const> linears, const float* x, int64_t m,
                         std::span<float* const> ys) {
  EMBER_CHECK(linears.size() == ys.size() && linears.size() <= quant::kMaxSharedMatMuls,
              "ApplyShared: {} matrices, {} outputs", linears.size(), ys.size());
  static_assert(quant::kMaxSharedBlockScaled == quant::kMaxSharedMatMuls);
  const quant::QuantMatrix* gguf[quant::kMaxSharedMatMuls];
  const quant::BlockScaledMatrix* block[quant::kMaxSharedMatMuls];
  float* gguf_ys[quant::kMaxSharedMatMuls];
  float* block_ys[quant::kMaxSharedMatMuls];
  size_t gguf_count = 0, block_count = 0;
  for (size_t i = 0; i < linears.size(); ++i) {
    EMBER_CHECK(linears[i]->in_features_ == linears[0]->in_features_, "ApplyShared: inputs of {} and {} features",
                linears[0]->in_features_, linears[i]->in_features_);
    if (linears[i]->apply_ == &ApplyGguf) {
      gguf[gguf_count] = &linears[i]->quant_;
      gguf_ys[gguf_count++] = ys[i];
    } else if (linears[i]->apply_ == &ApplyBlockScaled) {
      block[block_count] = &linears[i]->block_;
      block_ys[block_count++] = ys[i];
    } else {
      linears[i]->Apply(x, m, ys[i]);
    }
  }
  if (gguf_count > 0) quant::GgufMatMulShared(x, m, {gguf, gguf_count}, {gguf_ys, gguf_count});
  if (block_count > 0) quant::BlockScaledMatMulShared(x, m, {block, block_count}, {block_ys, block_count});
}

void Linear::ApplyBlockScaled(const Linear& self, const float* x, int64_t m, float* y) {
  quant::BlockScaledMatMul(x, m, self.block_, y);
}

Status Linear::ReadDenseRow(const Linear& self, int64_t row, float* out) {
  const TensorView r = self.dense_.Slice0(row);
  if (r.dtype == DType::kBF16) {
    for (int64_t i = 0; i < self.in_features_; ++i) out[i] = BF16ToF32(r.As<uint16_t>()[i]);
  } else {
    std::copy(r.As<float>(), r.As<float>() + self.in_features_, out);
  }
  return Status::Ok();
}

Status Linear::ReadGgufRow(const Linear& self, int64_t row, float* out) {
  const auto* data = static_cast<const uint8_t*>(self.quant_.data) + row * self.quant_.row_bytes;
  return quant::DequantizeRow(self.quant_.type, data, self.in_features_, out);
}

Status Linear::ReadBlockScaledRow(const Linear& self, int64_t row, float* out) {
  quant::DequantizeRow(self.block_, row, out);
  return Status::Ok();
}

}  // namespace ember
