// Multimodal inputs through the scheduler: their ranges are checked at admission like token ids,
// the runner receives them with the request, and the prefix cache keys blocks by their content so
// the same placeholders over another image never reuse KV.
#include <gtest/gtest.h>

#include "engine_harness.h"

namespace ember::test {
namespace {

MultiModalFeature Image(int64_t offset, int64_t length, uint64_t content) {
  MultiModalFeature f;
  f.modality = Modality::kImage;
  f.hash = kv::BlockHash{content, ~content};
  f.offset = offset;
  f.length = length;
  auto input = std::make_shared<EncoderInput>();
  input->modality = Modality::kImage;
  f.input = std::move(input);
  return f;
}

RequestInput WithImages(std::vector<MultiModalFeature> images, int64_t prompt_len = 42) {
  RequestInput input;
  input.prompt_token_ids = Prompt(prompt_len, 9);
  input.sampling.max_tokens = 3;
  input.mm_features = std::move(images);
  return input;
}

SchedulerConfig Config() { return FakeModelConfig(4, 64, 128); }

TEST(MultiModalFeatureTest, EmbeddingRowsFollowTheMask) {
  MultiModalFeature video = Image(10, 6, 1);
  EXPECT_EQ(video.num_embeds(), 6);
  EXPECT_EQ(video.EmbedsBefore(13), 3);
  // A video: timestamp text, two frames' rows, a separator, two more rows.
  video.is_embed = {false, true, true, false, true, true};
  EXPECT_EQ(video.num_embeds(), 4);
  EXPECT_EQ(video.EmbedsBefore(10), 0);
  EXPECT_EQ(video.EmbedsBefore(13), 2);
  EXPECT_EQ(video.EmbedsBefore(16), 4);
  EXPECT_FALSE(video.IsEmbed(10));
  EXPECT_TRUE(video.IsEmbed(11));
  EXPECT_FALSE(video.IsEmbed(13));
  EXPECT_FALSE(video.IsEmbed(16));
}

TEST(SchedulerMultiModal, TheRunnerGetsTheFeaturesWithTheRequest) {
  EngineHarness h(Config(), FullOnlyKv(4, 128));
  h.Add(WithImages({Image(8, 12, 1), Image(24, 4, 2)}));
  h.Step();
  const SchedulerOutput& out = h.executor().last_output();
  ASSERT_EQ(out.new_reqs.size(), 1u);
  ASSERT_EQ(out.new_reqs[0].mm_features.size(), 2u);
  EXPECT_EQ(out.new_reqs[0].mm_features[1].offset, 24);
  h.RunToCompletion(50);
  h.ExpectAllReleased();
}

TEST(SchedulerMultiModal, SameImageReusesItsBlocksAnotherImageOnlyThoseBeforeIt) {
  EngineHarness h(Config(), FullOnlyKv(4, 128));
  h.Add(WithImages({Image(8, 12, 1)}));
  h.RunToCompletion(50);
  h.Add(WithImages({Image(8, 12, 1)}));
  h.Step();
  EXPECT_EQ(h.executor().last_output().new_reqs[0].num_computed_tokens, 40);
  h.RunToCompletion(50);
  // Same tokens, another image: the blocks before position 8 are shared, none after.
  h.Add(WithImages({Image(8, 12, 2)}));
  h.Step();
  EXPECT_EQ(h.executor().last_output().new_reqs[0].num_computed_tokens, 8);
  h.RunToCompletion(50);
  // Text alone with the same ids is another prompt too.
  RequestInput text = WithImages({});
  h.Add(std::move(text));
  h.Step();
  EXPECT_EQ(h.executor().last_output().new_reqs[0].num_computed_tokens, 8);
  h.RunToCompletion(50);
  h.ExpectAllReleased();
}

TEST(SchedulerMultiModal, RangesThatDoNotFitThePromptAreRefused) {
  EngineHarness h(Config(), FullOnlyKv(4, 128));
  auto refused = [&](std::vector<MultiModalFeature> features, const char* why) {
    const Status s = h.core().AddRequest(900, WithImages(std::move(features)));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << why;
    EXPECT_NE(s.message().find("does not fit the prompt"), std::string::npos) << why << ": " << s.message();
  };
  refused({Image(40, 5, 1)}, "past the prompt's end");
  refused({Image(-1, 5, 1)}, "before its start");
  refused({Image(8, 0, 1)}, "empty");
  refused({Image(8, 10, 1), Image(12, 4, 2)}, "overlapping");
  refused({Image(20, 4, 1), Image(8, 4, 2)}, "out of order");
  MultiModalFeature no_input = Image(8, 4, 1);
  no_input.input = nullptr;
  refused({no_input}, "nothing to encode");
  MultiModalFeature short_mask = Image(8, 4, 1);
  short_mask.is_embed = {true, false};
  refused({short_mask}, "a mask of the wrong length");
  MultiModalFeature no_rows = Image(8, 2, 1);
  no_rows.is_embed = {false, false};
  refused({no_rows}, "no embedding position");

  RequestInput pulled = WithImages({Image(8, 4, 1)});
  pulled.kv_transfer.do_remote_decode = true;
  const Status s = h.core().AddRequest(901, std::move(pulled));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("kv_transfer_params"), std::string::npos) << s.message();
  EXPECT_FALSE(h.core().HasUnfinished());
}

}  // namespace
}  // namespace ember::test
