// SliceBlockScaled and SliceBlockScaledExperts (model/tensor_parallel.h): a tensor-parallel rank's
// copy of its block of a producer-quantized or load-time-quantized matrix.
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/int_math.h"
#include "model/quantized_weights.h"
#include "model/tensor_parallel.h"

namespace ember {
namespace {

using quant::BlockScaledMatrix;
using quant::Fp8ScaleKind;
using quant::WeightFormat;


bool Fp8Blocks(const BlockScaledMatrix& m) {
  return m.format == WeightFormat::kFp8E4m3 && m.fp8_scale_kind == Fp8ScaleKind::kBlock128;
}

// The alignment a block of columns must keep so that no scale block is cut.
int64_t ColumnUnit(const BlockScaledMatrix& m) {
  if (m.format != WeightFormat::kFp8E4m3) return quant::KBlockSize(m.format);
  return Fp8Blocks(m) ? quant::kFp8ScaleBlock : 16;
}

// [begin, begin + count) of a dimension of n must start on a multiple of `unit` and end on one or at n.
Status CheckAligned(const ShardRange& r, int64_t n, int64_t unit, const BlockScaledMatrix& m, std::string_view what) {
  if (r.begin < 0 || r.count <= 0 || r.end() > n) {
    return InvalidArgument(fmt::format("shard [{}, {}) of the {} {} is out of range", r.begin, r.end(), n, what));
  }
  if (r.begin % unit == 0 && (r.count % unit == 0 || r.end() == n)) return Status::Ok();
  return InvalidArgument(fmt::format(
      "{} [{}, {}) of a [{}, {}] {} matrix would cut its {}-wide scale blocks; choose a --tensor-parallel-size whose "
      "blocks of this dimension are multiples of {}", what, r.begin, r.end(), m.rows, m.cols,
      quant::WeightFormatName(m.format), unit, unit));
}

// Rows [row0, row0 + rows) and columns [col0, col0 + cols) of m, already checked, as a dense copy.
OwnedBlockScaledMatrix Copy(const BlockScaledMatrix& m, int64_t row0, int64_t rows, int64_t col0, int64_t cols) {
  BlockScaledMatrix out = m;
  out.rows = rows;
  out.cols = cols;
  out.packed = nullptr;  // Linear / ExpertWeights pack the copy anew
  const int64_t code_bytes = quant::CodesRowBytes(m.format, cols);
  const int64_t code_offset = quant::CodesRowBytes(m.format, col0);
  // Scale rows: per row for FP4 (bytes) and FP8 per channel (one f32), per 128 rows for FP8 blocks.
  int64_t scale_rows = 0, scale_row0 = 0, scale_bytes = 0, scale_offset = 0;
  if (m.format != WeightFormat::kFp8E4m3) {
    scale_rows = rows, scale_row0 = row0;
    scale_bytes = quant::ScalesRowBytes(m.format, cols);
    scale_offset = quant::ScalesRowBytes(m.format, col0);
  } else if (m.fp8_scale_kind == Fp8ScaleKind::kPerChannel) {
    scale_rows = rows, scale_row0 = row0, scale_bytes = 4;
  } else if (Fp8Blocks(m)) {
    scale_rows = CeilDiv(rows, quant::kFp8ScaleBlock), scale_row0 = row0 / quant::kFp8ScaleBlock;
    scale_bytes = 4 * CeilDiv(cols, quant::kFp8ScaleBlock);
    scale_offset = 4 * (col0 / quant::kFp8ScaleBlock);
  }
  // Codes, then the scales from a 64-byte boundary (FP8's f32 scales must be 4-byte aligned).
  const int64_t scales_at = RoundUpTo(rows * code_bytes, 64);
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(scales_at + scale_rows * scale_bytes));
  uint8_t* dst = bytes->data();
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * code_bytes, m.codes + (row0 + r) * m.codes_row_stride + code_offset, code_bytes);
  }
  const auto* scales = static_cast<const uint8_t*>(m.scales);
  for (int64_t r = 0; r < scale_rows; ++r) {
    std::memcpy(dst + scales_at + r * scale_bytes, scales + (scale_row0 + r) * m.scales_row_stride + scale_offset,
                scale_bytes);
  }
  out.codes = dst;
  out.codes_row_stride = code_bytes;
  out.scales = scale_rows > 0 ? dst + scales_at : nullptr;
  out.scales_row_stride = scale_bytes;
  return {out, std::move(bytes)};
}

}  // namespace

