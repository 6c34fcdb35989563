// The MoE block's steps (Route, Dispatch, Experts, Combine) over one process, against a
// per-token, per-expert reference written with the plain Apply calls.
#include "model/blocks/moe_block.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace ember {
namespace {

constexpr int64_t kHidden = 8, kLatent = 6, kInter = 5, kExperts = 5, kTopK = 2;

// Random f32 weights for one MoE layer; the buffers outlive the views in `w`.
struct RandomMoe {
  explicit RandomMoe(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    auto fill = [&](std::vector<float>& v, int64_t n) {
      v.resize(n);
      for (float& x : v) x = normal(rng);
    };
    fill(router, kExperts * kHidden);
    fill(pre, kLatent * kHidden);
    fill(gate_up, kExperts * 2 * kInter * kLatent);
    fill(down, kExperts * kLatent * kInter);
    fill(post, kHidden * kLatent);
    fill(w.router_bias, kExperts);
    fill(w.pre_expert_gain, kLatent);
    fill(w.post_expert_gain, kLatent);
    w.router = Linear::Dense({DType::kF32, Shape({kExperts, kHidden}), router.data()});
    w.pre_expert_proj = Linear::Dense({DType::kF32, Shape({kLatent, kHidden}), pre.data()});
    w.experts_gate_up = ExpertWeights::Dense({DType::kF32, Shape({kExperts, 2 * kInter, kLatent}), gate_up.data()});
    w.experts_down = ExpertWeights::Dense({DType::kF32, Shape({kExperts, kLatent, kInter}), down.data()});
    w.post_expert_proj = Linear::Dense({DType::kF32, Shape({kHidden, kLatent}), post.data()});
    o.num_experts = kExperts;
    o.top_k = kTopK;
    o.routed_scaling_factor = 2.5;
    o.router_logit_scale = 0.75f;
    o.latent_norm_eps = 1e-6f;
    o.post_expert_norm_eps = 1e-5f;
  }
  std::vector<float> router, pre, gate_up, down, post;
  MoeWeights w;
  MoeOptions o;
};

std::vector<float> RandomRows(int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * kHidden);
  for (float& v : x) v = normal(rng);
  return x;
}

