// KvStore export/import (kv/kv_transfer.h): a request prefilled on one store and moved into
// other block ids of a fresh store decodes to logits bitwise equal to decoding on the original
// (ember is batch invariant, so any lost or misplaced byte shows), for f32, bf16 and fp8 KV, on a
// random Gemma-shaped decoder and the Muse Spark golden model (sliding-window and full groups);
// the format's spans, coalescing and pairing; and every mismatch the receiver must refuse.
#include "kv/kv_transfer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "model/kv_store.h"
#include "random_dense_decoder.h"
#include "support/source_dir.h"

namespace ember {
namespace {

using Tables = std::vector<std::vector<int32_t>>;  // [group][entry]
constexpr int64_t kBlockSize = 4;

// Runs positions [start, start + count) of one request as one step; returns every row's logits.
std::vector<float> Step(CausalLM& model, KvStore& store, const Tables& tables, const std::vector<int32_t>& tokens,
                        int64_t start, int64_t count) {
  ForwardBatch batch;
  batch.token_ids.assign(tokens.begin() + start, tokens.begin() + start + count);
  for (int64_t p = start; p < start + count; ++p) {
    batch.positions.push_back(static_cast<int32_t>(p));
    batch.logits_indices.push_back(static_cast<int32_t>(p - start));
  }
  batch.query_start_loc = {0, static_cast<int32_t>(count)};
  batch.seq_lens = {static_cast<int32_t>(start + count)};
  for (const std::vector<int32_t>& table : tables) {
    KvGroupTable& group = batch.groups.emplace_back();
    group.block_table = table;
    group.max_blocks_per_req = static_cast<int32_t>(table.size());
    for (int64_t p = start; p < start + count; ++p) {
      group.slot_mapping.push_back(int64_t{table[p / kBlockSize]} * kBlockSize + p % kBlockSize);
    }
  }
  ForwardOutput output;
  const Status status = model.Forward(batch, store, &output);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return output.logits;
}

// Each group's `entries` entries get distinct shuffled ids of a store of `num_blocks` blocks.
Tables ShuffledTables(size_t groups, int64_t entries, int64_t num_blocks, uint32_t seed) {
  std::vector<int32_t> ids(num_blocks - 1);
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  Tables tables(groups);
  size_t next = 0;
  for (auto& table : tables) {
    for (int64_t j = 0; j < entries; ++j) table.push_back(ids[next++]);
  }
  return tables;
}

// What the receiving KV manager gives a request admitted with `num_tokens` computed tokens: no
// blocks (kNullBlock) where a sliding window already left them behind.
void NullSkippedEntries(const kv::KvCacheConfig& config, int64_t num_tokens, Tables* tables) {
  for (size_t g = 0; g < config.groups.size(); ++g) {
    if (config.groups[g].kind != kv::AttentionKind::kSlidingWindow) continue;
    const int64_t skipped = kv::SlidingWindowSkippedBlocks(config.groups[g].window, kBlockSize, num_tokens);
    std::fill((*tables)[g].begin(), (*tables)[g].begin() + skipped, kv::kNullBlock);
  }
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int32_t> RandomTokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  return tokens;
}

// Prefills `prompt` tokens in two chunks on a source store, moves them into a fresh store under
// other block ids twice (one serialized buffer, and zero-copy spans paired into copies), and
// decodes `decode` more tokens one by one on all three: the logits must agree bit for bit.
void CheckTransferIsLossless(CausalLM& model, kv::KvDtype dtype, int64_t prompt, int64_t decode) {
  auto planned = kv::PlanKvGroups(model.KvLayerSpecs(), kBlockSize, dtype);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  kv::KvCacheConfig config = *planned;
  const size_t groups = config.groups.size();
  ASSERT_TRUE(std::any_of(config.groups.begin(), config.groups.end(),
                          [](const auto& g) { return g.kind == kv::AttentionKind::kSlidingWindow; }));
  const int64_t entries = (prompt + decode + kBlockSize - 1) / kBlockSize;
  config.num_blocks = 1 + static_cast<int64_t>(groups) * entries + 3;
  auto source = KvStore::Create(config);
  config.num_blocks += 8;  // the receiver's pool is another size, its ids others
  auto wire_dest = KvStore::Create(config);
  auto span_dest = KvStore::Create(config);
  auto untouched = KvStore::Create(config);
  ASSERT_TRUE(source.ok() && wire_dest.ok() && span_dest.ok() && untouched.ok());
  const Tables source_tables = ShuffledTables(groups, entries, source->config().num_blocks, 1);
  Tables dest_tables = ShuffledTables(groups, entries, config.num_blocks, 2);
  NullSkippedEntries(config, prompt, &dest_tables);

  const std::vector<int32_t> tokens = RandomTokens(prompt + decode, model.info().vocab_size, 3);
  Step(model, *source, source_tables, tokens, 0, prompt / 2);
  Step(model, *source, source_tables, tokens, prompt / 2, prompt - prompt / 2);

  auto bytes = source->Export(source_tables, prompt);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto imported = wire_dest->Import(*bytes, dest_tables);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->num_tokens, prompt);

