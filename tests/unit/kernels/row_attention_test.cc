// Every variant's RowAttention (kernels/row_attention.h) against a double-precision softmax
// attention on odd shapes (head_dim not a multiple of any vector width, runs with strides wider
// than a row, empty runs), and the invariances the DSpark drafter's batch invariance rests on: a
// query's output does not depend on how its keys are split into runs, what the scratch held, or
// which other queries share its call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/isa.h"
#include "kernels/matmul.h"
#include "kernels/row_attention.h"

namespace ember::kernels {
namespace {

struct Case {
  int64_t head_dim;
  std::vector<int64_t> counts;  // keys per run
  int64_t stride;               // floats between rows (>= head_dim)
};

struct Data {
  std::vector<float> q;
  std::vector<std::vector<float>> keys, values;  // per run, [count, stride]
  std::vector<KeyValueRows> runs;

  Data(const Case& c, uint32_t seed, float spread) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, spread);
    q.resize(c.head_dim);
    for (float& x : q) x = normal(rng);
    for (int64_t count : c.counts) {
      keys.emplace_back(count * c.stride);
      values.emplace_back(count * c.stride);
      for (float& x : keys.back()) x = normal(rng);
      for (float& x : values.back()) x = normal(rng);
    }
    for (size_t r = 0; r < c.counts.size(); ++r) {
      runs.push_back({keys[r].data(), values[r].data(), c.counts[r], c.stride});
    }
  }
  int64_t num_keys() const {
    int64_t n = 0;
    for (const KeyValueRows& r : runs) n += r.count;
    return n;
  }
};

// The attention in double: what every variant approximates.
std::vector<double> Expected(const Data& data, int64_t d, float scale) {
  std::vector<double> scores;
  for (const KeyValueRows& run : data.runs) {
    for (int64_t j = 0; j < run.count; ++j) {
      double s = 0;
      for (int64_t i = 0; i < d; ++i) s += static_cast<double>(data.q[i]) * run.keys[j * run.stride + i];
      scores.push_back(s * scale);
    }
  }
  const double max = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (double& s : scores) sum += (s = std::exp(s - max));
  std::vector<double> out(d, 0.0);
  size_t key = 0;
  for (const KeyValueRows& run : data.runs) {
    for (int64_t j = 0; j < run.count; ++j, ++key) {
      for (int64_t i = 0; i < d; ++i) out[i] += scores[key] / sum * run.values[j * run.stride + i];
    }
  }
  return out;
}

std::vector<float> Attend(Isa isa, const Data& data, int64_t d, float scale, float scratch_fill = 0.0f) {
  std::vector<float> scores(RowAttentionScratch(data.num_keys()), scratch_fill);
  std::vector<float> out(d, -1.0f);
  kKernelVariants.For(isa).row_attention(data.q.data(), d, /*num_queries=*/1, d, scale, data.runs.data(),
                                         static_cast<int64_t>(data.runs.size()), scores.data(), out.data(), d);
  return out;
}

const Case kCases[] = {
    {64, {256, 7}, 192},   // the SmolLM2 drafter: a context, then a block of 7
    {64, {0, 7}, 192},     // nothing in context yet
    {80, {33, 5}, 80},     // head_dim past whole vectors; rows packed
    {7, {1}, 9},           // one key, a sub-vector head
    {256, {17, 16, 3}, 300},
    {24, {100}, 24},
};

TEST(RowAttentionTest, EveryVariantMatchesDoublePrecision) {
  // Tolerance 1e-5 * spread^3: a score's f32 rounding grows with |q||k| (spread^2) and moves the
  // weights by that much relative, times values of size spread. At spread 1 that is ~10x the
  // rounding of a few hundred f32 terms, and far below what a wrong key, weight or lane costs
  // (a dropped key of ~300 shifts an output by ~|v| / 300 ~ 3e-3).
  for (const Isa isa : AvailableIsas()) {
    for (const Case& c : kCases) {
      for (const float spread : {0.3f, 1.0f, 3.0f}) {  // flat to peaked softmax
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " head_dim " << c.head_dim << " spread " << spread);
        const Data data(c, 11, spread);
        const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        const std::vector<double> want = Expected(data, c.head_dim, scale);
        const std::vector<float> got = Attend(isa, data, c.head_dim, scale);
        const double tolerance = 1e-5 * spread * spread * spread;
        for (int64_t i = 0; i < c.head_dim; ++i) EXPECT_NEAR(got[i], want[i], tolerance) << "dim " << i;
      }
    }
  }
}

TEST(RowAttentionTest, OutputDoesNotDependOnHowKeysAreSplitOrTheScratch) {
  for (const Isa isa : AvailableIsas()) {
    SCOPED_TRACE(IsaName(isa));
    const Case whole{64, {263}, 192};
    const Data data(whole, 5, 1.0f);
    const std::vector<float> reference = Attend(isa, data, 64, 0.125f);
    for (const int64_t cut : {1, 7, 16, 100, 256}) {
      Data split = data;
      split.runs = {{data.keys[0].data(), data.values[0].data(), cut, 192},
                    {data.keys[0].data() + cut * 192, data.values[0].data() + cut * 192, 263 - cut, 192}};
      const std::vector<float> got = Attend(isa, split, 64, 0.125f, /*scratch_fill=*/12345.0f);
      EXPECT_EQ(std::memcmp(got.data(), reference.data(), 64 * sizeof(float)), 0) << "cut at " << cut;
    }
  }
}

TEST(RowAttentionTest, AQueryInAGroupHasTheBitsItHasAlone) {
  // Group sizes across every variant's value tile (6, 3 and 2 queries) and its remainders, head
  // sizes with and without a partial strip, queries and outputs strided as a block's heads are.
  for (const Isa isa : AvailableIsas()) {
    for (const Case& c : {Case{64, {256, 7}, 192}, Case{80, {33, 5}, 80}, Case{7, {1}, 9}, Case{24, {100}, 24}}) {
      const Data data(c, 3, 1.0f);
      const int64_t num_keys = data.num_keys();
      const int64_t q_stride = 3 * c.head_dim + 5;
      for (const int64_t num_queries : {1, 2, 5, 6, 7, 13}) {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " head_dim " << c.head_dim << " queries " << num_queries);
        std::mt19937 rng(static_cast<uint32_t>(num_queries));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> q(num_queries * q_stride);
        for (float& x : q) x = normal(rng);
        std::vector<float> scores(num_queries * RowAttentionScratch(num_keys), 777.0f);
        std::vector<float> out(num_queries * q_stride, -1.0f);
        kKernelVariants.For(isa).row_attention(q.data(), q_stride, num_queries, c.head_dim, 0.2f, data.runs.data(),
                                               static_cast<int64_t>(data.runs.size()), scores.data(), out.data(),
                                               q_stride);
        for (int64_t i = 0; i < num_queries; ++i) {
          std::vector<float> alone_scores(RowAttentionScratch(num_keys)), alone(c.head_dim);
          kKernelVariants.For(isa).row_attention(q.data() + i * q_stride, c.head_dim, 1, c.head_dim, 0.2f,
                                                 data.runs.data(), static_cast<int64_t>(data.runs.size()),
                                                 alone_scores.data(), alone.data(), c.head_dim);
          EXPECT_EQ(std::memcmp(out.data() + i * q_stride, alone.data(), c.head_dim * sizeof(float)), 0)
              << "query " << i;
          // Columns past head_dim in the strided output are not written.
          EXPECT_EQ(out[i * q_stride + c.head_dim], -1.0f) << "query " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ember::kernels
