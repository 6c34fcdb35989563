// BlockScaledMatMul (declared in block_scaled.h) and its pieces (block_scaled_matmul.h):
// activation quantization once per row, then output rows, each one Fp4DotFn / Fp8DotFn call per
// group of up to kMaxBlockDotRows activation rows. The threaded wrapper splits the rows over the
// global pool.
#include "quant/block_scaled_matmul.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "quant/block_scaled_dot.h"
#include "quant/block_scaled_packed.h"
#include "quant/matmul_tiling.h"

namespace ember::quant {

int64_t PreparedActivationRowBytes(WeightFormat format, int64_t k) {
  return FormatTraits(format).int8_activations ? Int8ActivationLayout(k).bytes : 0;
}

bool UsesPackedGemm(const BlockScaledMatrix& w, int64_t m) {
  return w.packed != nullptr && m >= kPackedMinRows && ActiveBlockDotVariant().PackedFor(w.format) != nullptr;
}

void PrepareActivations(WeightFormat format, const float* x, int64_t m, int64_t k, uint8_t* out,
                        bool packed_records) {
  const int64_t row_bytes = PreparedActivationRowBytes(format, k);
  if (row_bytes == 0) return;
  for (int64_t i = 0; i < m; ++i) {
    QuantizeActivationInt8(x + i * k, k, out + i * row_bytes);
    if (packed_records) FillPackedActivationRecords(k, out + i * row_bytes);
  }
}

void BlockScaledMatMulRows(const BlockScaledMatrix& w, const float* x, const uint8_t* act, int64_t m,
                           int64_t row_begin, int64_t row_end, float* y, int64_t ldy) {
  const int64_t k = w.cols;
  const BlockDotVariant& variant = ActiveBlockDotVariant();
  if (UsesPackedGemm(w, m)) {
    variant.PackedFor(w.format)(k, w.packed, act, PreparedActivationRowBytes(w.format, k), m, w.global_scale,
                                row_begin, row_end, y, ldy);
    return;
  }
  const bool fp8 = !FormatTraits(w.format).int8_activations;
  const Fp4DotFn fp4_dot = variant.Fp4For(w.format);
  const int64_t act_bytes = PreparedActivationRowBytes(w.format, k);
  const int64_t row_bytes = CodesRowBytes(w.format, k);
  const int64_t scale_bytes = ScalesRowBytes(w.format, k);
  const int64_t ahead = std::max<int64_t>(1, kPrefetchBytes / std::max<int64_t>(1, row_bytes));
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  float out[kMaxBlockDotRows];
  for (int64_t j0 = row_begin; j0 < row_end; j0 += kRowTile) {
    const int64_t j1 = std::min(row_end, j0 + kRowTile);
    for (int64_t i = 0; i < m; i += kMaxBlockDotRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kMaxBlockDotRows, m - i));
      for (int64_t j = j0; j < j1; ++j) {
        // The codes of row j + ahead are requested by the dot itself, a line per 64 bytes
        // (Fp4DotFn); the row's few scale lines here.
        const uint8_t* prefetch = nullptr;
        if (i == 0 && j + ahead < row_end) {
          prefetch = w.codes + (j + ahead) * w.codes_row_stride;
          if (!fp8) PrefetchRow(scales + (j + ahead) * w.scales_row_stride, scale_bytes);
        }
        const uint8_t* codes = w.codes + j * w.codes_row_stride;
        float factor = w.global_scale;
        if (fp8) {
          const float* block_scales = nullptr;
          if (w.fp8_scale_kind == Fp8ScaleKind::kBlock128) {
            block_scales = reinterpret_cast<const float*>(scales + (j / kFp8ScaleBlock) * w.scales_row_stride);
          } else if (w.fp8_scale_kind == Fp8ScaleKind::kPerChannel) {
            float channel;
            std::memcpy(&channel, scales + j * w.scales_row_stride, 4);
            factor = channel * w.global_scale;
          }
          variant.fp8(k, codes, block_scales, x + i * k, k, rows, out, prefetch);
        } else {
          fp4_dot(k, codes, scales + j * w.scales_row_stride, act + i * act_bytes, act_bytes, rows, out, prefetch);
        }
        for (int r = 0; r < rows; ++r) y[(i + r) * ldy + j] = out[r] * factor;
      }
    }
  }
}