Expected<OwnedBlockScaledMatrix> SliceBlockScaled(const BlockScaledMatrix& m, const MatrixSplit& split) {
  EMBER_RETURN_IF_ERROR(quant::ValidateBlockScaledMatrix(m));
  switch (split.kind) {
    case MatrixSplit::Kind::kWhole: return Copy(m, 0, m.rows, 0, m.cols);
    case MatrixSplit::Kind::kRows:
      EMBER_RETURN_IF_ERROR(CheckAligned(split.range, m.rows, Fp8Blocks(m) ? quant::kFp8ScaleBlock : 1, m, "rows"));
      return Copy(m, split.range.begin, split.range.count, 0, m.cols);
    case MatrixSplit::Kind::kColumns:
      EMBER_RETURN_IF_ERROR(CheckAligned(split.range, m.cols, ColumnUnit(m), m, "columns"));
      return Copy(m, 0, m.rows, split.range.begin, split.range.count);
  }
  return InvalidArgument("unknown matrix split");
}

Expected<ExpertWeights> SliceBlockScaledExperts(const ExpertWeights& w, const MatrixSplit& split, int64_t halves) {
  if (!w.format()) return InvalidArgument("SliceBlockScaledExperts needs block-scaled experts");
  if (halves <= 0 || w.rows() % halves != 0) {
    return InvalidArgument(fmt::format("{} expert rows in {} halves", w.rows(), halves));
  }
  auto owners = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  std::vector<std::vector<BlockScaledMatrix>> parts(w.num_experts());
  int64_t rows = w.rows(), cols = w.cols();
  const auto keep = [&](Expected<OwnedBlockScaledMatrix> sliced, int64_t e) -> Status {
    if (!sliced.ok()) return sliced.status();
    parts[e].push_back(sliced->matrix);
    owners->push_back(std::move(sliced->owner));
    return Status::Ok();
  };
  for (int64_t e = 0; e < w.num_experts(); ++e) {
    const std::vector<BlockScaledMatrix>& whole = w.parts(e);
    if (split.kind != MatrixSplit::Kind::kRows) {
      for (const BlockScaledMatrix& part : whole) EMBER_RETURN_IF_ERROR(keep(SliceBlockScaled(part, split), e));
      continue;
    }
    // Each half's block of rows lies inside one part: parts are whole halves (NVFP4's gate and up
    // with their own global scales, compressed-tensors' gate_proj and up_proj) or the whole stack.
    const int64_t half = w.rows() / halves;
    for (int64_t h = 0; h < halves; ++h) {
      const int64_t first = h * half + split.range.begin;
      int64_t part_begin = 0;
      const BlockScaledMatrix* owner = nullptr;
      for (const BlockScaledMatrix& part : whole) {
        if (first >= part_begin && first + split.range.count <= part_begin + part.rows) {
          owner = &part;
          break;
        }
        part_begin += part.rows;
      }
      if (split.range.begin < 0 || split.range.end() > half || owner == nullptr) {
        return InvalidArgument(fmt::format("expert rows [{}, {}) of a half of {} do not lie in one stored part",
                                           split.range.begin, split.range.end(), half));
      }
      EMBER_RETURN_IF_ERROR(
          keep(SliceBlockScaled(*owner, MatrixSplit::Rows({first - part_begin, split.range.count})), e));
    }
  }
  if (split.kind == MatrixSplit::Kind::kRows) rows = halves * split.range.count;
  if (split.kind == MatrixSplit::Kind::kColumns) cols = split.range.count;
  return ExpertWeights::BlockScaled(rows, cols, std::move(parts), std::move(owners));
}

Expected<ExpertWeights> SelectBlockScaledExperts(const ExpertWeights& w, std::span<const int32_t> held) {
  if (!w.format()) return InvalidArgument("SelectBlockScaledExperts needs block-scaled experts");
  std::vector<std::vector<BlockScaledMatrix>> parts;
  for (const int32_t e : held) {
    if (e < 0 || e >= w.num_experts()) return InvalidArgument(fmt::format("expert {} of {}", e, w.num_experts()));
    parts.push_back(w.parts(e));
    for (BlockScaledMatrix& m : parts.back()) m.packed = nullptr;  // packed anew below, not shared
  }
  return ExpertWeights::BlockScaled(w.rows(), w.cols(), std::move(parts), w.owner());
}

Expected<Linear> QuantizeLinear(const TensorView& t, WeightFormat format, quant::Mxfp4ScaleRounding mxfp4_rounding,
                                const MatrixSplit& split) {
  if (t.shape.rank() != 2) return InvalidArgument(fmt::format("QuantizeLinear needs [out, in], got {}", t.shape.ToString()));
  const TensorView stacked{t.dtype, Shape{1, t.shape[0], t.shape[1]}, t.data};
  EMBER_ASSIGN_OR_RETURN(std::shared_ptr<const QuantizedStack> q, QuantizeStack(stacked, format, 1, mxfp4_rounding));
  // The Linear packs its own copy for the GEMM.
  const ExpertWeights whole = q->View(q, PackForGemm::kNo);
  if (split.whole()) return Linear::BlockScaled(whole.parts(0).front(), q);
  EMBER_ASSIGN_OR_RETURN(OwnedBlockScaledMatrix shard, SliceBlockScaled(whole.parts(0).front(), split));
  return Linear::BlockScaled(shard.matrix, std::move(shard.owner));
}

}  // namespace ember
