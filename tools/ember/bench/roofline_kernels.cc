#include "tools/ember/bench/roofline_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "core/dtypes.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "formats/ggml_type.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "quant/block_scaled.h"
#include "quant/block_scaled_packed.h"
#include "quant/gguf_matmul.h"
#include "quant/gguf_packed.h"

namespace ember::tools::bench {
namespace {

uint64_t NextBits(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state ^ (state >> 29);
}

// Fills `bytes` with pseudo-random bits, in parallel (first touch by the threads that will read).
void FillRandom(uint8_t* data, int64_t bytes) {
  const int64_t words = bytes / 8;
  ThreadPool::Global().ParallelFor(
      words,
      [&](int64_t begin, int64_t end) {
        uint64_t state = static_cast<uint64_t>(begin) * 0x9E3779B97F4A7C15ull + 1;
        for (int64_t i = begin; i < end; ++i) {
          const uint64_t bits = NextBits(state);
          std::memcpy(data + i * 8, &bits, 8);
        }
      },
      int64_t{1} << 14);
  for (int64_t b = words * 8; b < bytes; ++b) data[b] = 0x55;
}

// Random f32 values in [-1, 1).
std::vector<float> RandomFloats(int64_t count, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = static_cast<float>(static_cast<int64_t>(NextBits(seed) >> 40) - (1 << 23)) / (1 << 23);
  return v;
}

// Best wall seconds of `reps` runs after one untimed warm-up run.
double BestSeconds(int reps, const std::function<void()>& body) {
  body();
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

std::string Mib(int64_t bytes) { return fmt::format("{:.0f} MiB", bytes / 1048576.0); }

// Sets every block's f16 scale fields (`scale_fields` u16 from byte `scale_offset` of the block)
// to ~0.01, so that no path sees a NaN, infinity or subnormal; the quant bits stay random.
void SetBlockScales(uint8_t* data, int64_t bytes, int64_t block_bytes, int64_t scale_offset, int scale_fields) {
  const uint16_t scale = F32ToF16(0.01f);
  for (int64_t b = 0; b + block_bytes <= bytes; b += block_bytes) {
    for (int f = 0; f < scale_fields; ++f) std::memcpy(data + b + scale_offset + 2 * f, &scale, 2);
  }
}

struct QuantCase {
  GgmlType type;
  int64_t scale_offset;  // bytes into the block
  int scale_fields;
};

KernelRate Rate(std::string name, std::string shape, Bound bound, double amount, double seconds) {
  return {std::move(name), std::move(shape), bound, amount / seconds / 1e9, seconds};
}

void MeasureDenseMatMuls(const RooflineSizes& s, std::vector<KernelRate>* out) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    const int64_t elem = dtype == DType::kF32 ? 4 : 2;
    const std::string dname = dtype == DType::kF32 ? "f32" : "bf16";
    // Decode GEMV: the whole matrix streams from DRAM once per call.
    {
      const int64_t k = s.gemv_k;
      const int64_t n = std::max<int64_t>(64, s.gemv_weight_bytes / (k * elem) / 64 * 64);
      auto w = std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(n * k * elem));
      // Real values, no NaN or subnormal (random f32 bits would hit those too often).
      if (dtype == DType::kF32) {
        float* f = reinterpret_cast<float*>(w.get());
        ThreadPool::Global().ParallelFor(n * k, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) f[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
        });
      } else {
        FillRandom(w.get(), n * k * elem);
        uint16_t* h = reinterpret_cast<uint16_t*>(w.get());
        ThreadPool::Global().ParallelFor(n * k, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) h[i] = static_cast<uint16_t>((h[i] & 0x807f) | 0x3c00);  // |x| in [2^-7, 2^-6)
        });
      }
      const TensorView view{dtype, Shape{n, k}, w.get()};
      const std::vector<float> x = RandomFloats(k, 1);
      std::vector<float> y(static_cast<size_t>(n));
      const double seconds = BestSeconds(s.repetitions, [&] { kernels::MatMul(x.data(), 1, view, y.data()); });
      out->push_back(Rate("gemv " + dname, fmt::format("m=1 n={} k={} ({})", n, k, Mib(n * k * elem)), Bound::kMemory,
                          static_cast<double>(n * k * elem), seconds));
    }
    // Prefill GEMM: every weight row is reused by m activation rows.
    {
      const int64_t m = s.gemm_m, n = s.gemm_n, k = s.gemm_k;
      const std::vector<float> wf = RandomFloats(n * k, 2);
      std::vector<uint16_t> wb;
      const void* data = wf.data();
      if (dtype == DType::kBF16) {
        wb.resize(wf.size());
        for (size_t i = 0; i < wf.size(); ++i) wb[i] = F32ToBF16(wf[i]);
        data = wb.data();
      }
      const TensorView view{dtype, Shape{n, k}, data};
      const std::vector<float> x = RandomFloats(m * k, 3);
      std::vector<float> y(static_cast<size_t>(m * n));
      const double seconds =
          BestSeconds(s.compute_repetitions, [&] { kernels::MatMul(x.data(), m, view, y.data()); });
      out->push_back(Rate("gemm " + dname, fmt::format("m={} n={} k={}", m, n, k), Bound::kCompute,
                          2.0 * m * n * k, seconds));
    }
  }
}