namespace {

// x's rows prepared for w (int8 rows for FP4, with the packed GEMM's records when it runs; null
// for FP8), threaded over the rows, into `buffer`.
uint8_t* PrepareCallActivations(const BlockScaledMatrix& w, const float* x, int64_t m, bool packed,
                                std::vector<uint8_t>& buffer) {
  const int64_t k = w.cols;
  const int64_t act_bytes = PreparedActivationRowBytes(w.format, k);
  if (act_bytes == 0) return nullptr;
  buffer.resize(static_cast<size_t>(m * act_bytes + 64));
  uint8_t* act = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
  ThreadPool::Global().ParallelFor(
      m,
      [&](int64_t begin, int64_t end) {
        PrepareActivations(w.format, x + begin * k, end - begin, k, act + begin * act_bytes, packed);
      },
      std::max<int64_t>(1, kMinChunkBytes / (k * 4)));
  return act;
}

// y [m, w.rows] from x and its prepared rows, threaded over the output rows.
void MultiplyPrepared(const BlockScaledMatrix& w, const float* x, const uint8_t* act, int64_t m, bool packed,
                      float* y) {
  const int64_t n = w.rows;
  ThreadPool& pool = ThreadPool::Global();
  const int64_t packed_row_bytes = CodesRowBytes(w.format, w.cols) + ScalesRowBytes(w.format, w.cols);
  if (packed) {
    // Whole 16-row groups per chunk (a group split between two chunks would be computed twice).
    const int64_t groups = (n + kPackedGroupRows - 1) / kPackedGroupRows;
    const int64_t min_groups =
        std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, packed_row_bytes * kPackedGroupRows * m));
    pool.ParallelFor(
        groups,
        [&](int64_t begin, int64_t end) {
          BlockScaledMatMulRows(w, x, act, m, begin * kPackedGroupRows, std::min(n, end * kPackedGroupRows), y, n);
        },
        min_groups);
    return;
  }
  const int64_t min_rows = std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, packed_row_bytes * m));
  pool.ParallelFor(
      n, [&](int64_t begin, int64_t end) { BlockScaledMatMulRows(w, x, act, m, begin, end, y, n); }, min_rows);
}

void CheckCall(const BlockScaledMatrix& w, int64_t m) {
  const Status valid = ValidateBlockScaledMatrix(w);
  EMBER_CHECK(valid.ok(), "BlockScaledMatMul: {}", valid.message());
  EMBER_CHECK(m >= 0, "BlockScaledMatMul: m {}", m);
}

}  // namespace

void BlockScaledMatMul(const float* x, int64_t m, const BlockScaledMatrix& w, float* y) {
  CheckCall(w, m);
  if (m == 0 || w.rows == 0) return;
  const bool packed = UsesPackedGemm(w, m);
  // Reused: decode makes many calls.
  thread_local std::vector<uint8_t> activation_buffer;
  MultiplyPrepared(w, x, PrepareCallActivations(w, x, m, packed, activation_buffer), m, packed, y);
}

void BlockScaledMatMulShared(const float* x, int64_t m, std::span<const BlockScaledMatrix* const> ws,
                             std::span<float* const> ys) {
  EMBER_CHECK(ws.size() == ys.size() && ws.size() <= kMaxSharedBlockScaled,
              "BlockScaledMatMulShared: {} matrices, {} outputs", ws.size(), ys.size());
  bool packed[kMaxSharedBlockScaled];
  const uint8_t* acts[kMaxSharedBlockScaled] = {};
  thread_local std::vector<uint8_t> buffers[kMaxSharedBlockScaled];
  for (size_t i = 0; i < ws.size(); ++i) {
    CheckCall(*ws[i], m);
    EMBER_CHECK(ws[i]->cols == ws[0]->cols, "BlockScaledMatMulShared: inputs of {} and {} columns", ws[0]->cols,
                ws[i]->cols);
    packed[i] = UsesPackedGemm(*ws[i], m);
  }
  if (m == 0) return;
  for (size_t i = 0; i < ws.size(); ++i) {
    if (ws[i]->rows == 0) continue;
    // The int8 rows do not depend on the FP4 format (QuantizeActivationInt8), only on whether
    // the packed GEMM's records are in them.
    const int64_t bytes = PreparedActivationRowBytes(ws[i]->format, ws[i]->cols);
    for (size_t j = 0; j < i && acts[i] == nullptr && bytes > 0; ++j) {
      if (acts[j] != nullptr && packed[j] == packed[i] &&
          PreparedActivationRowBytes(ws[j]->format, ws[j]->cols) == bytes) {
        acts[i] = acts[j];
      }
    }
    if (acts[i] == nullptr) acts[i] = PrepareCallActivations(*ws[i], x, m, packed[i], buffers[i]);
    MultiplyPrepared(*ws[i], x, acts[i], m, packed[i], ys[i]);
  }
}

}  // namespace ember::quant