  // Full groups send every entry, sliding groups only those their window still reaches.
  int64_t rows = 0;
  for (size_t g = 0; g < groups; ++g) {
    const kv::KvCacheGroupSpec& spec = config.groups[g];
    const int64_t first =
        spec.kind == kv::AttentionKind::kFull ? 0 : kv::SlidingWindowSkippedBlocks(spec.window, kBlockSize, prompt);
    EXPECT_EQ(std::count(imported->groups[g].present.begin(), imported->groups[g].present.end(), 1),
              (prompt + kBlockSize - 1) / kBlockSize - first)
        << "group " << g;
    rows += static_cast<int64_t>(spec.layers.size()) * (prompt - first * kBlockSize);
  }
  const int64_t row_bytes = kv::KvBytesPerTokenPerLayer(dtype, config.num_kv_heads, config.head_dim);
  EXPECT_EQ(imported->PayloadBytes(), rows * row_bytes);

  auto exported = source->ExportSpans(source_tables, prompt);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  auto dest_spans = span_dest->ImportSpans(exported->layout, dest_tables);
  ASSERT_TRUE(dest_spans.ok()) << dest_spans.status().ToString();
  auto copies = PairKvSpans(exported->spans, *dest_spans);
  ASSERT_TRUE(copies.ok()) << copies.status().ToString();
  for (const KvCopy& copy : *copies) std::memcpy(copy.dst, copy.src, copy.bytes);

  for (int64_t p = prompt; p < prompt + decode; ++p) {
    SCOPED_TRACE("position " + std::to_string(p));
    const std::vector<float> expected = Step(model, *source, source_tables, tokens, p, 1);
    EXPECT_TRUE(BitwiseEqual(expected, Step(model, *wire_dest, dest_tables, tokens, p, 1)));
    EXPECT_TRUE(BitwiseEqual(expected, Step(model, *span_dest, dest_tables, tokens, p, 1)));
    // The check can fail: the same tables without the imported KV decode to other logits.
    if (p == prompt) {
      EXPECT_FALSE(BitwiseEqual(expected, Step(model, *untouched, dest_tables, tokens, p, 1)));
    }
  }
}

class DenseKvTransferTest : public ::testing::TestWithParam<kv::KvDtype> {};

TEST_P(DenseKvTransferTest, ImportedKvDecodesBitwiseLikeTheSource) {
  test::RandomDenseDecoder random;
  CheckTransferIsLossless(random.model(), GetParam(), /*prompt=*/23, /*decode=*/6);
}

class MuseSparkKvTransferTest : public ::testing::TestWithParam<kv::KvDtype> {};

TEST_P(MuseSparkKvTransferTest, ImportedKvDecodesBitwiseLikeTheSource) {
  auto model = LoadModel(std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  CheckTransferIsLossless(**model, GetParam(), /*prompt=*/23, /*decode=*/5);
}

auto DtypeName = [](const auto& info) { return std::string(kv::KvDtypeName(info.param)); };
INSTANTIATE_TEST_SUITE_P(KvDtypes, DenseKvTransferTest,
                         ::testing::Values(kv::KvDtype::kF32, kv::KvDtype::kF16, kv::KvDtype::kBF16,
                                           kv::KvDtype::kFp8E4M3),
                         DtypeName);
INSTANTIATE_TEST_SUITE_P(KvDtypes, MuseSparkKvTransferTest,
                         ::testing::Values(kv::KvDtype::kF32, kv::KvDtype::kBF16, kv::KvDtype::kFp8E4M3), DtypeName);

}  // namespace
}  // namespace ember
