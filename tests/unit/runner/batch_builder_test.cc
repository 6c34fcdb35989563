#include "runner/batch_builder.h"

#include <gtest/gtest.h>

#include "runner/request_state.h"

namespace ember {
namespace {

NewRequestData NewRequest(RequestIndex req, std::vector<int32_t> prompt, std::vector<std::vector<kv::BlockId>> blocks,
                          int64_t computed) {
  NewRequestData n;
  n.req = req;
  n.prompt_token_ids = std::move(prompt);
  n.block_ids.per_group = std::move(blocks);
  n.num_computed_tokens = computed;
  return n;
}

TEST(RequestStatesTest, AppliesNewCachedFinishedAndPreempted) {
  RequestStates states(2);
  SchedulerOutput step1;
  step1.new_reqs.push_back(NewRequest(7, {1, 2, 3}, {{4}, {5}}, 0));
  step1.new_reqs.push_back(NewRequest(8, {9}, {{6}, {7}}, 0));
  step1.scheduled_reqs = {7, 8};
  ASSERT_TRUE(states.Apply(step1).ok());
  ASSERT_EQ(states.size(), 2u);

  SchedulerOutput step2;
  CachedRequestData c;
  c.req = 7;
  c.new_block_ids.per_group = {{10}, {}};
  c.num_computed_tokens = 3;
  step2.cached_reqs.push_back(c);
  step2.preempted_reqs = {8};
  step2.scheduled_reqs = {7};
  ASSERT_TRUE(states.Apply(step2).ok());
  EXPECT_EQ(states.size(), 1u);
  const RunnerRequest* r = states.Find(7);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->block_ids[0], (std::vector<kv::BlockId>{4, 10}));
  EXPECT_EQ(r->block_ids[1], (std::vector<kv::BlockId>{5}));
  EXPECT_EQ(r->num_computed_tokens, 3);

