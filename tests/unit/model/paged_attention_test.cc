// Paged attention (kernels/paged_attention.h) reading K/V that KvStore wrote, against a
// contiguous f64 attention over the original f32 K/V, on every kernel variant the host runs:
// shuffled block ids, several requests with ragged lengths, queries that are only the tail of a
// request's context (chunked prefill / decode), GQA, windows smaller and larger than the
// context, and every KV dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "model/kv_store.h"

namespace ember {
namespace {

// Worst-case relative rounding of one stored element (half an ulp at 1.0) and an absolute floor
// for values below the format's normal range, relative to the row's largest |value| for fp8
// (whose scale maps amax to 448) and absolute for f16.
struct StoredError {
  double relative = 0;
  double absolute_of_amax = 0;  // fp8: subnormal spacing / 2 = 2^-10, in units of amax / 448
  double absolute = 0;          // f16: subnormal spacing / 2 = 2^-25
};

StoredError ErrorOf(kv::KvDtype dtype) {
  switch (dtype) {
    case kv::KvDtype::kF32: return {0, 0, 0};
    case kv::KvDtype::kF16: return {std::ldexp(1.0, -11), 0, std::ldexp(1.0, -25)};
    case kv::KvDtype::kBF16: return {std::ldexp(1.0, -8), 0, 0};
    case kv::KvDtype::kFp8E4M3: return {std::ldexp(1.0, -4), std::ldexp(1.0, -10) / 448.0, 0};
  }
  return {};
}

struct Request {
  int64_t seq_len;  // context after this step
  int64_t q_len;    // this step's queries: the last q_len positions
};

struct Case {
  int64_t num_heads, num_kv_heads, head_dim, block_size, window;
  std::vector<Request> requests;
};

class PagedAttentionTest : public ::testing::TestWithParam<kv::KvDtype> {
 protected:
  void TearDown() override { ASSERT_TRUE(SelectIsa(IsaName(AvailableIsas().back())).ok()); }