void MeasureQuantMatMuls(const RooflineSizes& s, std::vector<KernelRate>* out) {
  // The types of SmolLM2 Q4_1 (Q4_1, Q8_0) and Gemma 3 Q4_K_M (Q4_K, Q5_0, Q6_K, Q8_0).
  for (const QuantCase q : {QuantCase{GgmlType::kQ4_1, 0, 2}, QuantCase{GgmlType::kQ5_0, 0, 1},
                            QuantCase{GgmlType::kQ8_0, 0, 1}, QuantCase{GgmlType::kQ4_K, 0, 2},
                            QuantCase{GgmlType::kQ6_K, 208, 1}}) {
    const GgmlTypeTraits traits = *GgmlTypeInfo(static_cast<uint32_t>(q.type));
    const std::string tname(traits.name);
    const auto run = [&](int64_t m, int64_t k, int64_t n, Bound bound) {
      const int64_t row_bytes = *GgmlRowBytes(traits, k);
      auto w = std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(n * row_bytes));
      FillRandom(w.get(), n * row_bytes);
      SetBlockScales(w.get(), n * row_bytes, traits.block_bytes, q.scale_offset, q.scale_fields);
      quant::QuantMatrix matrix{q.type, w.get(), n, k, row_bytes};
      // As the models load it (model/linear.cc): the repacked copy where the host uses one.
      const std::shared_ptr<const void> packed = quant::PackQuantMatrix(matrix);
      matrix.packed = packed.get();
      const std::vector<float> x = RandomFloats(m * k, 4);
      std::vector<float> y(static_cast<size_t>(m * n));
      const int reps = bound == Bound::kMemory ? s.repetitions : s.compute_repetitions;
      const double seconds = BestSeconds(reps, [&] { quant::GgufMatMul(x.data(), m, matrix, y.data()); });
      if (bound == Bound::kMemory) {
        out->push_back(Rate("gemv " + tname, fmt::format("m=1 n={} k={} ({})", n, k, Mib(n * row_bytes)), bound,
                            static_cast<double>(n * row_bytes), seconds));
      } else {
        out->push_back(Rate("gemm " + tname, fmt::format("m={} n={} k={}", m, n, k), bound, 2.0 * m * n * k, seconds));
      }
    };
    // k must be a whole number of blocks (256 for the K formats).
    const int64_t gemv_k = std::max<int64_t>(256, s.gemv_k / 256 * 256);
    const int64_t gemv_rows = *GgmlRowBytes(traits, gemv_k);
    run(1, gemv_k, std::max<int64_t>(64, s.gemv_weight_bytes / gemv_rows / 64 * 64), Bound::kMemory);
    run(s.gemm_m, std::max<int64_t>(256, s.gemm_k / 256 * 256), s.gemm_n, Bound::kComputeInt8);
  }
  // The FP4 formats of the Muse Spark checkpoints (int8 activations, the same int8 ceiling), with
  // the packed copy where the level has a packed GEMM (as model/linear.cc loads them).
  for (const quant::WeightFormat format : {quant::WeightFormat::kMxfp4, quant::WeightFormat::kNvfp4}) {
    const int64_t m = s.gemm_m, n = s.gemm_n, k = std::max<int64_t>(128, s.gemm_k / 128 * 128);
    const std::vector<float> w = RandomFloats(n * k, 6);
    std::vector<uint8_t> codes(n * quant::CodesRowBytes(format, k)), scales(n * quant::ScalesRowBytes(format, k));
    float global = 1.0f;
    if (format == quant::WeightFormat::kMxfp4) {
      (void)quant::QuantizeMxfp4(w.data(), n, k, codes.data(), scales.data());
    } else {
      global = quant::Nvfp4GlobalScale(quant::AbsMax(w.data(), n * k));
      (void)quant::QuantizeNvfp4(w.data(), n, k, global, codes.data(), scales.data());
    }
    quant::BlockScaledMatrix matrix =
        quant::DenseBlockScaledMatrix(format, n, k, codes.data(), scales.data(), global);
    const quant::PackedBuffer packed = quant::MaybePackBlockScaledMatrix(matrix);
    matrix.packed = packed.get();
    const std::vector<float> x = RandomFloats(m * k, 7);
    std::vector<float> y(static_cast<size_t>(m * n));
    const double seconds =
        BestSeconds(s.compute_repetitions, [&] { quant::BlockScaledMatMul(x.data(), m, matrix, y.data()); });
    out->push_back(Rate("gemm " + std::string(quant::WeightFormatName(format)), fmt::format("m={} n={} k={}", m, n, k),
                        Bound::kComputeInt8, 2.0 * m * n * k, seconds));
  }
}