  SchedulerOutput step3;
  step3.finished_reqs = {7};
  ASSERT_TRUE(states.Apply(step3).ok());
  EXPECT_EQ(states.size(), 0u);
}

TEST(RequestStatesTest, ContractViolationsAreErrorsNotCrashes) {
  RequestStates states(2);
  SchedulerOutput unknown;
  CachedRequestData c;
  c.req = 3;
  c.new_block_ids.per_group = {{}, {}};
  unknown.cached_reqs.push_back(c);
  EXPECT_FALSE(states.Apply(unknown).ok());

  SchedulerOutput wrong_groups;
  wrong_groups.new_reqs.push_back(NewRequest(1, {1}, {{1}}, 0));
  EXPECT_FALSE(states.Apply(wrong_groups).ok());

  SchedulerOutput unscheduled;
  unscheduled.scheduled_reqs = {42};
  EXPECT_FALSE(states.Apply(unscheduled).ok());
}

TEST(BatchBuilderTest, RaggedPrefillAndDecodeRows) {
  // Block size 4. Request A: 6-token prompt, first chunk of 4. Request B: decoding its 10th token.
  RunnerRequest a;
  a.tokens = {11, 12, 13, 14, 15, 16};
  a.num_prompt_tokens = 6;
  a.block_ids = {{3, 9}, {5, 2}};
  a.num_computed_tokens = 0;
  RunnerRequest b;
  b.tokens = {21, 22, 23, 24, 25, 26, 27, 28, 29};
  b.num_prompt_tokens = 9;
  b.tokens.insert(b.tokens.end(), {30});
  b.block_ids = {{1, 4, 6}, {kv::kNullBlock, 7, 8}};
  b.num_computed_tokens = 9;
  const BuiltBatch built = BuildForwardBatch({&a, &b}, {4, 1}, {}, 4);
  const ForwardBatch& fb = built.batch;
  EXPECT_EQ(fb.token_ids, (std::vector<int32_t>{11, 12, 13, 14, 30}));
  EXPECT_EQ(fb.positions, (std::vector<int32_t>{0, 1, 2, 3, 9}));
  EXPECT_EQ(fb.query_start_loc, (std::vector<int32_t>{0, 4, 5}));
  EXPECT_EQ(fb.seq_lens, (std::vector<int32_t>{4, 10}));
  ASSERT_EQ(fb.groups.size(), 2u);
  EXPECT_EQ(fb.groups[0].max_blocks_per_req, 3);
  EXPECT_EQ(fb.groups[0].block_table, (std::vector<int32_t>{3, 9, kv::kNullBlock, 1, 4, 6}));
  EXPECT_EQ(fb.groups[0].slot_mapping, (std::vector<int64_t>{12, 13, 14, 15, 6 * 4 + 1}));
  EXPECT_EQ(fb.groups[1].slot_mapping, (std::vector<int64_t>{20, 21, 22, 23, 8 * 4 + 1}));
  // A's chunk does not reach its last prompt token: no logits; B samples from its only row.
  EXPECT_EQ(built.logits_row_of_request, (std::vector<int32_t>{-1, 0}));
  EXPECT_EQ(fb.logits_indices, (std::vector<int32_t>{4}));
}

TEST(BatchBuilderTest, FinalPrefillChunkSamplesItsLastRow) {
  RunnerRequest a;
  a.tokens = {1, 2, 3, 4, 5, 6};
  a.num_prompt_tokens = 6;
  a.block_ids = {{3, 9}};
  a.num_computed_tokens = 4;
  const BuiltBatch built = BuildForwardBatch({&a}, {2}, {}, 4);
  EXPECT_EQ(built.batch.token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(built.batch.groups[0].slot_mapping, (std::vector<int64_t>{36, 37}));
  EXPECT_EQ(built.batch.logits_indices, (std::vector<int32_t>{1}));
  EXPECT_EQ(built.logits_row_of_request, (std::vector<int32_t>{0}));
}

TEST(BatchBuilderTest, PromptLogprobRowsFollowTheSampledRows) {
  // A (prompt logprobs, 6-token prompt) finishes its prompt this step from position 3; B decodes.
  RunnerRequest a;
  a.tokens = {1, 2, 3, 4, 5, 6};
  a.num_prompt_tokens = 6;
  a.sampling.prompt_logprobs = 0;
  a.block_ids = {{3, 9}};
  a.num_computed_tokens = 3;
  RunnerRequest b;
  b.tokens = {7, 8};
  b.num_prompt_tokens = 2;
  b.tokens.insert(b.tokens.end(), {9});
  b.block_ids = {{4}};
  b.num_computed_tokens = 2;
  const BuiltBatch built = BuildForwardBatch({&a, &b}, {3, 1}, {}, 4);
  // Sampled rows first (A's last, B's only), then A's positions 3 and 4, which score tokens 5 and
  // 6; position 5 is the last prompt token and has no prompt token after it.
  EXPECT_EQ(built.batch.logits_indices, (std::vector<int32_t>{2, 3, 0, 1}));
  EXPECT_EQ(built.logits_row_of_request, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(built.prompt_rows_of_request.size(), 2u);
  EXPECT_EQ(built.prompt_rows_of_request[0].first_row, 2);
  EXPECT_EQ(built.prompt_rows_of_request[0].count, 2);
  EXPECT_EQ(built.prompt_rows_of_request[1].count, 0);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST(BatchBuilderTest, DraftTokensFollowTheLastKnownTokenWithARowEach) {
  // B decodes after 10 known tokens with a draft of 3: positions 9..12, rows for all four.
  RunnerRequest a;
  a.tokens = {1, 2, 3, 4, 5, 6};
  a.num_prompt_tokens = 6;
  a.block_ids = {{3, 9}};
  a.num_computed_tokens = 4;
  RunnerRequest b;
  b.tokens = {21, 22, 23, 24, 25, 26, 27, 28, 29, 30};
  b.num_prompt_tokens = 9;
  b.block_ids = {{1, 4, 6, 8}};
  b.num_computed_tokens = 9;
  const BuiltBatch built = BuildForwardBatch({&a, &b}, {2, 4}, {{}, {40, 41, 42}}, 4);
  EXPECT_EQ(built.batch.token_ids, (std::vector<int32_t>{5, 6, 30, 40, 41, 42}));
  EXPECT_EQ(built.batch.positions, (std::vector<int32_t>{4, 5, 9, 10, 11, 12}));
  EXPECT_EQ(built.batch.seq_lens, (std::vector<int32_t>{6, 13}));
  EXPECT_EQ(built.batch.groups[0].slot_mapping, (std::vector<int64_t>{36, 37, 25, 26, 27, 32}));
  EXPECT_EQ(built.batch.logits_indices, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(built.logits_row_of_request, (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace ember
