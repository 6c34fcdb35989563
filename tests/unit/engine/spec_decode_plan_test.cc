// The scheduler's speculation arithmetic: the step cost model, following drafts against the tokens
// that came, and the plan of how many draft tokens to verify.
#include "engine/spec_decode.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

namespace ember {
namespace {

TEST(StepCostModel, InterpolatesAndExtrapolatesWithTheLastSlope) {
  const StepCostModel cost{{1, 4, 8}, {1.0, 1.3, 2.1}};
  EXPECT_DOUBLE_EQ(cost.Seconds(1), 1.0);
  EXPECT_DOUBLE_EQ(cost.Seconds(2), 1.1);
  EXPECT_DOUBLE_EQ(cost.Seconds(6), 1.7);
  EXPECT_DOUBLE_EQ(cost.Seconds(12), 2.9);  // 2.1 + 4 * 0.2
  EXPECT_NE(cost.Describe().find("8 tok 2100.00 ms"), std::string::npos) << cost.Describe();
}

TEST(DraftTracker, RecordsTheMatchedPrefixAsTokensArrive) {
  AcceptanceStats request, engine;
  DraftTracker d;
  std::vector<int32_t> tokens = {5, 6, 7};
  const std::vector<int32_t> draft = {8, 9, 10, 11};
  d.Start(draft, 3, &request, &engine);
  EXPECT_EQ(d.Ahead(3).size(), 4u);
  EXPECT_TRUE(d.Ahead(4).empty()) << "a draft is verifiable only at the position it was made for";
  tokens.push_back(8);  // position 1 matches
  d.Check(tokens, &request, &engine);
  EXPECT_TRUE(d.Ahead(4).empty()) << "partly checked: stale";
  EXPECT_EQ(engine.checked(1), 0) << "not finished yet";
  tokens.insert(tokens.end(), {9, 3});  // position 2 matches, 3 differs
  d.Check(tokens, &request, &engine);
  for (const AcceptanceStats* s : {&request, &engine}) {
    EXPECT_EQ(s->checked(1), 1);
    EXPECT_EQ(s->matched(1), 1);
    EXPECT_EQ(s->checked(2), 1);
    EXPECT_EQ(s->matched(2), 1);
    EXPECT_EQ(s->checked(3), 1);
    EXPECT_EQ(s->matched(3), 0);
    EXPECT_EQ(s->checked(4), 0) << "never compared";
  }
  // A draft replaced before it was checked to the end counts as far as it got.
  d.Start(std::vector<int32_t>{1, 2}, 6, &request, &engine);
  tokens.push_back(1);
  d.Check(tokens, &request, &engine);
  d.Start(std::vector<int32_t>{4}, 7, &request, &engine);
  EXPECT_EQ(engine.checked(1), 2);
  EXPECT_EQ(engine.matched(1), 2);
  EXPECT_EQ(engine.checked(2), 1) << "the first draft's position 2 only";
  EXPECT_NEAR(engine.Conditional(3, 0.5, 0.0), 0.0, 1e-12);
  EXPECT_NEAR(engine.Conditional(1, 0.5, 2.0), (2 + 1.0) / 4.0, 1e-12);
}

std::vector<int32_t> Plan(const StepCostModel& cost, int num_decodes, double acceptance, int32_t max_tokens) {
  AcceptanceStats engine;
  // 100 drafts, each position accepted with probability `acceptance` given the ones before.
  for (int i = 0; i < 100; ++i) {
    int matched = 0;
    double p = 1;
    while (matched < 8 && (p *= acceptance) * 100 > i) ++matched;
    engine.Record(matched, std::min(matched + 1, 8));
  }
  std::vector<SpecCandidate> candidates(num_decodes, {max_tokens, nullptr});
  return PlanSpeculation({.candidates = candidates,
                          .base_tokens = num_decodes,
                          .base_emitted = num_decodes,
                          .propose_seconds = 0.0,
                          .cost = &cost,
                          .engine = &engine});
}

int Total(const std::vector<int32_t>& plan) { return std::accumulate(plan.begin(), plan.end(), 0); }

TEST(PlanSpeculation, VerifiesWhenWideStepsAreCheapAndDraftsMatch) {
  const StepCostModel flat{{1, 64}, {1.0, 1.05}};  // weight streaming dominates: width is nearly free
  const std::vector<int32_t> plan = Plan(flat, 1, 0.9, 5);
  EXPECT_EQ(plan, std::vector<int32_t>{5});
  EXPECT_EQ(Total(Plan(flat, 1, 0.0, 5)), 0) << "drafts that never match are not worth any cost";
}

TEST(PlanSpeculation, NeverWhenEveryTokenCostsAFullStep) {
  const StepCostModel linear{{1, 64}, {1.0, 64.0}};  // compute bound: n tokens cost n steps
  EXPECT_EQ(Total(Plan(linear, 1, 0.95, 5)), 0);
  EXPECT_EQ(Total(Plan(linear, 16, 0.95, 5)), 0);
}

// A block drafter at one request on a CPU (SmolLM2 and its DSpark drafter: a step 4.03 ms plus
// 0.43 ms per extra token, a drafting step 1.4 ms) with drafts right at about a third of their
// first positions. Charged to verification, the drafting makes no plan worth it; where the step
// drafts for the next one anyway, its cost is on both sides and the first tokens are worth their
// 0.43 ms (the plan verified 60% of what had been drafted before: 0.93-1.12x no speculation in
// paired runs; weighed this way 1.04-1.16x, bench/results/dspark_s25).
TEST(PlanSpeculation, DraftingPaidAnywayIsNotChargedToVerification) {
  const StepCostModel cost{{1, 2, 3, 4}, {4.03e-3, 4.46e-3, 4.90e-3, 5.33e-3}};
  AcceptanceStats engine;
  const std::vector<float> confidences = {0.35f, 0.35f, 0.3f, 0.3f, 0.2f, 0.2f, 0.2f};
  const std::vector<SpecCandidate> candidates = {{7, nullptr, confidences}};
  SpecPlanInput input{.candidates = candidates, .base_tokens = 1, .base_emitted = 1, .propose_seconds = 1.4e-3,
                      .cost = &cost, .engine = &engine};
  EXPECT_EQ(Total(PlanSpeculation(input)), 0) << "drafting is the choice being weighed";
  input.propose_paid_anyway = true;
  // Only what verifying costs is weighed: the first two tokens (0.35 and 0.12 expected) are worth
  // their 0.43-0.44 ms each, the third (0.04) is not.
  EXPECT_EQ(Total(PlanSpeculation(input)), 2);
  const std::vector<float> hopeless(7, 0.05f);
  const std::vector<SpecCandidate> wrong = {{7, nullptr, hopeless}};
  input.candidates = wrong;
  EXPECT_EQ(Total(PlanSpeculation(input)), 0) << "a draft not worth its verification stays unverified";
}

TEST(PlanSpeculation, BacksOffAsTheBatchGrows) {
  // Fixed cost 10, then 1 per token: a batch of 1 is nearly free to widen, a batch of 64 is not.
  StepCostModel cost;
  for (int64_t n : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {
    cost.tokens.push_back(n);
    cost.seconds.push_back(10.0 + static_cast<double>(n));
  }
  int previous = 1 << 30;
  std::vector<double> per_request;
  for (int decodes : {1, 4, 16, 64, 256}) {
    const double per = static_cast<double>(Total(Plan(cost, decodes, 0.7, 5))) / decodes;
    per_request.push_back(per);
    EXPECT_LE(per, previous) << decodes << " decodes";
    previous = static_cast<int>(per + 0.999);
  }
  EXPECT_GT(per_request.front(), 2.0);
  EXPECT_LT(per_request.back(), 0.5);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// DSpark's Algorithm 1: with confidences, the prefix survival is their running product, and the
// plan verifies a confident prefix, more of it for the request that is more sure.
TEST(PlanSpeculation, ConfidencesGiveThePrefixSurvival) {
  const StepCostModel cost{{1, 2, 4, 8, 16}, {1.0, 1.1, 1.3, 1.7, 2.5}};
  AcceptanceStats engine;  // nothing measured: the confidences decide
  const std::vector<float> sure = {0.95f, 0.9f, 0.9f, 0.85f, 0.2f, 0.1f, 0.1f};
  const std::vector<float> unsure = {0.3f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
  const std::vector<SpecCandidate> candidates = {{7, nullptr, sure}, {7, nullptr, unsure}};
  const std::vector<int32_t> plan = PlanSpeculation(
      {.candidates = candidates, .base_tokens = 2, .base_emitted = 2, .cost = &cost, .engine = &engine});
  EXPECT_GE(plan[0], 3);
  EXPECT_LE(plan[0], 5);
  EXPECT_LT(plan[1], plan[0]);
  const std::vector<float> low(7, 0.01f);
  const std::vector<SpecCandidate> hopeless = {{7, nullptr, low}};
  EXPECT_EQ(PlanSpeculation({.candidates = hopeless, .base_tokens = 1, .base_emitted = 1, .cost = &cost,
                             .engine = &engine})[0],
            0);
}

// Confidences are checked against what was accepted: a head that says 0.7 for drafts that never
// survive is scaled down until the plan stops verifying them (an untrained head, a drifted STS),
// while a head whose confidences come true keeps its plan.
TEST(PlanSpeculation, ConfidencesAreScaledByWhatWasAccepted) {
  const StepCostModel cost{{1, 2, 4, 8}, {1.0, 1.1, 1.3, 1.7}};
  const std::vector<float> claims(7, 0.7f);
  const std::vector<SpecCandidate> candidates = {{7, nullptr, claims}};
  auto plan = [&](const AcceptanceStats& engine) {
    return PlanSpeculation(
        {.candidates = candidates, .base_tokens = 1, .base_emitted = 1, .cost = &cost, .engine = &engine})[0];
  };
  AcceptanceStats fresh;
  EXPECT_DOUBLE_EQ(fresh.ConfidenceScale(1, 2.0), 1.0);
  const int32_t believed = plan(fresh);
  EXPECT_GE(believed, 2);

  AcceptanceStats liar;  // position 1 never matches
  for (int d = 0; d < 30; ++d) liar.Record(0, 1, claims);
  EXPECT_LT(liar.ConfidenceScale(1, 2.0), 0.1);
  EXPECT_EQ(plan(liar), 0);

  AcceptanceStats honest;  // each position survives 7 times in 10, as claimed
  std::mt19937 rng(5);
  std::bernoulli_distribution survives(0.7);
  for (int d = 0; d < 4000; ++d) {
    int32_t matched = 0;
    while (matched < 7 && survives(rng)) ++matched;
    honest.Record(matched, std::min(matched + 1, 7), claims);
  }
  for (int32_t i = 1; i <= 4; ++i) EXPECT_NEAR(honest.ConfidenceScale(i, 2.0), 1.0, 0.05) << "position " << i;
  EXPECT_EQ(liar.checked(1), 30) << "the plain acceptance counts are kept as before";
  EXPECT_EQ(plan(honest), believed);
  // A draft without confidences does not move the scale.
  AcceptanceStats plain;
  for (int d = 0; d < 30; ++d) plain.Record(0, 1);
  EXPECT_DOUBLE_EQ(plain.ConfidenceScale(1, 2.0), 1.0);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST(StepCostModel, FollowsObservedStepTimesAndStaysMonotone) {
  StepCostModel cost{{1, 4, 16}, {1.0, 2.0, 4.0}};
  for (int i = 0; i < 200; ++i) cost.Observe(4, 3.0);  // the machine got slower at 4 tokens
  EXPECT_NEAR(cost.Seconds(4), 3.0, 0.05);
  EXPECT_DOUBLE_EQ(cost.Seconds(1), 1.0);
  EXPECT_GE(cost.Seconds(16), cost.Seconds(4));
  for (int i = 0; i < 200; ++i) cost.Observe(16, 2.0);  // and faster at 16: 4 must follow down
  EXPECT_LE(cost.Seconds(4), cost.Seconds(16));
  cost.Observe(4, 1e9);  // one wild outlier moves a point by at most 10%
  EXPECT_LT(cost.Seconds(4), 2.0 * 1.11);
}

// Steps of 64 tokens grew 40% dearer than at startup (longer contexts): the extra tokens above 64
// grow as dear, so a plan does not take verified tokens for cheap where steps are slow.
TEST(StepCostModel, ExtraTokensGrowAsDearAsTheObservedStep) {
  StepCostModel cost{{1, 64, 128}, {1.0, 50.0, 90.0}};
  for (int i = 0; i < 200; ++i) cost.Observe(64, 70.0);
  EXPECT_NEAR(cost.Seconds(64), 70.0, 0.5);
  EXPECT_NEAR(cost.Seconds(128) - cost.Seconds(64), 40.0 * 70.0 / 50.0, 1.0);
  EXPECT_DOUBLE_EQ(cost.Seconds(1), 1.0);
}

}  // namespace
}  // namespace ember
