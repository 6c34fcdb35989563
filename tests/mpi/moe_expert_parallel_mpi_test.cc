// The MoE block under expert parallelism across real processes (run with the communicator tests
// under mpiexec -n 2 and -n 3): each rank holds some experts whole, rows travel to their experts'
// ranks and back, and every rank's output must be bitwise what one process with every expert
// computes for the same tokens. Covered: each rank with its own tokens (DEP) and all ranks with the
// same tokens (TEP), top-k choices spanning ranks, every token routed to one rank's experts, a
// rank with no tokens, and a placement that is not contiguous blocks.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "model/blocks/moe_block.h"
#include "parallel/mpi_communicator.h"

namespace ember {
namespace {

// Top-3: the order of a token's three weighted outputs changes the rounding of their sum (two
// terms added to zero commute exactly), so adding them in any order but expert-index would show.
constexpr int64_t kHidden = 16, kLatent = 16, kInter = 8, kExperts = 6, kTopK = 3;

std::vector<float> Normal(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// One MoE layer's random f32 weights, the same on every rank (same seed).
struct Layer {
  Layer() {
    w.router = Linear::Dense({DType::kF32, Shape({kExperts, kHidden}), router.data()});
    w.pre_expert_proj = Linear::Dense({DType::kF32, Shape({kLatent, kHidden}), pre.data()});
    w.experts_gate_up = ExpertWeights::Dense({DType::kF32, Shape({kExperts, 2 * kInter, kLatent}), gate_up.data()});
    w.experts_down = ExpertWeights::Dense({DType::kF32, Shape({kExperts, kLatent, kInter}), down.data()});
    w.post_expert_proj = Linear::Dense({DType::kF32, Shape({kHidden, kLatent}), post.data()});
    w.router_bias = Normal(kExperts, 6, 0.1f);
    w.pre_expert_gain = Normal(kLatent, 7, 0.2f);
    w.post_expert_gain = Normal(kLatent, 8, 0.2f);
    o.num_experts = kExperts;
    o.top_k = kTopK;
    o.routed_scaling_factor = 2.5;
    o.router_logit_scale = 0.75f;
  }
  std::vector<float> router = Normal(kExperts * kHidden, 1, 0.5f), pre = Normal(kLatent * kHidden, 2, 0.5f),
                     gate_up = Normal(kExperts * 2 * kInter * kLatent, 3, 0.5f),
                     down = Normal(kExperts * kLatent * kInter, 4, 0.5f), post = Normal(kHidden * kLatent, 5, 0.5f);
  MoeWeights w;
  MoeOptions o;
};

// A rank's share of `layer`: the experts `owner` gives it, copied in expert order.
struct RankShare {
  RankShare(const Layer& layer, const std::vector<int32_t>& owner, int rank) {
    w = layer.w;
    o = layer.o;
    o.expert_owner = owner;
    const int64_t gate_up_size = 2 * kInter * kLatent, down_size = kLatent * kInter;
    for (int64_t e = 0; e < kExperts; ++e) {
      if (owner[e] != rank) {
        o.local_expert.push_back(-1);
        continue;
      }
      o.local_expert.push_back(static_cast<int32_t>(gate_up.size() / gate_up_size));
      gate_up.insert(gate_up.end(), layer.gate_up.begin() + e * gate_up_size, layer.gate_up.begin() + (e + 1) * gate_up_size);
      down.insert(down.end(), layer.down.begin() + e * down_size, layer.down.begin() + (e + 1) * down_size);
    }
    const int64_t held = static_cast<int64_t>(gate_up.size()) / gate_up_size;
    w.experts_gate_up = ExpertWeights::Dense({DType::kF32, Shape({held, 2 * kInter, kLatent}), gate_up.data()});
    w.experts_down = ExpertWeights::Dense({DType::kF32, Shape({held, kLatent, kInter}), down.data()});
  }
  std::vector<float> gate_up, down;
  MoeWeights w;
  MoeOptions o;
};

std::vector<int32_t> Contiguous(int world) {
  std::vector<int32_t> owner;
  for (int64_t e = 0; e < kExperts; ++e) owner.push_back(static_cast<int32_t>(e / (kExperts / world)));
  return owner;
}

std::vector<int32_t> RoundRobin(int world) {
  std::vector<int32_t> owner;
  for (int64_t e = 0; e < kExperts; ++e) owner.push_back(static_cast<int32_t>((kExperts - 1 - e) % world));
  return owner;
}

class MoeExpertParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = parallel::MpiCommunicator::World();
    comm_->set_timeout(60.0);
    rank_ = comm_->rank();
    world_ = comm_->world_size();
  }

