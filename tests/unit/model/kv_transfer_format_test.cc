// The KV transfer format (kv/kv_transfer.h) without a forward pass: the header round trip, the
// spans covering the payload in order, coalescing and pairing, and every buffer, store or block
// table the receiver (or the sender) must refuse with an error that names it, before writing a
// byte. kv_transfer_test.cc shows the moved KV decodes bitwise like the original.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/kv_store.h"
#include "kv/kv_transfer.h"
#include "filled_kv_store.h"

namespace ember {
namespace {

using Tables = std::vector<std::vector<int32_t>>;
constexpr int64_t kBlockSize = 4;
constexpr int64_t kTokens = 23;  // 6 entries, the last holding 3 tokens
constexpr int64_t kEntries = 6;

kv::KvCacheConfig Config(kv::KvDtype dtype = kv::KvDtype::kF32, int64_t block_size = kBlockSize) {
  return test::RandomDecoderKvConfig(dtype, block_size, kEntries);
}
Tables ConsecutiveTables(int32_t first) { return test::ConsecutiveKvTables(first, kEntries); }
KvStore FilledStore(const kv::KvCacheConfig& config) { return test::FilledKvStore(config, 5); }

// True while no import has written to an f32 store made by KvStore::Create (all zeros).
bool Untouched(const KvStore& store) {
  const kv::KvCacheConfig& c = store.config();
  const size_t bytes = static_cast<size_t>(store.num_slots() * c.num_kv_heads * c.head_dim) * sizeof(float);
  for (size_t layer = 0; layer < c.group_of_layer.size(); ++layer) {
    const kernels::PagedKvView view = store.View(static_cast<int64_t>(layer));
    for (const void* data : {view.keys, view.values}) {
      const auto* p = static_cast<const uint8_t*>(data);
      if (std::any_of(p, p + bytes, [](uint8_t b) { return b != 0; })) return false;
    }
  }
  return true;
}

template <typename T>
void ExpectError(const Expected<T>& result, StatusCode code, const std::string& text) {
  ASSERT_FALSE(result.ok()) << "expected an error containing '" << text << "'";
  EXPECT_EQ(result.status().code(), code) << result.status().ToString();
  EXPECT_NE(result.status().message().find(text), std::string::npos) << result.status().ToString();
}

TEST(KvTransferFormatTest, HeaderRoundTrips) {
  for (kv::KvDtype dtype : {kv::KvDtype::kF32, kv::KvDtype::kBF16, kv::KvDtype::kFp8E4M3}) {
    const KvStore store = FilledStore(Config(dtype));
    auto exported = store.ExportSpans(ConsecutiveTables(1), kTokens);
    ASSERT_TRUE(exported.ok()) << exported.status().ToString();
    const KvTransferLayout& layout = exported->layout;
    const std::vector<uint8_t> header = SerializeKvLayout(layout);
    auto frame = ParseKvTransferPrefix(header);
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    EXPECT_EQ(frame->header_bytes, static_cast<int64_t>(header.size()));
    EXPECT_EQ(frame->header_bytes % 64, 0);
    EXPECT_EQ(frame->payload_bytes, layout.PayloadBytes());
    EXPECT_EQ(KvTransferBytes(layout), frame->header_bytes + frame->payload_bytes);
    int64_t header_bytes = 0;
    auto parsed = ParseKvLayout(header, &header_bytes);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(header_bytes, frame->header_bytes);
    EXPECT_EQ(parsed->dtype, dtype);
    EXPECT_EQ(parsed->block_size, kBlockSize);
    EXPECT_EQ(parsed->num_kv_heads, layout.num_kv_heads);
    EXPECT_EQ(parsed->head_dim, layout.head_dim);
    EXPECT_EQ(parsed->layers_per_group, layout.layers_per_group);
    EXPECT_EQ(parsed->num_tokens, kTokens);
    ASSERT_EQ(parsed->groups.size(), layout.groups.size());
    for (size_t g = 0; g < layout.groups.size(); ++g) {
      EXPECT_EQ(parsed->groups[g].kind, layout.groups[g].kind);
      EXPECT_EQ(parsed->groups[g].window, layout.groups[g].window);
      EXPECT_EQ(parsed->groups[g].layers, layout.groups[g].layers);
      EXPECT_EQ(parsed->groups[g].present, layout.groups[g].present);
    }
    // Sliding group 1 (window 5): the next query, at 23, reads keys 19..23, entries 4 and 5.
    EXPECT_EQ(layout.groups[0].present, std::vector<uint8_t>(kEntries, 1));
    EXPECT_EQ(layout.groups[1].present, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1}));
    EXPECT_EQ(layout.parts().size(), dtype == kv::KvDtype::kFp8E4M3 ? 4u : 2u);
  }
}

