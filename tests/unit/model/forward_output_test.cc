// The richer forward contract: hidden states after chosen layers and input embeddings in place
// of token ids. Both ride on the same bitwise invariance as the logits: asking for hidden states
// changes no logit, a request's hidden states do not depend on how its prompt is split into
// steps, and an embedding equal to the token's own gives the token's results bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "random_dense_decoder.h"
#include "support/source_dir.h"

namespace ember {
namespace {

bool BitwiseEqual(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// One request over a fresh f32 KV store, its tokens in steps of `chunks`; every position's
// logits, and per step the hidden states of `layers`, are appended to the result.
struct RequestRun {
  std::vector<float> logits;                      // [tokens, vocab]
  std::vector<std::vector<float>> hidden_states;  // [layer][tokens * hidden]
};

RequestRun RunRequest(CausalLM& model, const std::vector<int32_t>& tokens, const std::vector<int64_t>& chunks,
               const std::vector<int32_t>& layers, const std::vector<int32_t>& embedding_rows = {},
               const std::vector<float>& embeddings = {}) {
  constexpr int64_t kBlockSize = 4;
  auto config = kv::PlanKvGroups(model.KvLayerSpecs(), kBlockSize, kv::KvDtype::kF32);
  EXPECT_TRUE(config.ok());
  const int64_t blocks = (static_cast<int64_t>(tokens.size()) + kBlockSize - 1) / kBlockSize;
  config->num_blocks = 1 + blocks * static_cast<int64_t>(config->groups.size());
  auto store = KvStore::Create(*config);
  EXPECT_TRUE(store.ok());
  const int64_t hidden = model.info().hidden_size;
  RequestRun run;
  run.hidden_states.resize(layers.size());
  int64_t done = 0;
  for (int64_t count : chunks) {
    ForwardBatch batch;
    batch.query_start_loc = {0, static_cast<int32_t>(count)};
    batch.seq_lens = {static_cast<int32_t>(done + count)};
    batch.hidden_state_layers = layers;
    batch.groups.resize(config->groups.size());
    for (size_t g = 0; g < batch.groups.size(); ++g) {
      KvGroupTable& table = batch.groups[g];
      table.max_blocks_per_req = static_cast<int32_t>(blocks);
      for (int64_t j = 0; j < blocks; ++j) table.block_table.push_back(static_cast<int32_t>(1 + g * blocks + j));
    }
    for (int64_t i = 0; i < count; ++i) {
      const int64_t position = done + i;
      batch.token_ids.push_back(tokens[position]);
      batch.positions.push_back(static_cast<int32_t>(position));
      batch.logits_indices.push_back(static_cast<int32_t>(i));
      for (KvGroupTable& table : batch.groups) {
        table.slot_mapping.push_back(int64_t{table.block_table[position / kBlockSize]} * kBlockSize +
                                     position % kBlockSize);
      }
      for (size_t e = 0; e < embedding_rows.size(); ++e) {
        if (embedding_rows[e] != position) continue;
        batch.embedding_rows.push_back(static_cast<int32_t>(i));
        batch.input_embeddings.insert(batch.input_embeddings.end(), embeddings.begin() + e * hidden,
                                      embeddings.begin() + (e + 1) * hidden);
      }
    }
    ForwardOutput out;
    const Status status = model.Forward(batch, *store, &out);
    EXPECT_TRUE(status.ok()) << status.ToString();
    run.logits.insert(run.logits.end(), out.logits.begin(), out.logits.end());
    EXPECT_EQ(out.hidden_states.size(), layers.size() * count * hidden);
    for (size_t l = 0; l < layers.size(); ++l) {
      run.hidden_states[l].insert(run.hidden_states[l].end(), out.hidden_states.begin() + l * count * hidden,
                                  out.hidden_states.begin() + (l + 1) * count * hidden);
    }
    done += count;
  }
  return run;
}

std::vector<int32_t> Tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((3 + i * 7919) % vocab);
  return t;
}

void CheckHiddenStates(CausalLM& model) {
  const int64_t layers = model.info().num_layers;
  ASSERT_GE(layers, 2);
  const std::vector<int32_t> wanted = {0, static_cast<int32_t>(layers / 2), static_cast<int32_t>(layers - 1)};
  const std::vector<int32_t> tokens = Tokens(12, model.info().vocab_size);
  const RequestRun plain = RunRequest(model, tokens, {12}, {});
  const RequestRun tapped = RunRequest(model, tokens, {12}, wanted);
  const RequestRun chunked = RunRequest(model, tokens, {5, 1, 6}, wanted);
  ASSERT_EQ(plain.logits.size(), tapped.logits.size());
  EXPECT_TRUE(BitwiseEqual(plain.logits.data(), tapped.logits.data(), plain.logits.size()))
      << "asking for hidden states changed the logits";
  const size_t floats = tokens.size() * model.info().hidden_size;
  for (size_t l = 0; l < wanted.size(); ++l) {
    ASSERT_EQ(tapped.hidden_states[l].size(), floats);
    EXPECT_TRUE(BitwiseEqual(tapped.hidden_states[l].data(), chunked.hidden_states[l].data(), floats))
        << "layer " << wanted[l] << ": hidden states depend on the chunking";
  }
  // Different layers hold different states (the tap is not copying one buffer three times).
  EXPECT_FALSE(BitwiseEqual(tapped.hidden_states[0].data(), tapped.hidden_states[2].data(), floats));
}

TEST(ForwardOutputTest, DenseHiddenStatesLeaveLogitsAloneAndIgnoreChunking) {
  test::RandomDenseDecoder random;
  CheckHiddenStates(random.model());
}

TEST(ForwardOutputTest, MuseSparkHiddenStatesLeaveLogitsAloneAndIgnoreChunking) {
  auto model = LoadModel(std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  CheckHiddenStates(**model);
}

TEST(ForwardOutputTest, AGivenEmbeddingEqualToTheTokensGivesItsResults) {
  test::RandomDenseDecoder random;
  DenseDecoder& model = random.model();
  const int64_t hidden = model.info().hidden_size;
  const std::vector<int32_t> tokens = Tokens(10, model.info().vocab_size);
  const std::vector<int32_t> rows = {2, 3, 7};
  // What transformers' scaled embedding module gives for those tokens: the table row times sqrt(hidden).
  std::vector<float> embeddings(rows.size() * hidden);
  for (size_t e = 0; e < rows.size(); ++e) {
    ASSERT_TRUE(random.embed_tokens().ReadRow(tokens[rows[e]], embeddings.data() + e * hidden).ok());
    for (int64_t j = 0; j < hidden; ++j) embeddings[e * hidden + j] *= random.embed_scale();
  }
  const RequestRun by_id = RunRequest(model, tokens, {6, 4}, {1});
  const RequestRun given = RunRequest(model, tokens, {6, 4}, {1}, rows, embeddings);
  EXPECT_TRUE(BitwiseEqual(by_id.logits.data(), given.logits.data(), by_id.logits.size()));
  EXPECT_TRUE(BitwiseEqual(by_id.hidden_states[0].data(), given.hidden_states[0].data(), by_id.hidden_states[0].size()));
  // And the embedding is really used: another one moves the logits from that row on.
  embeddings[hidden + 5] += 1.0f;
  const RequestRun moved = RunRequest(model, tokens, {6, 4}, {}, rows, embeddings);
  const int64_t vocab = model.info().vocab_size;
  EXPECT_TRUE(BitwiseEqual(by_id.logits.data(), moved.logits.data(), 3 * vocab));  // rows 0..2 unchanged
  EXPECT_FALSE(BitwiseEqual(by_id.logits.data() + 3 * vocab, moved.logits.data() + 3 * vocab, vocab));
}

}  // namespace
}  // namespace ember
