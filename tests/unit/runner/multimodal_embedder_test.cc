// The runner's multimodal side: the encoder cache (LRU by bytes, hits and misses) and the
// embedder, which fills each scheduled placeholder position with its feature row, across chunked
// prefill steps and masks, encoding each content hash once.
#include <gtest/gtest.h>

#include "runner/batch_builder.h"
#include "runner/multimodal/embedder.h"
#include "runner/multimodal/encoder_cache.h"

namespace ember {
namespace {

constexpr int64_t kHidden = 3;

// Row r of an input whose data[0] is v: {v, r, -r}; counts its calls.
class FakeEncoder : public MultiModalEncoder {
 public:
  bool Accepts(Modality m) const override { return m != Modality::kAudio; }
  Expected<std::vector<float>> Encode(const EncoderInput& input) const override {
    ++calls;
    if (input.data.empty()) return InvalidArgument("no data");
    const int64_t rows = static_cast<int64_t>(input.data[1]);
    std::vector<float> out;
    for (int64_t r = 0; r < rows; ++r) out.insert(out.end(), {input.data[0], float(r), float(-r)});
    return out;
  }
  int64_t hidden_size() const override { return kHidden; }
  mutable int calls = 0;
};

MultiModalFeature Feature(float value, int64_t offset, int64_t length, std::vector<bool> mask = {}) {
  MultiModalFeature f;
  f.modality = Modality::kImage;
  f.hash = kv::BlockHash{static_cast<uint64_t>(value), 7};
  f.offset = offset;
  f.length = length;
  f.is_embed = std::move(mask);
  auto input = std::make_shared<EncoderInput>();
  input->data = {value, static_cast<float>(f.num_embeds())};
  f.input = std::move(input);
  return f;
}

RunnerRequest Request(RequestIndex id, int64_t prompt_len, int64_t computed, std::vector<MultiModalFeature> features) {
  RunnerRequest r;
  r.req = id;
  r.tokens.assign(prompt_len, 1);
  r.num_prompt_tokens = prompt_len;
  r.num_computed_tokens = computed;
  r.block_ids = {std::vector<kv::BlockId>(8, 1)};
  r.mm_features = std::move(features);
  return r;
}

TEST(EncoderCache, KeepsTheMostRecentWithinItsBudget) {
  EncoderCache cache(/*capacity_bytes=*/3 * 4 * sizeof(float));
  auto rows = [](float v) { return std::make_shared<const std::vector<float>>(4, v); };
  const kv::BlockHash a{1, 0}, b{2, 0}, c{3, 0}, d{4, 0};
  cache.Insert(a, rows(1));
  cache.Insert(b, rows(2));
  cache.Insert(c, rows(3));
  EXPECT_NE(cache.Find(a), nullptr);  // a is now the most recent
  cache.Insert(d, rows(4));           // evicts b
  EXPECT_EQ(cache.Find(b), nullptr);
  ASSERT_NE(cache.Find(c), nullptr);
  EXPECT_EQ((*cache.Find(d))[0], 4.0f);
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_EQ(cache.stats().entries, 3);
  EXPECT_EQ(cache.stats().hits, 3);
  EXPECT_EQ(cache.stats().misses, 1);
  cache.Insert(kv::BlockHash{5, 0}, std::make_shared<const std::vector<float>>(100, 0.0f));  // larger than all
  EXPECT_EQ(cache.Find(kv::BlockHash{5, 0}), nullptr);
  EXPECT_EQ(cache.stats().entries, 3);

  EncoderCache off(0);
  off.Insert(a, rows(1));
  EXPECT_EQ(off.Find(a), nullptr);
}

TEST(MultiModalEmbedder, FillsEachPlaceholderRowOnceAcrossChunksAndRequests) {
  FakeEncoder encoder;
  MultiModalEmbedder embedder(&encoder, 1 << 20);
  // Request 1: an image at [2, 6) and a video at [8, 14) whose positions 10 and 11 are text.
  const MultiModalFeature image = Feature(5, 2, 4);
  const MultiModalFeature video = Feature(9, 8, 6, {true, true, false, false, true, true});
  RunnerRequest r1 = Request(1, 20, 0, {image, video});
  RunnerRequest r2 = Request(2, 10, 0, {Feature(5, 1, 4)});  // the same image content elsewhere
  // Step 1: r1's first 9 positions and r2's whole prompt.
  std::vector<const RunnerRequest*> requests = {&r1, &r2};
  BuiltBatch built = BuildForwardBatch(requests, {9, 10}, {}, 16);
  MultiModalStepStats stats;
  ASSERT_TRUE(embedder.AddEmbeddings(requests, built.batch, stats).ok());
  // r1 rows 2..5 (image rows 0..3), row 8 (video row 0); r2 rows 9 + 1..4 (image rows 0..3).
  EXPECT_EQ(built.batch.embedding_rows, (std::vector<int32_t>{2, 3, 4, 5, 8, 10, 11, 12, 13}));
  ASSERT_EQ(built.batch.input_embeddings.size(), 9u * kHidden);
  EXPECT_EQ(built.batch.input_embeddings[3 * kHidden + 1], 3.0f);  // row 5: image row 3
  EXPECT_EQ(built.batch.input_embeddings[4 * kHidden], 9.0f);      // row 8: the video
  EXPECT_EQ(built.batch.input_embeddings[4 * kHidden + 1], 0.0f);
  EXPECT_EQ(encoder.calls, 2);  // the image once for both requests, the video once
  EXPECT_EQ(stats.items_encoded, 2);
  EXPECT_EQ(stats.cache_hits, 1);
  EXPECT_EQ(stats.embeddings, 9);

  // Step 2: r1's rest (positions 9..19): video rows 1..3 at positions 9, 12, 13.
  r1.num_computed_tokens = 9;
  std::vector<const RunnerRequest*> rest = {&r1};
  built = BuildForwardBatch(rest, {11}, {}, 16);
  MultiModalStepStats stats2;
  ASSERT_TRUE(embedder.AddEmbeddings(rest, built.batch, stats2).ok());
  EXPECT_EQ(built.batch.embedding_rows, (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(built.batch.input_embeddings[0 * kHidden + 1], 1.0f);
  EXPECT_EQ(built.batch.input_embeddings[2 * kHidden + 1], 3.0f);
  EXPECT_EQ(encoder.calls, 2);  // from the cache
  EXPECT_EQ(stats2.cache_hits, 1);
}

TEST(MultiModalEmbedder, RefusesWhatItCannotEncode) {
  FakeEncoder encoder;
  MultiModalEmbedder embedder(&encoder, 1 << 20);
  MultiModalFeature audio = Feature(3, 0, 2);
  audio.modality = Modality::kAudio;
  RunnerRequest r = Request(1, 4, 0, {audio});
  std::vector<const RunnerRequest*> requests = {&r};
  BuiltBatch built = BuildForwardBatch(requests, {4}, {}, 16);
  MultiModalStepStats stats;
  const Status s = embedder.AddEmbeddings(requests, built.batch, stats);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no audio encoder"), std::string::npos) << s.message();

  MultiModalEmbedder text_only(nullptr, 0);
  RunnerRequest image = Request(2, 4, 0, {Feature(3, 0, 2)});
  requests = {&image};
  EXPECT_FALSE(text_only.AddEmbeddings(requests, built.batch, stats).ok());
}

}  // namespace
}  // namespace ember