// Spans are the payload in order; with consecutive block ids each (group, layer, part) is one
// contiguous range, so a request becomes groups x layers x parts copies.
TEST(KvTransferFormatTest, SpansCoverThePayloadAndCoalescePerLayerAndPart) {
  const kv::KvCacheConfig config = Config(kv::KvDtype::kFp8E4M3);
  const KvStore source = FilledStore(config);
  auto bytes = source.Export(ConsecutiveTables(1), kTokens);
  auto exported = source.ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(bytes.ok() && exported.ok());
  const int64_t header = static_cast<int64_t>(SerializeKvLayout(exported->layout).size());
  int64_t offset = 0;
  for (const KvSourceSpan& s : exported->spans) {
    ASSERT_EQ(s.offset, offset);
    EXPECT_EQ(std::memcmp(bytes->data() + header + offset, s.bytes.data(), s.bytes.size()), 0);
    offset += static_cast<int64_t>(s.bytes.size());
  }
  EXPECT_EQ(offset, exported->layout.PayloadBytes());
  EXPECT_EQ(header + offset, static_cast<int64_t>(bytes->size()));

  const size_t runs = 2 * 2 * 4;  // groups x layers x parts (K, V, K scales, V scales)
  const auto source_runs = CoalesceKvSpans<const uint8_t>(exported->spans);
  EXPECT_EQ(source_runs.size(), runs);
  auto dest = KvStore::Create(config);
  ASSERT_TRUE(dest.ok());
  auto dest_spans = dest->ImportSpans(exported->layout, ConsecutiveTables(3));
  ASSERT_TRUE(dest_spans.ok()) << dest_spans.status().ToString();
  const auto dest_runs = CoalesceKvSpans<uint8_t>(*dest_spans);
  EXPECT_EQ(dest_runs.size(), runs);
  auto copies = PairKvSpans(source_runs, dest_runs);
  ASSERT_TRUE(copies.ok());
  EXPECT_EQ(copies->size(), runs);
  // Uncoalesced on one side: the copies split at that side's span boundaries.
  auto split = PairKvSpans(exported->spans, dest_runs);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->size(), exported->spans.size());
  // Shuffled block ids do not coalesce.
  Tables shuffled = ConsecutiveTables(1);
  std::reverse(shuffled[1].begin(), shuffled[1].end());
  auto scattered = source.ExportSpans(shuffled, kTokens);
  ASSERT_TRUE(scattered.ok());
  EXPECT_GT(CoalesceKvSpans<const uint8_t>(scattered->spans).size(), runs);
  // Spans of different totals cannot be paired.
  ExpectError(PairKvSpans(std::span(exported->spans).first(3), dest_runs), StatusCode::kInvalidArgument,
              "the destination spans");
}

