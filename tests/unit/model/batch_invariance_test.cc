// Batch invariance of CausalLM::Forward: a request's logits are bitwise identical whether it runs
// alone or batched with other requests of different lengths, whether its prompt is prefilled in
// one step or in several chunks, and whatever the thread count. Checked on the Muse Spark golden
// fixtures (MoE, hybrid sliding/full attention, several KV groups) and on a random Gemma-shaped
// DenseDecoder (QK-norm gains, sliding windows, GQA, a head_dim that is not a lane multiple), and
// on the real SmolLM2 GGUF when it is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/blocks/dense_decoder.h"
#include "model/causal_lm.h"
#include "random_dense_decoder.h"
#include "support/source_dir.h"

namespace ember {
namespace {

struct Plan {
  std::vector<int32_t> tokens;
  std::vector<int64_t> chunks;  // step s computes chunks[s] tokens (sum = tokens.size())
};

// Runs the plans together (step s carries chunk s of every request that has one) on a KV store
// with shuffled block ids, and returns each request's logits for all its tokens in order.
std::vector<std::vector<float>> RunBatched(CausalLM& model, kv::KvDtype dtype, const std::vector<Plan>& plans,
                                           uint32_t seed) {
  constexpr int64_t kBlockSize = 4;
  const int64_t vocab = model.info().vocab_size;
  auto planned = kv::PlanKvGroups(model.KvLayerSpecs(), kBlockSize, dtype);
  EXPECT_TRUE(planned.ok());
  kv::KvCacheConfig config = *planned;
  const size_t num_groups = config.groups.size();
  const int64_t num_reqs = static_cast<int64_t>(plans.size());
  int64_t max_blocks = 0, total = 0;
  for (const Plan& p : plans) {
    const int64_t blocks = (static_cast<int64_t>(p.tokens.size()) + kBlockSize - 1) / kBlockSize;
    max_blocks = std::max(max_blocks, blocks);
    total += blocks * static_cast<int64_t>(num_groups);
  }
  config.num_blocks = 1 + total + 5;
  auto store = KvStore::Create(config);
  EXPECT_TRUE(store.ok());
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(config.num_blocks - 1);
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), rng);
  // tables[g][r]: request r's blocks in group g.
  std::vector<std::vector<std::vector<int32_t>>> tables(num_groups, std::vector<std::vector<int32_t>>(num_reqs));
  size_t next = 0;
  for (size_t g = 0; g < num_groups; ++g) {
    for (int64_t r = 0; r < num_reqs; ++r) {
      tables[g][r].assign(max_blocks, kv::kNullBlock);
      for (int64_t j = 0; j * kBlockSize < static_cast<int64_t>(plans[r].tokens.size()); ++j) {
        tables[g][r][j] = ids[next++];
      }
    }
  }

  std::vector<std::vector<float>> out(num_reqs);
  std::vector<int64_t> done(num_reqs, 0);
  size_t steps = 0;
  for (const Plan& p : plans) steps = std::max(steps, p.chunks.size());
  for (size_t s = 0; s < steps; ++s) {
    ForwardBatch batch;
    batch.query_start_loc = {0};
    batch.groups.resize(num_groups);
    for (auto& table : batch.groups) table.max_blocks_per_req = static_cast<int32_t>(max_blocks);
    std::vector<int64_t> in_step;
    for (int64_t r = 0; r < num_reqs; ++r) {
      if (s >= plans[r].chunks.size()) continue;
      in_step.push_back(r);
      const int64_t count = plans[r].chunks[s];
      for (int64_t i = 0; i < count; ++i) {
        const int64_t position = done[r] + i;
        batch.token_ids.push_back(plans[r].tokens[position]);
        batch.positions.push_back(static_cast<int32_t>(position));
        batch.logits_indices.push_back(static_cast<int32_t>(batch.logits_indices.size()));
        for (size_t g = 0; g < num_groups; ++g) {
          batch.groups[g].slot_mapping.push_back(int64_t{tables[g][r][position / kBlockSize]} * kBlockSize +
                                                 position % kBlockSize);
        }
      }
      batch.query_start_loc.push_back(static_cast<int32_t>(batch.token_ids.size()));
      batch.seq_lens.push_back(static_cast<int32_t>(done[r] + count));
      for (size_t g = 0; g < num_groups; ++g) {
        batch.groups[g].block_table.insert(batch.groups[g].block_table.end(), tables[g][r].begin(),
                                           tables[g][r].end());
      }
    }
    ForwardOutput output;
    const Status status = model.Forward(batch, *store, &output);
    EXPECT_TRUE(status.ok()) << status.ToString();
    if (!status.ok()) return {};
    const std::vector<float>& logits = output.logits;
    for (size_t i = 0; i < in_step.size(); ++i) {
      const int64_t r = in_step[i];
      const int64_t begin = batch.query_start_loc[i], end = batch.query_start_loc[i + 1];
      out[r].insert(out[r].end(), logits.begin() + begin * vocab, logits.begin() + end * vocab);
      done[r] += end - begin;
    }
  }
  return out;
}