// Paged attention with f16 KV (the GGUF default): `num_reqs` requests of `queries` query tokens
// each at the end of `seq_len`-token sequences. Returns the best seconds and the KV bytes.
struct AttentionRun {
  double seconds = 0;
  int64_t kv_bytes = 0;
};
AttentionRun RunPagedAttention(int64_t num_reqs, int64_t seq_len, int64_t queries, int reps) {
  constexpr int64_t kHeads = 16, kKvHeads = 4, kHeadDim = 64, kBlock = 16;
  const int64_t blocks_per_req = (seq_len + kBlock - 1) / kBlock;
  const int64_t num_blocks = num_reqs * blocks_per_req;
  const int64_t row = kBlock * kKvHeads * kHeadDim;
  // Random f16 with |x| in [0.5, 1): no NaN, infinity or subnormal.
  const int64_t elements = num_blocks * row;
  auto keys = std::make_unique_for_overwrite<uint16_t[]>(static_cast<size_t>(elements));
  auto values = std::make_unique_for_overwrite<uint16_t[]>(static_cast<size_t>(elements));
  for (uint16_t* data : {keys.get(), values.get()}) {
    FillRandom(reinterpret_cast<uint8_t*>(data), elements * 2);
    ThreadPool::Global().ParallelFor(elements, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) data[i] = static_cast<uint16_t>((data[i] & 0x83ff) | 0x3800);
    });
  }
  std::vector<int32_t> block_table(static_cast<size_t>(num_blocks)), query_start(num_reqs + 1), positions, seq_lens;
  for (int64_t b = 0; b < num_blocks; ++b) block_table[b] = static_cast<int32_t>(b);
  for (int64_t r = 0; r < num_reqs; ++r) {
    query_start[r + 1] = static_cast<int32_t>((r + 1) * queries);
    seq_lens.push_back(static_cast<int32_t>(seq_len));
    for (int64_t t = 0; t < queries; ++t) positions.push_back(static_cast<int32_t>(seq_len - queries + t));
  }
  kernels::PagedKvView kv;
  kv.dtype = DType::kF16;
  kv.keys = keys.get();
  kv.values = values.get();
  kv.num_blocks = num_blocks;
  kv.block_size = kBlock;
  kv.num_kv_heads = kKvHeads;
  kv.head_dim = kHeadDim;
  kernels::PagedBatch batch{num_reqs, query_start.data(), positions.data(), seq_lens.data(), block_table.data(),
                            blocks_per_req};
  kernels::AttentionShape shape{kHeads, kKvHeads, kHeadDim, 0.125f, -1};
  const int64_t tokens = num_reqs * queries;
  const std::vector<float> q = RandomFloats(tokens * kHeads * kHeadDim, 5);
  std::vector<float> o(q.size());
  AttentionRun run;
  run.seconds = BestSeconds(reps, [&] { kernels::PagedAttention(q.data(), tokens, batch, kv, shape, o.data()); });
  run.kv_bytes = 2 * num_reqs * seq_len * kKvHeads * kHeadDim * 2;
  return run;
}

void MeasureAttention(const RooflineSizes& s, std::vector<KernelRate>* out) {
  constexpr int64_t kHeads = 16, kHeadDim = 64, kKvBytesPerToken = 2 * 4 * 64 * 2;  // K + V, 4 KV heads, f16
  // Prefill: one request, every token attends to all earlier ones (q·k and p·v: 4 flops per key
  // and head-dim element).
  {
    const int64_t t = s.attention_tokens;
    const AttentionRun run = RunPagedAttention(1, t, t, s.compute_repetitions);
    const double flops = 4.0 * kHeads * kHeadDim * static_cast<double>(t) * static_cast<double>(t + 1) / 2.0;
    out->push_back(Rate("attention prefill f16", fmt::format("1 x {} tokens, 16/4 heads x 64", t), Bound::kCompute,
                        flops, run.seconds));
  }
  // Decode: one query per request over long sequences; the KV streams from memory.
  {
    constexpr int64_t kSeqLen = 4096;
    const int64_t reqs = std::max<int64_t>(1, s.attention_kv_bytes / (kSeqLen * kKvBytesPerToken));
    const AttentionRun run = RunPagedAttention(reqs, kSeqLen, 1, s.repetitions);
    out->push_back(Rate("attention decode f16", fmt::format("{} x 1 query, {} keys ({})", reqs, kSeqLen, Mib(run.kv_bytes)),
                        Bound::kMemory, static_cast<double>(run.kv_bytes), run.seconds));
  }
}

}  // namespace

std::vector<KernelRate> MeasureKernels(const RooflineSizes& sizes) {
  std::vector<KernelRate> out;
  MeasureDenseMatMuls(sizes, &out);
  MeasureQuantMatMuls(sizes, &out);
  MeasureAttention(sizes, &out);
  return out;
}

}  // namespace ember::tools::bench