TEST(KvTransferFormatTest, RefusesStoresThatDoNotMatch) {
  const kv::KvCacheConfig config = Config();
  auto bytes = FilledStore(config).Export(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(bytes.ok());
  struct Case {
    std::string error;  // what the message must say
    kv::KvCacheConfig config;
  };
  std::vector<Case> cases;
  cases.push_back({"the export has KV dtype f32 but this KV store has bf16", Config(kv::KvDtype::kBF16)});
  cases.push_back({"KV dtype f32 but this KV store has fp8", Config(kv::KvDtype::kFp8E4M3)});
  cases.push_back({"block size 4 but this KV store has 8", Config(kv::KvDtype::kF32, 8)});
  cases.push_back({"KV heads 2 but this KV store has 3", config});
  cases.back().config.num_kv_heads = 3;
  cases.push_back({"head_dim 12 but this KV store has 16", config});
  cases.back().config.head_dim = 16;
  cases.push_back({"layers per group 2 but this KV store has 3", config});
  cases.back().config.layers_per_group = 3;
  cases.push_back({"KV groups 2 but this KV store has 3", config});
  cases.back().config.groups.push_back(config.groups[1]);
  cases.push_back({"in group 1 sliding window 5 but this KV store has sliding window 6", config});
  cases.back().config.groups[1].window = 6;
  cases.push_back({"in group 0 layers [1, 3] but this KV store has [3, 1]", config});
  std::swap(cases.back().config.groups[0].layers[0], cases.back().config.groups[0].layers[1]);
  cases.push_back({"in group 0 full attention but this KV store has sliding window 5", config});
  cases.back().config.groups[0].kind = kv::AttentionKind::kSlidingWindow;
  cases.back().config.groups[0].window = 5;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error);
    auto dest = KvStore::Create(c.config);
    ASSERT_TRUE(dest.ok()) << dest.status().ToString();
    ExpectError(dest->Import(*bytes, ConsecutiveTables(1)), StatusCode::kInvalidArgument, c.error);
  }
}