  void Run(const Case& c, uint32_t seed) {
    const kv::KvDtype dtype = GetParam();
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t d = c.head_dim, kv_width = c.num_kv_heads * d, q_width = c.num_heads * d;
    const int64_t num_reqs = static_cast<int64_t>(c.requests.size());

    // Blocks: every request's logical blocks get distinct physical ids in shuffled order.
    int64_t max_blocks = 0, total_blocks = 0;
    for (const Request& r : c.requests) {
      const int64_t blocks = (r.seq_len + c.block_size - 1) / c.block_size;
      max_blocks = std::max(max_blocks, blocks);
      total_blocks += blocks;
    }
    auto config = kv::PlanKvGroups({{kv::AttentionKind::kFull, 0, c.num_kv_heads, d}}, c.block_size, dtype);
    ASSERT_TRUE(config.ok());
    config->num_blocks = 1 + total_blocks + 3;  // a few never used
    auto store = KvStore::Create(*config);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<int32_t> ids(config->num_blocks - 1);
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> block_table(num_reqs * max_blocks, 0);
    size_t next_id = 0;

    std::vector<std::vector<float>> keys(num_reqs), values(num_reqs);
    std::vector<int32_t> query_start_loc = {0}, positions, seq_lens;
    for (int64_t r = 0; r < num_reqs; ++r) {
      const Request& req = c.requests[r];
      for (int64_t j = 0; j * c.block_size < req.seq_len; ++j) block_table[r * max_blocks + j] = ids[next_id++];
      keys[r].resize(req.seq_len * kv_width);
      values[r].resize(req.seq_len * kv_width);
      for (float& x : keys[r]) x = normal(rng);
      for (float& x : values[r]) x = normal(rng);
      std::vector<int64_t> slots(req.seq_len);
      for (int64_t p = 0; p < req.seq_len; ++p) {
        slots[p] = int64_t{block_table[r * max_blocks + p / c.block_size]} * c.block_size + p % c.block_size;
      }
      store->Write(0, keys[r].data(), values[r].data(), req.seq_len, slots.data());
      for (int64_t p = req.seq_len - req.q_len; p < req.seq_len; ++p) positions.push_back(static_cast<int32_t>(p));
      query_start_loc.push_back(static_cast<int32_t>(positions.size()));
      seq_lens.push_back(static_cast<int32_t>(req.seq_len));
    }
    const int64_t num_tokens = static_cast<int64_t>(positions.size());
    std::vector<float> q(num_tokens * q_width);
    for (float& x : q) x = normal(rng);

    kernels::PagedBatch batch;
    batch.num_reqs = num_reqs;
    batch.query_start_loc = query_start_loc.data();
    batch.positions = positions.data();
    batch.seq_lens = seq_lens.data();
    batch.block_table = block_table.data();
    batch.max_blocks_per_req = max_blocks;
    kernels::AttentionShape shape{c.num_heads, c.num_kv_heads, d, 1.0f / std::sqrt(static_cast<float>(d)), c.window};

    // The f64 oracle on the original f32 K/V and the bound on what storing them costs.
    const StoredError err = ErrorOf(dtype);
    std::vector<double> expected(num_tokens * q_width), bound(num_tokens * q_width);
    for (int64_t r = 0; r < num_reqs; ++r) {
      for (int64_t t = query_start_loc[r]; t < query_start_loc[r + 1]; ++t) {
        const int64_t p = positions[t];
        const int64_t first = c.window > 0 ? std::max<int64_t>(0, p - c.window + 1) : 0;
        for (int64_t h = 0; h < c.num_heads; ++h) {
          const int64_t kvh = h / (c.num_heads / c.num_kv_heads);
          const float* qh = q.data() + t * q_width + h * d;
          auto abs_err = [&](const std::vector<float>& data, int64_t j) {  // per-element absolute floor
            double amax = 0;
            for (int64_t i = 0; i < d; ++i) amax = std::max(amax, std::fabs(double{data[(j * c.num_kv_heads + kvh) * d + i]}));
            return err.absolute + err.absolute_of_amax * amax;
          };
          std::vector<double> s(p - first + 1);
          double max_s = -INFINITY, delta = 0;  // delta: worst |score change| the stored K can cause
          for (int64_t j = first; j <= p; ++j) {
            const float* kh = keys[r].data() + (j * c.num_kv_heads + kvh) * d;
            double dot = 0, perturb = 0;
            const double floor = abs_err(keys[r], j);
            for (int64_t i = 0; i < d; ++i) {
              dot += double{qh[i]} * kh[i];
              perturb += std::fabs(double{qh[i]}) * (err.relative * std::fabs(double{kh[i]}) + floor);
            }
            s[j - first] = dot * shape.scale;
            delta = std::max(delta, perturb * shape.scale);
            max_s = std::max(max_s, s[j - first]);
          }
          double total = 0;
          for (double& x : s) total += (x = std::exp(x - max_s));
          // Each weight moves by at most a factor exp(+-2 delta); each stored value by
          // relative * |v| + floor.
          const double weight_factor = std::exp(2 * delta) - 1;
          std::vector<double> value_floor(p - first + 1);
          for (int64_t j = first; j <= p; ++j) value_floor[j - first] = abs_err(values[r], j);
          for (int64_t i = 0; i < d; ++i) {
            double o = 0, value_err = 0, v_max = 0;
            for (int64_t j = first; j <= p; ++j) {
              const double v = values[r][(j * c.num_kv_heads + kvh) * d + i];
              const double w = s[j - first] / total;
              o += w * v;
              value_err += w * (err.relative * std::fabs(v) + value_floor[j - first]);
              v_max = std::max(v_max, std::fabs(v));
            }
            expected[t * q_width + h * d + i] = o;
            bound[t * q_width + h * d + i] = value_err + weight_factor * v_max * (1 + err.relative) + 1e-5;
          }
        }
      }
    }

    std::vector<float> reference;
    for (const Isa isa : AvailableIsas()) {
      const std::string name(IsaName(isa));
      ASSERT_TRUE(SelectIsa(name).ok());
      std::vector<float> out(num_tokens * q_width, NAN);
      kernels::PagedAttention(q.data(), num_tokens, batch, store->View(0), shape, out.data());
      double worst = 0, worst_ratio = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        const double diff = std::fabs(out[i] - expected[i]);
        worst = std::max(worst, diff);
        worst_ratio = std::max(worst_ratio, diff / bound[i]);
        ASSERT_LE(diff, bound[i]) << name << " element " << i << " got " << out[i] << " want "
                                  << expected[i];
      }
      // Variants read the same stored values and differ only in summation order.
      if (reference.empty()) {
        reference = out;
      } else {
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_NEAR(out[i], reference[i], 1e-5) << name << " vs ref, element " << i;
        }
      }
      RecordProperty(name + "_worst_abs_error", std::to_string(worst));
      if (isa == AvailableIsas().back()) {
        std::printf("[ %s ] %s: worst |error| %.3g, worst error / derived bound %.3f\n",
                    std::string(kv::KvDtypeName(dtype)).c_str(), name.c_str(), worst,
                    worst_ratio);
      }
    }
  }
};

