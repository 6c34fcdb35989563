#include "quant/gguf_matmul.h"

#include <algorithm>
#include <span>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "quant/gguf_dot.h"
#include "quant/gguf_packed.h"
#include "quant/gguf_type_kernels.h"
#include "quant/matmul_tiling.h"

namespace ember::quant {

bool GgufMatMulSupports(GgmlType type) { return ActivationFormatFor(type).has_value(); }

namespace {

// How one call's activation rows are made and multiplied: the weight type's kernels and, per
// call, whether the packed (avx512) or AMX tile GEMM runs. Two matrices whose plans have the same
// ActivationKey read the same quantized rows (GgufMatMulShared quantizes them once).
struct Plan {
  const GgufTypeKernels* kernels = nullptr;
  VecDotFn dot = nullptr;
  const DotVariant* variant = nullptr;
  const GgufPackedForm* form = nullptr;  // the packed GEMM, or null for the row dots
  bool amx = false;
  bool avx2 = false;  // the AVX2 tiles (same bits as the avx512 ones)
  bool extend = false;  // the packed form appends its per-row data (Q8_0's integer block sums)
  QuantizeActivationFn quantize = nullptr;
  int64_t act_bytes = 0;
  int64_t act_rows = 0;  // m, or rounded up to whole AMX tiles
  int64_t dense_row_bytes = 0;  // a weight row's bytes without a strided view's padding (prefetched)

  // Equal keys: byte-for-byte the same activation buffer from the same x.
  bool SameActivations(const Plan& other) const {
    return quantize == other.quantize && act_bytes == other.act_bytes && act_rows == other.act_rows &&
           (extend ? form->extend_activation : nullptr) ==
               (other.extend ? other.form->extend_activation : nullptr);
  }
};

Plan MakePlan(const QuantMatrix& w, int64_t m, Isa isa) {
  EMBER_CHECK(m >= 0 && w.rows >= 0 && w.cols >= 0, "GgufMatMul: m {} rows {} cols {}", m, w.rows, w.cols);
  const GgmlTypeTraits* traits = FindGgmlType(w.type);
  Plan plan;
  plan.kernels = FindGgufKernels(w.type);
  EMBER_CHECK(traits != nullptr && plan.kernels != nullptr && plan.kernels->activation.has_value(),
              "GgufMatMul: unsupported GGML type {}", static_cast<uint32_t>(w.type));
  const std::optional<int64_t> dense_row_bytes = GgmlRowBytes(*traits, w.cols);
  EMBER_CHECK(dense_row_bytes.has_value() && *dense_row_bytes <= w.row_bytes,
              "GgufMatMul: {} columns of {} do not fit rows of {} bytes", w.cols, traits->name, w.row_bytes);
  plan.dense_row_bytes = *dense_row_bytes;
  plan.variant = &kDotVariants.For(isa);
  plan.dot = plan.variant->For(w.type);
  EMBER_CHECK(plan.dot != nullptr, "GgufMatMul: variant {} has no {} dot", IsaName(isa), traits->name);
  // AVX2 has tiles for the 32-element types only (PackQuantMatrix packs no other type there).
  const bool packed_isa = isa >= Isa::kAvx512 ||
                          (isa == Isa::kAvx2 && plan.kernels->packed != nullptr && plan.kernels->packed->rows_avx2 != nullptr);
  plan.form = w.packed != nullptr && packed_isa ? plan.kernels->packed : nullptr;
  EMBER_CHECK(plan.form != nullptr || w.packed == nullptr || !packed_isa, "GgufMatMul: packed {} matrix", traits->name);
  // Prefill shapes under the amx variant take the tile GEMM (the same bits as the avx512 one).
  plan.avx2 = plan.form != nullptr && isa == Isa::kAvx2;
  plan.amx = plan.form != nullptr && isa == Isa::kAmx && plan.form->rows_amx != nullptr && m >= plan.form->amx_min_rows;
  // The packed form may append its own per-row data (Q8_0's integer block sums) to each row; the
  // tile GEMM and the AVX2 tiles have no use for it (their Q8_0 product is signed x signed).
  plan.extend = plan.form != nullptr && plan.form->extend_activation != nullptr && !plan.amx && isa >= Isa::kAvx512;
  const int64_t k = w.cols;
  plan.act_bytes = ActivationRowBytes(w.type, k) + (plan.extend ? plan.form->extra_activation_bytes(k) : 0);
  plan.quantize = FindGgufKernels(*plan.kernels->activation)->quantize_activation;
  // The tile GEMM reads whole 16-row activation tiles: the last one's rows past m are the buffer's.
  plan.act_rows = plan.amx ? (m + kAmxTileRows - 1) / kAmxTileRows * kAmxTileRows : m;
  return plan;
}

// x [m, k] quantized into `buffer` as `plan` says, threaded over the rows.
uint8_t* QuantizeActivations(const Plan& plan, const float* x, int64_t m, int64_t k, std::vector<uint8_t>& buffer) {
  buffer.resize(static_cast<size_t>(plan.act_rows * plan.act_bytes));
  uint8_t* act = buffer.data();
  ThreadPool::Global().ParallelFor(
      m,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          plan.quantize(x + i * k, k, act + i * plan.act_bytes);
          if (plan.extend) plan.form->extend_activation(act + i * plan.act_bytes, k);
        }
      },
      std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, k * 4)));
  return act;
}