  std::vector<float> OneProcess(const Layer& layer, const std::vector<float>& x) const {
    const int64_t count = static_cast<int64_t>(x.size()) / kHidden;
    std::vector<float> f(static_cast<size_t>(count * kHidden));
    Workspace ws;
    MoeBlock(layer.w, layer.o, exec::LocalCommunicator::Instance(), ws).Forward(x.data(), count, f.data());
    return f;
  }

  // Runs the expert-parallel block on this rank's `x` and checks it against one process, bit for
  // bit; returns this rank's received-row count through `received` when given.
  void ExpectOneProcessBits(const Layer& layer, const std::vector<int32_t>& owner, const std::vector<float>& x,
                            bool replicated, std::vector<int64_t>* group_counts = nullptr) {
    RankShare share(layer, owner, rank_);
    share.o.tokens_replicated = replicated;
    const int64_t count = static_cast<int64_t>(x.size()) / kHidden;
    std::vector<float> f(static_cast<size_t>(count * kHidden), -1.0f);
    std::vector<int64_t> counts(kExperts, 0);
    Workspace ws;
    MoeBlock(share.w, share.o, *comm_, ws).Forward(x.data(), count, f.data(), counts.data());
    const std::vector<float> expected = OneProcess(layer, x);
    ASSERT_EQ(f.size(), expected.size());
    EXPECT_TRUE(f.empty() || std::memcmp(f.data(), expected.data(), f.size() * sizeof(float)) == 0)
        << "rank " << rank_ << ": " << count << " tokens differ from one process";
    if (group_counts != nullptr) *group_counts = counts;
  }

  std::unique_ptr<parallel::MpiCommunicator> comm_;
  int rank_ = 0, world_ = 1;
};

TEST_F(MoeExpertParallelTest, EachRanksOwnTokensGetOneProcesssBits) {
  const Layer layer;
  for (const auto& owner : {Contiguous(world_), RoundRobin(world_)}) {
    std::vector<int64_t> counts;
    ExpectOneProcessBits(layer, owner, Normal((5 + 3 * rank_) * kHidden, 100 + rank_, 1.0f), false, &counts);
    // The counts are the group's: every rank's tokens times top-k.
    int64_t routed = 0, expected = 0;
    for (int64_t c : counts) routed += c;
    for (int r = 0; r < world_; ++r) expected += (5 + 3 * r) * kTopK;
    EXPECT_EQ(routed, expected);
  }
}

TEST_F(MoeExpertParallelTest, ARankWithNoTokensStillServesItsExperts) {
  const Layer layer;
  const int64_t count = rank_ == 1 ? 0 : 4;
  ExpectOneProcessBits(layer, Contiguous(world_), Normal(count * kHidden, 200 + rank_, 1.0f), false);
}

TEST_F(MoeExpertParallelTest, EveryTokenRoutedToOneRanksExperts) {
  Layer layer;
  // The selection bias picks rank 0's experts first: over 2 ranks (3 experts each) the other rank
  // receives no rows at all.
  const std::vector<int32_t> owner = Contiguous(world_);
  for (int64_t e = 0; e < kExperts; ++e) layer.w.router_bias[e] = owner[e] == 0 ? 50.0f : 0.0f;
  ExpectOneProcessBits(layer, owner, Normal(6 * kHidden, 300 + rank_, 1.0f), false);
}

TEST_F(MoeExpertParallelTest, ReplicatedTokensAreSplitAndGatheredBack) {
  const Layer layer;
  // 7 tokens over 2 or 3 ranks: uneven blocks; 1 token: ranks with empty blocks. Same x everywhere.
  for (const int64_t count : {int64_t{7}, int64_t{1}}) {
    std::vector<int64_t> counts;
    ExpectOneProcessBits(layer, Contiguous(world_), Normal(count * kHidden, 400, 1.0f), true, &counts);
    int64_t routed = 0;
    for (int64_t c : counts) routed += c;
    EXPECT_EQ(routed, count * kTopK) << "each token counted once, not once per rank";
  }
}

}  // namespace
}  // namespace ember