TEST_P(PagedAttentionTest, RaggedBatchGqaFullAttention) {
  Run({6, 2, 20, 4, -1, {{1, 1}, {13, 13}, {37, 5}, {9, 1}}}, 1);
}

TEST_P(PagedAttentionTest, SlidingWindowSmallerThanContext) {
  Run({4, 2, 64, 16, 7, {{40, 40}, {23, 3}, {5, 1}, {70, 1}}}, 2);
}

TEST_P(PagedAttentionTest, SlidingWindowLargerThanContext) {
  Run({8, 8, 33, 8, 1000, {{12, 6}, {29, 29}}}, 3);
}

TEST_P(PagedAttentionTest, MultiQueryHeadAndBlockSizeOne) {
  Run({5, 1, 16, 1, 3, {{11, 4}, {2, 2}}}, 4);
}

TEST_P(PagedAttentionTest, WindowOfOneReadsOnlyTheOwnKey) {
  Run({2, 1, 4, 2, 1, {{5, 2}, {1, 1}}}, 5);
}

// Past several segments of the tiled kernel (kPagedSegmentKeys), SmolLM2's head layout: the
// online softmax and the segment fold over up to 700 keys.
TEST_P(PagedAttentionTest, LongContextAcrossSegments) {
  Run({9, 3, 64, 16, -1, {{700, 40}, {600, 1}, {300, 300}}}, 6);
}

// Gemma 3's sliding layers: head_dim 256, 4 heads per KV head, a 512-key window.
TEST_P(PagedAttentionTest, HeadDim256SlidingWindow) {
  Run({4, 1, 256, 16, 512, {{900, 20}, {530, 1}, {40, 40}}}, 7);
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, PagedAttentionTest,
                         ::testing::Values(kv::KvDtype::kF32, kv::KvDtype::kF16, kv::KvDtype::kBF16,
                                           kv::KvDtype::kFp8E4M3),
                         [](const auto& info) { return std::string(kv::KvDtypeName(info.param)); });

// The stored bytes: slot -1 is skipped, fp8 rows carry scale amax / 448 and decode within half
// an e4m3 ulp.
TEST(KvStoreTest, WritesConvertAndSkipPaddingSlots) {
  auto config = kv::PlanKvGroups({{kv::AttentionKind::kFull, 0, 2, 8}}, 4, kv::KvDtype::kFp8E4M3);
  ASSERT_TRUE(config.ok());
  config->num_blocks = 3;
  auto store = KvStore::Create(*config);
  ASSERT_TRUE(store.ok());
  std::vector<float> k(2 * 16), v(2 * 16);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>(i) - 7.5f;
    v[i] = 0.01f * static_cast<float>(i);
  }
  const int64_t slots[2] = {5, -1};
  store->Write(0, k.data(), v.data(), 2, slots);
  const kernels::PagedKvView view = store->View(0);
  ASSERT_EQ(view.dtype, DType::kF8E4M3);
  const auto* codes = static_cast<const uint8_t*>(view.keys);
  for (int64_t h = 0; h < 2; ++h) {
    const int64_t row = 5 * 2 + h;
    float amax = 0;
    for (int i = 0; i < 8; ++i) amax = std::max(amax, std::fabs(k[h * 8 + i]));
    EXPECT_FLOAT_EQ(view.key_scales[row], amax / 448.0f);
    for (int i = 0; i < 8; ++i) {
      const float decoded = F8E4M3ToF32(codes[row * 8 + i]) * view.key_scales[row];
      EXPECT_NEAR(decoded, k[h * 8 + i], std::fabs(k[h * 8 + i]) / 16 + 1e-6) << h << " " << i;
    }
  }
  // Nothing but slot 5 was written.
  for (int64_t row = 0; row < 3 * 4 * 2; ++row) {
    if (row / 2 == 5) continue;
    EXPECT_EQ(view.key_scales[row], 0.0f) << row;
    for (int i = 0; i < 8; ++i) EXPECT_EQ(codes[row * 8 + i], 0) << row;
  }
  EXPECT_FALSE(KvStore::Create(kv::KvCacheConfig{}).ok());
}

}  // namespace
}  // namespace ember
