#include "quant/gguf_matmul.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "quant/gguf_dot.h"
#include "quant/gguf_packed.h"
#include "quant/gguf_type_kernels.h"
#include "quant/matmul_tiling.h"

namespace ember::quant {

bool GgufMatMulSupports(GgmlType type) { return ActivationFormatFor(type).has_value(); }

void GgufMatMul(const float* x, int64_t m, const QuantMatrix& w, float* y) {
  EMBER_CHECK(m >= 0 && w.rows >= 0 && w.cols >= 0, "GgufMatMul: m {} rows {} cols {}", m, w.rows, w.cols);
  const GgmlTypeTraits* traits = FindGgmlType(w.type);
  const GgufTypeKernels* kernels = FindGgufKernels(w.type);
  EMBER_CHECK(traits != nullptr && kernels != nullptr && kernels->activation.has_value(),
              "GgufMatMul: unsupported GGML type {}", static_cast<uint32_t>(w.type));
  const std::optional<int64_t> dense_row_bytes = GgmlRowBytes(*traits, w.cols);
  EMBER_CHECK(dense_row_bytes.has_value() && *dense_row_bytes <= w.row_bytes,
              "GgufMatMul: {} columns of {} do not fit rows of {} bytes", w.cols, traits->name, w.row_bytes);
  // The level is read once: a concurrent SelectIsa must not mix two variants within one call.
  const Isa isa = ActiveIsa();
  const DotVariant& variant = kDotVariants.For(isa);
  const VecDotFn dot = variant.For(w.type);
  EMBER_CHECK(dot != nullptr, "GgufMatMul: variant {} has no {} dot", IsaName(isa), traits->name);
  if (m == 0 || w.rows == 0) return;

  const int64_t k = w.cols;
  const int64_t n = w.rows;
  const bool packed_isa = isa >= Isa::kAvx512;
  const GgufPackedForm* form = w.packed != nullptr && packed_isa ? kernels->packed : nullptr;
  EMBER_CHECK(form != nullptr || w.packed == nullptr || !packed_isa, "GgufMatMul: packed {} matrix", traits->name);
  // Prefill shapes under the amx variant take the tile GEMM (the same bits as the avx512 one).
  const bool amx = form != nullptr && isa == Isa::kAmx && form->rows_amx != nullptr && m >= kAmxMinRows;
  // The packed form may append its own per-row data (Q8_0's integer block sums) to each row; the
  // tile GEMM has no use for it (its Q8_0 product is signed x signed).
  const bool extend = form != nullptr && form->extend_activation != nullptr && !amx;
  const int64_t act_bytes = ActivationRowBytes(w.type, k) + (extend ? form->extra_activation_bytes(k) : 0);
  const QuantizeActivationFn quantize = FindGgufKernels(*kernels->activation)->quantize_activation;
  // Reused across calls: a decode step makes hundreds of these and the row is small. The tile
  // GEMM reads whole 16-row activation tiles: the last one's rows past m are this buffer's.
  thread_local std::vector<uint8_t> activations;
  const int64_t act_rows = amx ? (m + kAmxTileRows - 1) / kAmxTileRows * kAmxTileRows : m;
  activations.resize(static_cast<size_t>(act_rows * act_bytes));
  uint8_t* act = activations.data();
  ThreadPool& pool = ThreadPool::Global();
  pool.ParallelFor(
      m,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          quantize(x + i * k, k, act + i * act_bytes);
          if (extend) form->extend_activation(act + i * act_bytes, k);
        }
      },
      std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, k * 4)));

  if (form != nullptr) {
    const int64_t groups = (n + kPackRows - 1) / kPackRows;
    const int64_t group_bytes = form->bytes(kPackRows, k);
    const auto rows = amx ? form->rows_amx : form->rows_avx512;
    pool.ParallelFor(
        groups,
        [&](int64_t begin, int64_t end) { rows(static_cast<const uint8_t*>(w.packed), n, k, begin, end, act, m, act_bytes, y); },
        std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, group_bytes * m)));
    return;
  }

  const auto* weights = static_cast<const uint8_t*>(w.data);
  // Rows to prefetch ahead: the one kPrefetchBytes downstream (at least the next).
  const int64_t ahead = (kPrefetchBytes + w.row_bytes - 1) / std::max<int64_t>(1, w.row_bytes);
  const int64_t prefetch_bytes = *dense_row_bytes;  // not the padding of a strided view
  const int64_t min_rows = std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, w.row_bytes * m));
  // With a multi-row dot, kMaxDotRows activation rows share each decoded weight block; rows left
  // over (m not a multiple) take the one-row dot, which gives the same bits (gguf_dot.h).
  const VecDotRowsFn dot_rows = m > 1 ? variant.RowsFor(w.type) : nullptr;
  const int64_t group = dot_rows != nullptr ? kMaxDotRows : 1;
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        float out[kMaxDotRows];
        for (int64_t j0 = begin; j0 < end; j0 += kRowTile) {
          const int64_t j1 = std::min(end, j0 + kRowTile);
          for (int64_t i = 0; i < m; i += group) {
            const uint8_t* a = act + i * act_bytes;
            const int64_t rows = std::min(group, m - i);
            for (int64_t j = j0; j < j1; ++j) {
              if (i == 0 && j + ahead < end) PrefetchRow(weights + (j + ahead) * w.row_bytes, prefetch_bytes);
              const uint8_t* wj = weights + j * w.row_bytes;
              if (rows == group && dot_rows != nullptr) {
                dot_rows(k, wj, a, act_bytes, static_cast<int>(rows), out);
                for (int64_t r = 0; r < rows; ++r) y[(i + r) * n + j] = out[r];
              } else {
                for (int64_t r = 0; r < rows; ++r) y[(i + r) * n + j] = dot(k, wj, a + r * act_bytes);
              }
            }
          }
        }
      },
      min_rows);
}

}  // namespace ember::quant