// y [m, w.rows] from the quantized rows `act`, threaded over the output rows.
void MultiplyQuantized(const Plan& plan, const QuantMatrix& w, const uint8_t* act, int64_t m, float* y) {
  if (m == 0 || w.rows == 0) return;
  const int64_t k = w.cols;
  const int64_t n = w.rows;
  const int64_t act_bytes = plan.act_bytes;
  ThreadPool& pool = ThreadPool::Global();
  if (plan.form != nullptr) {
    const int64_t groups = (n + kPackRows - 1) / kPackRows;
    const int64_t group_bytes = plan.form->bytes(kPackRows, k);
    const auto rows = plan.amx ? plan.form->rows_amx : plan.avx2 ? plan.form->rows_avx2 : plan.form->rows_avx512;
    pool.ParallelFor(
        groups,
        [&](int64_t begin, int64_t end) { rows(static_cast<const uint8_t*>(w.packed), n, k, begin, end, act, m, act_bytes, y); },
        std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, group_bytes * m)));
    return;
  }

  const auto* weights = static_cast<const uint8_t*>(w.data);
  // Rows to prefetch ahead: the one kPrefetchBytes downstream (at least the next).
  const int64_t ahead = (kPrefetchBytes + w.row_bytes - 1) / std::max<int64_t>(1, w.row_bytes);
  const int64_t prefetch_bytes = plan.dense_row_bytes;
  const int64_t min_rows = std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, w.row_bytes * m));
  // With a multi-row dot, kMaxDotRows activation rows share each decoded weight block; rows left
  // over (m not a multiple) take the one-row dot, which gives the same bits (gguf_dot.h).
  const VecDotRowsFn dot_rows = m > 1 ? plan.variant->RowsFor(w.type) : nullptr;
  const VecDotFn dot = plan.dot;
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

}  // namespace

void GgufMatMul(const float* x, int64_t m, const QuantMatrix& w, float* y) {
  // The level is read once: a concurrent SelectIsa must not mix two variants within one call.
  const Plan plan = MakePlan(w, m, ActiveIsa());
  if (m == 0 || w.rows == 0) return;
  // Reused across calls: a decode step makes hundreds of these and the row is small.
  thread_local std::vector<uint8_t> activations;
  MultiplyQuantized(plan, w, QuantizeActivations(plan, x, m, w.cols, activations), m, y);
}

void GgufMatMulShared(const float* x, int64_t m, std::span<const QuantMatrix* const> ws, std::span<float* const> ys) {
  EMBER_CHECK(ws.size() == ys.size() && ws.size() <= kMaxSharedMatMuls, "GgufMatMulShared: {} matrices, {} outputs",
              ws.size(), ys.size());
  const Isa isa = ActiveIsa();
  Plan plans[kMaxSharedMatMuls];
  const uint8_t* acts[kMaxSharedMatMuls] = {};
  thread_local std::vector<uint8_t> buffers[kMaxSharedMatMuls];
  for (size_t i = 0; i < ws.size(); ++i) {
    EMBER_CHECK(ws[i]->cols == ws[0]->cols, "GgufMatMulShared: inputs of {} and {} columns", ws[0]->cols, ws[i]->cols);
    plans[i] = MakePlan(*ws[i], m, isa);
  }
  if (m == 0) return;
  for (size_t i = 0; i < ws.size(); ++i) {
    for (size_t j = 0; j < i && acts[i] == nullptr; ++j) {
      if (plans[j].SameActivations(plans[i])) acts[i] = acts[j];
    }
    if (acts[i] == nullptr) acts[i] = QuantizeActivations(plans[i], x, m, ws[i]->cols, buffers[i]);
    MultiplyQuantized(plans[i], *ws[i], acts[i], m, ys[i]);
  }
}

}  // namespace ember::quant