TEST(KvTransferFormatTest, RefusesTruncatedAndCorruptBuffers) {
  const kv::KvCacheConfig config = Config();
  auto exported = FilledStore(config).Export(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(exported.ok());
  const std::vector<uint8_t>& good = *exported;
  auto dest = KvStore::Create(config);
  ASSERT_TRUE(dest.ok());
  int64_t header = 0;
  ASSERT_TRUE(ParseKvLayout(good, &header).ok());
  auto import = [&](std::vector<uint8_t> bytes) { return dest->Import(bytes, ConsecutiveTables(1)); };
  auto patched = [&](size_t at, auto value) {
    std::vector<uint8_t> bytes = good;
    std::memcpy(bytes.data() + at, &value, sizeof(value));
    return bytes;
  };
  ExpectError(import({}), StatusCode::kDataLoss, "prefix");
  ExpectError(import({good.begin(), good.begin() + 10}), StatusCode::kDataLoss, "prefix");
  ExpectError(import({good.begin(), good.begin() + header - 1}), StatusCode::kDataLoss,
              "the header is 192 bytes, the buffer 191");
  ExpectError(import({good.begin(), good.end() - 1}), StatusCode::kDataLoss, "truncated");
  ExpectError(import({good.begin(), good.begin() + header + 7}), StatusCode::kDataLoss, "truncated");
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  ExpectError(import(longer), StatusCode::kInvalidArgument, "1 bytes follow");
  ExpectError(import(patched(0, uint8_t{'G'})), StatusCode::kInvalidArgument, "EMKV");
  ExpectError(import(patched(4, uint32_t{2})), StatusCode::kUnimplemented, "version 2");
  ExpectError(import(patched(8, uint64_t{100})), StatusCode::kDataLoss, "prefix is corrupt");
  ExpectError(import(patched(16, static_cast<uint64_t>(good.size() - header + 1))), StatusCode::kDataLoss,
              "prefix says");
  ExpectError(import(patched(24, uint32_t{9})), StatusCode::kDataLoss, "unknown KV dtype code 9");
  ExpectError(import(patched(28, uint32_t{0})), StatusCode::kDataLoss, "group count is 0");
  ExpectError(import(patched(28, uint32_t{3})), StatusCode::kDataLoss, "group 2 has 0 layers");
  ExpectError(import(patched(32, int64_t{0})), StatusCode::kDataLoss, "block size is 0");
  ExpectError(import(patched(64, int64_t{0})), StatusCode::kDataLoss, "the token count is 0");
  // The prefix states a header shorter or longer than its fields.
  ExpectError(import(patched(8, uint64_t{64})), StatusCode::kDataLoss,
              "the token count needs bytes [64, 72) but the header ends at byte 64");
  ExpectError(import(patched(8, uint64_t{256})), StatusCode::kDataLoss,
              "fields end at byte 132, but the prefix says the header is 256 bytes");
  ExpectError(import(patched(72, uint32_t{7})), StatusCode::kDataLoss, "unknown attention kind 7");
  EXPECT_TRUE(Untouched(*dest));
  ASSERT_TRUE(import(good).ok());
  EXPECT_FALSE(Untouched(*dest));
}

TEST(KvTransferFormatTest, RefusesBadDestinationTables) {
  const kv::KvCacheConfig config = Config();
  auto exported = FilledStore(config).ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(exported.ok());
  auto dest = KvStore::Create(config);
  ASSERT_TRUE(dest.ok());
  auto spans = [&](const Tables& tables) { return dest->ImportSpans(exported->layout, tables); };
  Tables tables = ConsecutiveTables(1);
  tables[1][0] = tables[1][1] = kv::kNullBlock;  // released by the sliding window: never written
  EXPECT_TRUE(spans(tables).ok());
  ExpectError(spans({tables[0]}), StatusCode::kInvalidArgument, "1 block tables for 2 KV groups");
  Tables bad = tables;
  bad[0][2] = kv::kNullBlock;
  ExpectError(spans(bad), StatusCode::kInvalidArgument, "group 0 entry 2 (positions [8, 12)) is block 0");
  bad = tables;
  bad[1][5] = 999;
  ExpectError(spans(bad), StatusCode::kInvalidArgument, "group 1 entry 5 (positions [20, 24)) is block 999");
  bad = tables;
  bad[0][0] = bad[1][4];
  ExpectError(spans(bad), StatusCode::kInvalidArgument, "appears twice");
  bad = tables;
  bad[0].resize(3);
  ExpectError(spans(bad), StatusCode::kInvalidArgument, "group 0's block table has 3 entries");
  KvTransferLayout missing = exported->layout;
  missing.groups[1].present[4] = 0;
  ExpectError(dest->ImportSpans(missing, tables), StatusCode::kInvalidArgument,
              "lacks group 1 entry 4 (positions [16, 20))");
  KvTransferLayout short_flags = exported->layout;
  short_flags.groups[0].present.pop_back();
  ExpectError(dest->ImportSpans(short_flags, tables), StatusCode::kInvalidArgument,
              "group 0 has 5 present flags for 6 entries");
  EXPECT_TRUE(Untouched(*dest));
}

TEST(KvTransferFormatTest, ExportChecksTheBlockTablesItReads) {
  const KvStore store = FilledStore(Config());
  Tables tables = ConsecutiveTables(1);
  // A sliding group's entries behind the window are not read: stale or released ids are fine.
  tables[1][0] = 999;
  tables[1][1] = kv::kNullBlock;
  EXPECT_TRUE(store.ExportSpans(tables, kTokens).ok());
  ExpectError(store.ExportSpans(Tables{tables[0]}, kTokens), StatusCode::kInvalidArgument, "1 block tables for 2");
  ExpectError(store.ExportSpans(tables, 0), StatusCode::kInvalidArgument, "0 tokens");
  Tables bad = tables;
  bad[0][0] = kv::kNullBlock;
  ExpectError(store.ExportSpans(bad, kTokens), StatusCode::kInvalidArgument,
              "group 0 entry 0 (positions [0, 4)) is block 0");
  bad = tables;
  bad[1][4] = -1;
  ExpectError(store.ExportSpans(bad, kTokens), StatusCode::kInvalidArgument,
              "group 1 entry 4 (positions [16, 20)) is block -1");
  bad = tables;
  bad[0].resize(5);
  ExpectError(store.ExportSpans(bad, kTokens), StatusCode::kInvalidArgument, "has 5 entries; 23 tokens need 6");
  auto exported = store.ExportSpans(tables, kTokens);
  ASSERT_TRUE(exported.ok());
  std::vector<uint8_t> small(KvTransferBytes(exported->layout) - 1);
  EXPECT_FALSE(WriteKvTransfer(*exported, small).ok());
}

// What a consumer that holds a prefix (its prefix-cache hit) asks for: the entries from there on,
// and where they land; the producer cuts them from its whole export without the block tables.
TEST(KvTransferFormatTest, ExportAfterAHeldPrefixSkipsItsEntries) {
  const kv::KvCacheConfig config = Config();
  const KvStore source = FilledStore(config);
  auto all = source.ExportSpans(ConsecutiveTables(1), kTokens);
  ASSERT_TRUE(all.ok());
  for (int64_t first_token : {kBlockSize, 2 * kBlockSize, 5 * kBlockSize}) {
    SCOPED_TRACE(first_token);
    auto part = source.ExportSpans(ConsecutiveTables(1), kTokens, first_token);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    const KvExportSpans cut = WithoutLeadingEntries(*all, first_token);
    EXPECT_EQ(SerializeKvLayout(cut.layout), SerializeKvLayout(part->layout));
    ASSERT_EQ(cut.spans.size(), part->spans.size());
    for (size_t i = 0; i < cut.spans.size(); ++i) {
      EXPECT_EQ(cut.spans[i].offset, part->spans[i].offset);
      EXPECT_EQ(cut.spans[i].bytes.data(), part->spans[i].bytes.data());
      EXPECT_EQ(cut.spans[i].bytes.size(), part->spans[i].bytes.size());
    }
    EXPECT_LT(part->layout.PayloadBytes(), all->layout.PayloadBytes());
    for (const KvTransferLayout::Group& group : part->layout.groups) {
      for (int64_t j = 0; j < first_token / kBlockSize; ++j) EXPECT_EQ(group.present[j], 0) << j;
    }
    // The receiver's own spans: the same layout, its blocks; copying fills exactly those entries.
    auto dest = KvStore::Create(config);
    ASSERT_TRUE(dest.ok());
    auto into = dest->ImportSpansFor(ConsecutiveTables(3), kTokens, first_token);
    ASSERT_TRUE(into.ok()) << into.status().ToString();
    EXPECT_EQ(SerializeKvLayout(into->layout), SerializeKvLayout(part->layout));
    auto copies = PairKvSpans(part->spans, into->spans);
    ASSERT_TRUE(copies.ok());
    for (const KvCopy& c : *copies) std::memcpy(c.dst, c.src, c.bytes);
    auto moved = dest->ExportSpans(ConsecutiveTables(3), kTokens, first_token);
    ASSERT_TRUE(moved.ok());
    for (size_t i = 0; i < moved->spans.size(); ++i) {
      EXPECT_EQ(std::memcmp(moved->spans[i].bytes.data(), part->spans[i].bytes.data(), part->spans[i].bytes.size()), 0);
    }
  }
  ExpectError(source.ExportSpans(ConsecutiveTables(1), kTokens, 3), StatusCode::kInvalidArgument, "multiple of the block size");
  ExpectError(source.ExportSpans(ConsecutiveTables(1), kTokens, 6 * kBlockSize), StatusCode::kInvalidArgument,
              "held tokens");
  auto dest = KvStore::Create(config);
  ASSERT_TRUE(dest.ok());
  Tables repeated = ConsecutiveTables(3);
  repeated[1][5] = repeated[0][5];
  ExpectError(dest->ImportSpansFor(repeated, kTokens, 0), StatusCode::kInvalidArgument, "appears twice");
}

// The handshake's layout: the config and no data; another block size or dtype is refused.
TEST(KvTransferFormatTest, ConfigLayoutRoundTripsAndRefusesAnotherConfig) {
  const kv::KvCacheConfig config = Config();
  const std::vector<uint8_t> bytes = SerializeKvLayout(KvLayoutOfConfig(config));
  int64_t header = 0;
  auto parsed = ParseKvLayout(bytes, &header);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->PayloadBytes(), 0);
  EXPECT_TRUE(CheckKvLayoutMatches(*parsed, config).ok());
  EXPECT_NE(CheckKvLayoutMatches(*parsed, Config(kv::KvDtype::kF32, 8)).message().find("block size"), std::string::npos);
  EXPECT_NE(CheckKvLayoutMatches(*parsed, Config(kv::KvDtype::kBF16)).message().find("KV dtype"), std::string::npos);
}

}  // namespace
}  // namespace ember