std::vector<int32_t> RandomTokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  return tokens;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Request A (30 tokens, longer than every window here) alone in one chunk is the reference;
// then alone in uneven chunks with decode-like single steps, then batched with three other
// requests of different lengths and chunkings on two threads.
void CheckBatchInvariance(CausalLM& model, kv::KvDtype dtype) {
  const int64_t vocab = model.info().vocab_size;
  const Plan a{RandomTokens(30, vocab, 11), {30}};
  const Plan a_chunked{a.tokens, {7, 1, 13, 1, 1, 7}};
  const Plan a_batched{a.tokens, {12, 1, 1, 16}};
  const Plan a_stepwise{a.tokens, std::vector<int64_t>(a.tokens.size(), 1)};  // decode-like, one per step
  const Plan b{RandomTokens(25, vocab, 12), {5, 20}};
  const Plan c{RandomTokens(4, vocab, 13), {1, 1, 1, 1}};
  const Plan d{RandomTokens(40, vocab, 14), {40}};

  ThreadPool::SetGlobalThreads(1);
  const auto alone = RunBatched(model, dtype, {a}, 1);
  const auto b_alone = RunBatched(model, dtype, {b}, 2);
  const auto chunked = RunBatched(model, dtype, {a_chunked}, 3);
  const auto stepwise = RunBatched(model, dtype, {a_stepwise}, 5);
  ThreadPool::SetGlobalThreads(2);
  const auto batched = RunBatched(model, dtype, {b, a_batched, c, d}, 4);
  ThreadPool::SetGlobalThreads(0);
  ASSERT_EQ(alone.size(), 1u);
  ASSERT_EQ(alone[0].size(), a.tokens.size() * vocab);
  EXPECT_TRUE(BitwiseEqual(alone[0], chunked[0])) << "chunked prefill changed request A's logits";
  // Logits of 30 consecutive positions in one step (what verifying drafts asks for) equal 30
  // single-position steps.
  EXPECT_TRUE(BitwiseEqual(alone[0], stepwise[0])) << "multi-position logits differ from single steps";
  ASSERT_EQ(batched.size(), 4u);
  EXPECT_TRUE(BitwiseEqual(alone[0], batched[1])) << "batching changed request A's logits";
  EXPECT_TRUE(BitwiseEqual(b_alone[0], batched[0])) << "batching changed request B's logits";
  // The check can fail: a different prompt gives different logits.
  EXPECT_FALSE(BitwiseEqual(alone[0], std::vector<float>(batched[3].begin(), batched[3].begin() + alone[0].size())));
}

class MuseSparkBatchInvarianceTest : public ::testing::TestWithParam<std::tuple<std::string, kv::KvDtype>> {};