bool BitwiseEqual(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST(MoeBlockTest, RouteTakesTopKByBiasedScoreAndWeighsByUnbiasedScore) {
  RandomMoe m(1);
  std::fill(m.router.begin(), m.router.end(), 0.0f);  // every score is sigmoid(0) = 0.5
  m.w.router_bias = {0.0f, 0.3f, 0.0f, 0.1f, 0.2f};
  const std::vector<float> x = RandomRows(2, 2);
  Workspace ws;
  Workspace::Scope scope(ws);
  MoeBlock block(m.w, m.o, exec::LocalCommunicator::Instance(), ws);
  const MoeRouting r = block.Route(x.data(), 2);
  ASSERT_EQ(r.count, 2);
  ASSERT_EQ(r.top_k, kTopK);
  for (int64_t t = 0; t < 2; ++t) {
    EXPECT_EQ(r.chosen[t * kTopK], 1);
    EXPECT_EQ(r.chosen[t * kTopK + 1], 4);
    // The bias only selects: the weights come from the equal unbiased scores.
    EXPECT_FLOAT_EQ(r.weights[t * kTopK], 1.25f);
    EXPECT_FLOAT_EQ(r.weights[t * kTopK + 1], 1.25f);
  }
  m.w.router_bias.assign(kExperts, 0.0f);  // all tied: the lower index wins
  const MoeRouting tied = block.Route(x.data(), 1);
  EXPECT_EQ(std::vector<int32_t>(tied.chosen.begin(), tied.chosen.end()), (std::vector<int32_t>{0, 1}));
}

TEST(MoeBlockTest, DispatchLaysRowsOutExpertAfterExpertInTokenOrder) {
  RandomMoe m(3);
  const int64_t count = 6;
  const std::vector<float> x = RandomRows(count, 4);
  Workspace ws;
  Workspace::Scope scope(ws);
  MoeBlock block(m.w, m.o, exec::LocalCommunicator::Instance(), ws);
  const MoeRouting r = block.Route(x.data(), count);
  const MoeDispatch d = block.Dispatch(x.data(), r);
  ASSERT_EQ(static_cast<int64_t>(d.token.size()), count * kTopK);
  EXPECT_EQ(std::vector<int64_t>(d.send_rows.begin(), d.send_rows.end()), (std::vector<int64_t>{count * kTopK}));
  EXPECT_EQ(std::vector<int64_t>(d.recv_rows.begin(), d.recv_rows.end()),
            std::vector<int64_t>(d.send_rows.begin(), d.send_rows.end()));

  std::vector<float> latent(count * kLatent);
  m.w.pre_expert_proj.Apply(x.data(), count, latent.data());
  kernels::RmsNormGain(latent.data(), count, kLatent, m.o.latent_norm_eps, m.w.pre_expert_gain.data(), latent.data());
  int64_t next_row = 0, previous_expert = -1;
  for (const MoeDispatch::ExpertRows& e : d.experts) {
    EXPECT_GT(e.expert, previous_expert);
    EXPECT_EQ(e.first_row, next_row);
    previous_expert = e.expert;
    for (int64_t i = 0; i < e.n; ++i) {
      const int64_t row = e.first_row + i;
      const int64_t t = d.token[row];
      if (i > 0) {
        EXPECT_GT(t, d.token[row - 1]);
      }
      const int32_t* chosen = r.chosen.data() + t * kTopK;
      EXPECT_NE(std::find(chosen, chosen + kTopK, e.expert), chosen + kTopK);
      EXPECT_TRUE(BitwiseEqual(d.rows.data() + row * kLatent, latent.data() + t * kLatent, kLatent));
    }
    next_row += e.n;
  }
  EXPECT_EQ(next_row, count * kTopK);
}

// Token t alone, expert by expert with ExpertWeights::Apply, its weighted outputs summed in
// expert-index order: what the grouped block must reproduce bit for bit.
std::vector<float> ReferenceToken(const RandomMoe& m, const float* x) {
  Workspace ws;
  Workspace::Scope scope(ws);
  MoeBlock block(m.w, m.o, exec::LocalCommunicator::Instance(), ws);
  const MoeRouting r = block.Route(x, 1);
  std::vector<float> latent(kLatent);
  m.w.pre_expert_proj.Apply(x, 1, latent.data());
  kernels::RmsNormGain(latent.data(), 1, kLatent, m.o.latent_norm_eps, m.w.pre_expert_gain.data(), latent.data());
  std::vector<std::pair<int32_t, float>> picks;
  for (int64_t s = 0; s < kTopK; ++s) picks.push_back({r.chosen[s], r.weights[s]});
  std::sort(picks.begin(), picks.end());
  std::vector<float> mixed(kLatent, 0.0f);
  for (const auto& [expert, weight] : picks) {
    std::vector<float> gu(2 * kInter), act(kInter), out(kLatent);
    m.w.experts_gate_up.Apply(expert, latent.data(), 1, gu.data());
    kernels::SwiGluHalves(gu.data(), 1, kInter, act.data());
    m.w.experts_down.Apply(expert, act.data(), 1, out.data());
    kernels::GainRmsNorm(out.data(), 1, kLatent, m.o.post_expert_norm_eps, m.w.post_expert_gain.data(), out.data());
    for (int64_t j = 0; j < kLatent; ++j) mixed[j] += weight * out[j];
  }
  std::vector<float> f(kHidden);
  m.w.post_expert_proj.Apply(mixed.data(), 1, f.data());
  return f;
}

TEST(MoeBlockTest, ForwardEqualsThePerTokenReferenceBitwise) {
  RandomMoe m(5);
  for (int64_t count : {1, 3, 17}) {
    const std::vector<float> x = RandomRows(count, 6 + static_cast<uint32_t>(count));
    std::vector<float> f(count * kHidden);
    Workspace ws;
    MoeBlock(m.w, m.o, exec::LocalCommunicator::Instance(), ws).Forward(x.data(), count, f.data());
    for (int64_t t = 0; t < count; ++t) {
      const std::vector<float> expected = ReferenceToken(m, x.data() + t * kHidden);
      EXPECT_TRUE(BitwiseEqual(f.data() + t * kHidden, expected.data(), kHidden))
          << "count " << count << " token " << t;
    }
  }
}

// Forward is its four steps; given counters, it also adds each token's chosen experts to them
// (and the bits stay those of the steps, which count nothing).
TEST(MoeBlockTest, StepsComposeToForwardWhichCountsTheRoutedExperts) {
  RandomMoe m(7);
  const int64_t count = 9;
  const std::vector<float> x = RandomRows(count, 8);
  Workspace ws;
  Workspace::Scope scope(ws);
  MoeBlock block(m.w, m.o, exec::LocalCommunicator::Instance(), ws);
  std::vector<float> whole(count * kHidden), stepped(count * kHidden);
  std::vector<int64_t> tokens(kExperts, 100);  // counts add to what is there
  block.Forward(x.data(), count, whole.data(), tokens.data());
  const MoeRouting r = block.Route(x.data(), count);
  MoeDispatch d = block.Dispatch(x.data(), r);
  block.Experts(d);
  block.Combine(d, count, stepped.data());
  EXPECT_TRUE(BitwiseEqual(whole.data(), stepped.data(), count * kHidden));
  std::vector<int64_t> expected(kExperts, 100);
  for (const int32_t e : r.chosen) ++expected[e];
  EXPECT_EQ(tokens, expected);
  int64_t routed = 0;
  for (const int64_t n : tokens) routed += n - 100;
  EXPECT_EQ(routed, count * kTopK);
}

TEST(MoeBlockTest, WorkspaceBytesCoversForward) {
  RandomMoe m(9);
  for (int64_t count : {1, 5, 33}) {
    const std::vector<float> x = RandomRows(count, 10 + static_cast<uint32_t>(count));
    std::vector<float> f(count * kHidden);
    Workspace ws;
    const int64_t estimate = MoeBlock::WorkspaceBytes(m.w, m.o, count, exec::LocalCommunicator::Instance());
    ASSERT_TRUE(ws.Reserve(estimate).ok());
    MoeBlock(m.w, m.o, exec::LocalCommunicator::Instance(), ws).Forward(x.data(), count, f.data());
    EXPECT_EQ(ws.overflowed_steps(), 0) << count;
    EXPECT_LE(ws.high_water(), estimate) << count;
  }
}

}  // namespace
}  // namespace ember