TEST_P(MuseSparkBatchInvarianceTest, AloneChunkedAndBatchedAreBitwiseEqual) {
  const auto& [name, dtype] = GetParam();
  auto model = LoadModel(std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/" + name);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  CheckBatchInvariance(**model, dtype);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MuseSparkBatchInvarianceTest,
                         ::testing::Combine(::testing::Values("tiny_a", "tiny_b"),
                                            ::testing::Values(kv::KvDtype::kF32, kv::KvDtype::kFp8E4M3)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::string(kv::KvDtypeName(std::get<1>(info.param)));
                         });

TEST(DenseDecoderBatchInvarianceTest, AloneChunkedAndBatchedAreBitwiseEqual) {
  test::RandomDenseDecoder random;
  ASSERT_EQ(random.model().KvLayerSpecs()[0].kind, kv::AttentionKind::kSlidingWindow);
  for (kv::KvDtype dtype : {kv::KvDtype::kF32, kv::KvDtype::kF16, kv::KvDtype::kBF16}) {
    SCOPED_TRACE(std::string(kv::KvDtypeName(dtype)));
    CheckBatchInvariance(random.model(), dtype);
  }
}

// The GGUF path (quantized matmuls with per-row 8-bit activations) on the real SmolLM2, when
// scripts/fetch_models.py has fetched it.
TEST(GgufBatchInvarianceTest, SmolLm2AloneChunkedAndBatchedAreBitwiseEqual) {
  const char* cache = std::getenv("EMBER_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  const std::string dir = cache && *cache ? cache : std::string(home ? home : "/") + "/.cache/ember/models";
  const std::string path = dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::ifstream(path).good()) GTEST_SKIP() << path << " not fetched (scripts/fetch_models.py)";
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  CheckBatchInvariance(**model, (*model)->DefaultKvDtype());
}

// Bad input is an error naming the problem, never a crash.
TEST(DenseDecoderBatchInvarianceTest, RejectsBadBatches) {
  test::RandomDenseDecoder random;
  DenseDecoder& model = random.model();
  auto config = kv::PlanKvGroups(model.KvLayerSpecs(), 4, kv::KvDtype::kF32);
  ASSERT_TRUE(config.ok());
  config->num_blocks = 4;
  auto store = KvStore::Create(*config);
  ASSERT_TRUE(store.ok());
  auto make = [&] {
    ForwardBatch b;
    b.token_ids = {1, 2};
    b.positions = {0, 1};
    b.query_start_loc = {0, 2};
    b.seq_lens = {2};
    b.logits_indices = {1};
    for (size_t g = 0; g < config->groups.size(); ++g) b.groups.push_back({{static_cast<int32_t>(1 + g)}, 1, {4 + 4 * static_cast<int64_t>(g), 5 + 4 * static_cast<int64_t>(g)}});
    return b;
  };
  ForwardOutput output;
  ASSERT_TRUE(model.Forward(make(), *store, &output).ok());
  EXPECT_EQ(output.logits.size(), static_cast<size_t>(model.info().vocab_size));
  auto expect_error = [&](ForwardBatch b, const std::string& text) {
    const Status status = model.Forward(b, *store, &output);
    EXPECT_FALSE(status.ok()) << text;
    EXPECT_NE(status.message().find(text), std::string::npos) << status.message();
  };
  ForwardBatch b = make();
  b.token_ids[1] = 97;
  expect_error(b, "outside the vocabulary");
  b = make();
  b.positions[1] = 2;
  expect_error(b, "outside request 0's sequence");
  b = make();
  b.seq_lens[0] = 5000;
  expect_error(b, "context length");
  b = make();
  b.groups[0].block_table[0] = 4;
  expect_error(b, "block id 4");
  b = make();
  b.logits_indices = {2};
  expect_error(b, "logits index 2");
  b = make();
  b.seq_lens[0] = 5;  // one block of 4 cannot hold 5 tokens
  b.positions = {3, 4};
  expect_error(b, "maps only 1 blocks");
  b = make();
  b.hidden_state_layers = {static_cast<int32_t>(model.info().num_layers)};
  expect_error(b, "hidden state layers");
  b = make();
  b.hidden_state_layers = {1, 0};
  expect_error(b, "hidden state layers");
  b = make();
  b.embedding_rows = {2};
  b.input_embeddings.assign(model.info().hidden_size, 0.0f);
  expect_error(b, "embedding rows");
  b = make();
  b.embedding_rows = {1};
  expect_error(b, "input embedding floats");
}

}  // namespace
}  // namespace ember
