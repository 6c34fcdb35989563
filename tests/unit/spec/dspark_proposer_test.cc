// The DSpark proposer over a fake target stream: the hidden states a runner would report (every
// verified position once, in order, in chunks of a prefill and of 1 + accepted drafts) fed by hand
// from the tiny fixtures' context features. It drafts the torch reference's greedy block, and what
// it drafts does not depend on its history: after drafts that were rejected, a recompute that
// re-reports positions, a release and restart, or batching with other requests, it drafts bitwise
// what a fresh proposer fed the same positions once drafts.
#include "spec/dspark/dspark_proposer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "dspark_fixture.h"

namespace ember::spec::dspark {
namespace {

using test::Fixture;

// The fixture's made-up target: hidden 64, vocab 512, 6 layers. Its final norm is the identity
// here because the fixture's last-layer tap features are already final-normed.
const DSparkTargetInfo kTarget{"fake target", 64, 512, 6};

Status IdentityNorm(const float* x, int64_t rows, float* out) {
  std::copy(x, x + rows * kTarget.hidden_size, out);
  return Status::Ok();
}

std::unique_ptr<DSparkProposer> MakeProposer(Fixture& f, DSparkProposerOptions o = {}) {
  auto p = DSparkProposer::Create(std::move(f.drafter), kTarget, IdentityNorm, o);
  EMBER_CHECK(p.ok(), "{}", p.status().ToString());
  return std::move(*p);
}

// A request's tokens up to its anchor at `anchor_position` (the token just sampled).
std::vector<int32_t> Tokens(int64_t anchor_position, int32_t anchor) {
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < anchor_position; ++i) tokens.push_back(static_cast<int32_t>((i * 37 + 11) % 500));
  tokens.push_back(anchor);
  return tokens;
}

// Reports positions [first, first + count) of the fixture's features as one step would: the
// request's rows sit at batch row 1 of a batch with other rows around them. `tokens` are the
// request's tokens the runner passes along (Tokens(first + count, 1) unless given). Positions past
// the fixture's repeat its rows (for tests that count rows, not compare drafts).
void Report(DSparkProposer& p, const Fixture& f, RequestId req, int64_t first, int64_t count,
            std::vector<int32_t> tokens = {}, uint64_t cache_salt_key = 0, int64_t num_prompt_tokens = 0) {
  if (tokens.empty()) tokens = Tokens(first + count, 1);
  const int64_t hidden = kTarget.hidden_size;
  const size_t taps = p.TargetHiddenStateLayers().size();
  const int64_t batch_rows = count + 2;
  std::vector<float> data(taps * batch_rows * hidden, -7.0f);
  for (size_t t = 0; t < taps; ++t) {
    for (int64_t i = 0; i < count; ++i) {
      const float* row = f.feature_row((first + i) % f.num_positions()) + t * hidden;
      std::copy(row, row + hidden, data.data() + (t * batch_rows + 1 + i) * hidden);
    }
  }
  TargetHiddenStates s;
  s.layers = p.TargetHiddenStateLayers();
  s.data = data;
  s.num_batch_rows = batch_rows;
  s.hidden_size = hidden;
  s.first_row = 1;
  s.num_rows = count;
  s.first_position = first;
  s.num_prompt_tokens = num_prompt_tokens;
  s.tokens = tokens;
  s.block_keys = kv::BlockKeys(cache_salt_key);
  p.ObserveTargetHiddenStates(req, s);
}

Draft ProposeOne(DSparkProposer& p, RequestId req, const std::vector<int32_t>& tokens, int32_t max_tokens = 7) {
  std::vector<ProposalInput> in = {{req, tokens, 1, max_tokens}};
  std::vector<Draft> out(1);
  p.Propose(in, out);
  return out[0];
}

class DSparkProposerTest : public ::testing::TestWithParam<const char*> {};

// Fed the 24 context positions in uneven chunks, the proposer drafts the reference's greedy block
// at anchor 24 (cases.json case 1), with its calibrated confidences.
TEST_P(DSparkProposerTest, DraftsTheReferenceBlock) {
  Fixture f(GetParam());
  const auto& c1 = f.cases["cases"][1];
  const int64_t s = c1["anchor_position"].get<int64_t>();
  const int32_t anchor = c1["anchor_token"].get<int32_t>();
  const std::vector<int32_t> want = test::ReadInts(*f.expected, "c1.greedy_tokens");
  const std::vector<float> want_conf = test::ReadFloats(*f.expected, "c1.greedy_confidences");
  auto p = MakeProposer(f);
  EXPECT_EQ(p->name(), "dspark");
  ASSERT_EQ(p->TargetHiddenStateLayers().size(), 3u);
  ASSERT_EQ(s, 24);
  int64_t first = 0;
  for (int64_t n : {5, 1, 1, 7, 10}) {  // a prefill chunk, then steps of 1 + accepted
    Report(*p, f, 7, first, n);
    first += n;
  }
  ASSERT_EQ(p->context(7)->end(), s);
  const Draft d = ProposeOne(*p, 7, Tokens(s, anchor));
  EXPECT_EQ(d.tokens, want);
  ASSERT_EQ(d.confidences.size(), want_conf.size());
  for (size_t k = 0; k < want_conf.size(); ++k) EXPECT_NEAR(d.confidences[k], want_conf[k], 1e-5) << k;
  // Fewer tokens asked: the block's prefix.
  const Draft three = ProposeOne(*p, 7, Tokens(s, anchor), 3);
  EXPECT_EQ(three.tokens, std::vector<int32_t>(want.begin(), want.begin() + 3));
}

// Proposer A drafts at every step (its drafts are never reported back: the runner reports only
// verified positions), sees a recompute that re-reports positions it had, and is released and
// restarted on a second request id; proposer B is fed positions 0..23 once. Their drafts at
// anchor 24 are bitwise equal.
TEST_P(DSparkProposerTest, DraftsAfterRollbackAreAFreshProposersDrafts) {
  Fixture a_fixture(GetParam()), b_fixture(GetParam());
  auto a = MakeProposer(a_fixture);
  auto b = MakeProposer(b_fixture);
  const int32_t anchor = 321;
  // A: a prefill of 10, a step accepting 3 drafts, a recompute from 8, steps of 2 and 4.
  Report(*a, a_fixture, 1, 0, 10);
  EXPECT_FALSE(ProposeOne(*a, 1, Tokens(10, 5)).tokens.empty());
  Report(*a, a_fixture, 1, 10, 4);
  EXPECT_FALSE(ProposeOne(*a, 1, Tokens(14, 9)).tokens.empty());
  Report(*a, a_fixture, 1, 8, 10);  // positions 8..17 again: the context is cut back to 8
  EXPECT_EQ(a->context(1)->end(), 18);
  EXPECT_FALSE(ProposeOne(*a, 1, Tokens(18, 3)).tokens.empty());
  Report(*a, a_fixture, 1, 18, 2);
  Report(*a, a_fixture, 1, 20, 4);
  const Draft from_a = ProposeOne(*a, 1, Tokens(24, anchor));

  Report(*b, b_fixture, 2, 0, 24);
  const Draft from_b = ProposeOne(*b, 2, Tokens(24, anchor));
  ASSERT_EQ(from_a.tokens.size(), 7u);
  EXPECT_EQ(from_a.tokens, from_b.tokens);
  EXPECT_EQ(from_a.confidences, from_b.confidences);

  // Preempted: released, then reported again from position 0.
  a->OnReleased(1, {}, 0, false);
  EXPECT_EQ(a->num_tracked_requests(), 0);
  EXPECT_TRUE(ProposeOne(*a, 1, Tokens(24, anchor)).tokens.empty());
  Report(*a, a_fixture, 1, 0, 7);
  Report(*a, a_fixture, 1, 7, 17);
  const Draft again = ProposeOne(*a, 1, Tokens(24, anchor));
  EXPECT_EQ(again.tokens, from_b.tokens);
  EXPECT_EQ(again.confidences, from_b.confidences);
}

// Several requests drafted in one call, in more than one drafter forward (max_num_seqs 2), with
// their reports projected in chunks of 5 positions, draft what each drafts alone.
TEST_P(DSparkProposerTest, BatchingDoesNotChangeDrafts) {
  Fixture f(GetParam()), g(GetParam());
  DSparkProposerOptions o;
  o.max_num_seqs = 2;
  o.max_context_rows = 5;
  auto batched = MakeProposer(f, o);
  auto alone = MakeProposer(g);
  const int64_t lengths[] = {24, 3, 17};
  std::vector<std::vector<int32_t>> tokens;
  std::vector<ProposalInput> inputs;
  for (int r = 0; r < 3; ++r) {
    Report(*batched, f, 100 + r, 0, lengths[r]);
    Report(*alone, g, 100 + r, 0, lengths[r]);
    alone->FinishObservations();  // projected per request; `batched` projects the 44 rows together, 5 at a time
    tokens.push_back(Tokens(lengths[r], 40 + r));
  }
  for (int r = 0; r < 3; ++r) inputs.push_back({static_cast<RequestId>(100 + r), tokens[r], 1, 6 - r});
  std::vector<Draft> drafts(3);
  batched->Propose(inputs, drafts);
  for (int r = 0; r < 3; ++r) {
    const Draft one = ProposeOne(*alone, 100 + r, tokens[r], 6 - r);
    EXPECT_EQ(drafts[r].tokens.size(), static_cast<size_t>(6 - r));
    EXPECT_EQ(drafts[r].tokens, one.tokens) << "request " << r;
    EXPECT_EQ(drafts[r].confidences, one.confidences) << "request " << r;
  }
}

// No draft without the target's hidden states of every position before the anchor: an unknown
// request, a context that ends elsewhere, a gap in the reported positions (until a restart).
TEST_P(DSparkProposerTest, NoDraftWithoutTheAnchorsContext) {
  Fixture f(GetParam());
  auto p = MakeProposer(f);
  EXPECT_TRUE(ProposeOne(*p, 9, Tokens(5, 1)).tokens.empty());  // nothing reported
  Report(*p, f, 9, 0, 5);
  EXPECT_TRUE(ProposeOne(*p, 9, Tokens(6, 1)).tokens.empty());  // position 5 not reported
  EXPECT_TRUE(ProposeOne(*p, 9, Tokens(4, 1)).tokens.empty());  // the context is past anchor 4
  EXPECT_FALSE(ProposeOne(*p, 9, Tokens(5, 1)).tokens.empty());
  Report(*p, f, 9, 0, 12);  // the request restarts from 0
  EXPECT_FALSE(ProposeOne(*p, 9, Tokens(12, 1)).tokens.empty());
}

// After a gap (positions the target took from its prefix cache that the drafter's own cache
// lacks) the context restarts, and the request drafts from the positions since: bitwise what a
// fresh proposer fed only those positions drafts, and not what the whole context drafts.
TEST_P(DSparkProposerTest, AfterAGapDraftsFromThePositionsSince) {
  Fixture f(GetParam()), g(GetParam()), h(GetParam());
  auto p = MakeProposer(f);
  Report(*p, f, 9, 0, 5);
  Report(*p, f, 9, 12, 12);  // positions 5-11 never came
  const Draft after_gap = ProposeOne(*p, 9, Tokens(24, 8));
  ASSERT_EQ(after_gap.tokens.size(), 7u);
  auto fresh = MakeProposer(g);
  Report(*fresh, g, 1, 12, 12);
  const Draft since = ProposeOne(*fresh, 1, Tokens(24, 8));
  EXPECT_EQ(after_gap.tokens, since.tokens);
  EXPECT_EQ(after_gap.confidences, since.confidences);
  auto whole = MakeProposer(h);
  Report(*whole, h, 1, 0, 24);
  EXPECT_NE(ProposeOne(*whole, 1, Tokens(24, 8)).confidences, since.confidences);
}

// The static threshold mode: drafts end before the first confidence below the threshold, so a
// thresholded proposer drafts a prefix of the unthresholded draft, each kept confidence >= it.
TEST_P(DSparkProposerTest, ConfidenceThresholdDraftsAPrefix) {
  Fixture f(GetParam()), g(GetParam());
  auto plain = MakeProposer(f);
  Report(*plain, f, 1, 0, 24);
  const Draft full = ProposeOne(*plain, 1, Tokens(24, 8));
  ASSERT_EQ(full.tokens.size(), 7u);
  std::vector<float> sorted = full.confidences;
  std::sort(sorted.begin(), sorted.end());
  DSparkProposerOptions o;
  o.confidence_threshold = sorted[3];  // the median: something is cut, something may stay
  auto thresholded = MakeProposer(g, o);
  Report(*thresholded, g, 1, 0, 24);
  const Draft cut = ProposeOne(*thresholded, 1, Tokens(24, 8));
  size_t expect = 0;
  while (expect < full.confidences.size() && full.confidences[expect] >= o.confidence_threshold) ++expect;
  ASSERT_EQ(cut.tokens.size(), expect);
  EXPECT_TRUE(std::equal(cut.tokens.begin(), cut.tokens.end(), full.tokens.begin()));
}

// The drafter's prefix cache: a request whose first 16 positions the target took from its prefix
// cache (its first report starts at 16) gets those context rows from the blocks an earlier request
// with the same tokens stored, and drafts bitwise what that request drafted. A different token in
// the prefix, another cache salt, a cache too small to hold the prefix, or no cache: nothing to
// restore: the second request drafts after a gap, which is not the first one's draft.
TEST_P(DSparkProposerTest, PrefixCacheHitDraftsWhatTheFirstRequestDrafted) {
  constexpr int64_t kBlock = 8;
  auto run = [&](int64_t cache_positions, std::vector<int32_t> second_tokens, uint64_t second_salt) {
    Fixture f(GetParam());
    DSparkProposerOptions o;
    o.context_cache_block_size = kBlock;
    o.context_cache_positions = cache_positions;
    auto p = MakeProposer(f, o);
    Report(*p, f, 1, 0, 24);
    const Draft first = ProposeOne(*p, 1, Tokens(24, 8));
    EXPECT_EQ(first.tokens.size(), 7u);
    p->OnReleased(1, Tokens(24, 8), 24, true);
    Report(*p, f, 2, 16, 8, second_tokens, second_salt);  // positions 0-15 came from the target's cache
    const Draft second = ProposeOne(*p, 2, Tokens(24, 8));
    EXPECT_EQ(second.tokens.size(), 7u);
    return second.confidences == first.confidences;
  };
  EXPECT_TRUE(run(64, {}, 0));
  EXPECT_TRUE(run(24, {}, 0));   // room for the first request's three blocks
  EXPECT_FALSE(run(16, {}, 0));  // two blocks: storing 16-23 evicted 0-7, the least recently used
  std::vector<int32_t> other = Tokens(24, 1);
  other[3] ^= 1;
  EXPECT_FALSE(run(64, other, 0));
  EXPECT_FALSE(run(64, {}, 42));
  EXPECT_FALSE(run(0, {}, 0));
}

// The drafter's upkeep waits for a draft: a request's rows, prompt included, are projected only
// when it drafts (or max_waiting_rows() wait in all), and a request that finishes with more than
// kRecentRows waiting (it was not drafting) drops them instead of storing them in the prefix
// cache.
TEST_P(DSparkProposerTest, RowsWaitUntilTheRequestDrafts) {
  constexpr int64_t kBlock = 8, kPrompt = 10;
  auto step = [](DSparkProposer& p, const Fixture& f, RequestId req, int64_t first, int64_t count) {
    Report(p, f, req, first, count, {}, 0, kPrompt);
    p.FinishObservations();
  };
  {
    Fixture f(GetParam());
    DSparkProposerOptions o;
    o.context_cache_block_size = kBlock;
    o.context_cache_positions = 1024;
    auto p = MakeProposer(f, o);
    const DSparkContextCache& cache = *p->context_cache();
    step(*p, f, 1, 0, kPrompt);
    const int64_t generated = DSparkProposer::kRecentRows + 8;
    for (int64_t i = 0; i < generated; ++i) step(*p, f, 1, kPrompt + i, 1);
    EXPECT_EQ(p->num_waiting_rows(1), kPrompt + generated) << "a request that does not draft projects nothing";
    EXPECT_EQ(cache.num_blocks(), 0);
    p->OnReleased(1, Tokens(kPrompt + generated, 1), kPrompt, true);
    EXPECT_EQ(cache.num_blocks(), 0) << "a request that was not drafting stores no blocks";

    // One that drafts projects what waited, and a few rows after its last draft still go to the
    // prefix cache when it finishes: positions 0-23 are three blocks.
    step(*p, f, 2, 0, kPrompt);
    for (int64_t i = 0; i < 10; ++i) step(*p, f, 2, kPrompt + i, 1);
    EXPECT_EQ(p->num_waiting_rows(2), kPrompt + 10);
    EXPECT_FALSE(ProposeOne(*p, 2, Tokens(kPrompt + 10, 8)).tokens.empty());
    EXPECT_EQ(p->num_waiting_rows(2), 0);
    step(*p, f, 2, kPrompt + 10, 4);
    EXPECT_EQ(p->num_waiting_rows(2), 4);
    p->OnReleased(2, Tokens(kPrompt + 14, 1), kPrompt, true);
    EXPECT_EQ(cache.num_blocks(), 3);
  }
  {
    // max_waiting_rows() bounds what waits: kWaitingRowsPerSeq a sequence.
    Fixture f(GetParam());
    DSparkProposerOptions o;
    o.max_num_seqs = 1;
    auto p = MakeProposer(f, o);
    ASSERT_EQ(p->max_waiting_rows(), DSparkProposer::kWaitingRowsPerSeq);
    step(*p, f, 1, 0, kPrompt);
    EXPECT_EQ(p->num_waiting_rows(1), kPrompt);
    int64_t position = kPrompt;
    while (position < DSparkProposer::kWaitingRowsPerSeq - 1) step(*p, f, 1, position++, 1);
    EXPECT_EQ(p->num_waiting_rows(1), DSparkProposer::kWaitingRowsPerSeq - 1);
    step(*p, f, 1, position++, 1);
    EXPECT_EQ(p->num_waiting_rows(1), 0);
    EXPECT_EQ(p->num_waiting_rows(), 0);
    EXPECT_EQ(p->context(1)->end(), position);
  }
}

// The bound on waiting rows is shared: a request may hold more than kWaitingRowsPerSeq while
// others hold less (a long prompt waits whole), and where they reach it together the requests
// with the most rows waiting are projected first, the others keep waiting. A released request's
// rows leave the count.
TEST_P(DSparkProposerTest, WaitingRowsShareOneBound) {
  Fixture f(GetParam());
  DSparkProposerOptions o;
  o.max_num_seqs = 2;
  auto p = MakeProposer(f, o);
  const int64_t budget = p->max_waiting_rows();
  ASSERT_EQ(budget, 2 * DSparkProposer::kWaitingRowsPerSeq);
  auto step = [&](RequestId req, int64_t first, int64_t count) {
    Report(*p, f, req, first, count);
    p->FinishObservations();
  };
  const int64_t longer = DSparkProposer::kWaitingRowsPerSeq + 100;
  step(1, 0, longer);
  step(2, 0, 50);
  step(3, 0, 20);
  EXPECT_EQ(p->num_waiting_rows(1), longer) << "more than one sequence's share, within the bound";
  EXPECT_EQ(p->num_waiting_rows(), longer + 70);
  p->OnReleased(3, Tokens(20, 1), 20, /*completed=*/false);
  EXPECT_EQ(p->num_waiting_rows(), longer + 50);
  step(2, 50, budget - longer - 50);  // reaches the bound: request 1 has the most waiting
  EXPECT_EQ(p->num_waiting_rows(1), 0);
  EXPECT_EQ(p->context(1)->end(), longer);
  EXPECT_EQ(p->num_waiting_rows(2), budget - longer);
  EXPECT_EQ(p->num_waiting_rows(), budget - longer);
}

// The projection of rows a steady run of drafting would not have had waiting (a prompt, the steps
// a request did not draft in) is the call's catch-up, which adaptive speculation leaves out of the
// drafting step's price; the last step's report (up to k + 1 rows) is not.
TEST_P(DSparkProposerTest, RowsOfStepsWithoutDraftingAreCatchUp) {
  constexpr int64_t kPrompt = 20;
  Fixture f(GetParam());
  DSparkProposerOptions o;
  o.num_speculative_tokens = 3;
  auto p = MakeProposer(f, o);
  auto step = [&](int64_t first, int64_t count) {
    Report(*p, f, 1, first, count, {}, 0, kPrompt);
    p->FinishObservations();
  };
  auto propose = [&](int64_t end) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(ProposeOne(*p, 1, Tokens(end, 8), 3).tokens.empty());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LE(p->last_catch_up_seconds(), seconds);
    return p->last_catch_up_seconds();
  };
  step(0, kPrompt);
  EXPECT_GT(propose(kPrompt), 0.0) << "a prompt of 20 rows is more than a drafting step's 4";
  int64_t end = kPrompt;
  for (int64_t accepted : {0, 3, 1}) {
    step(end, accepted + 1);
    end += accepted + 1;
    EXPECT_EQ(propose(end), 0.0) << "drafting every step, " << accepted << " accepted";
  }
  for (int i = 0; i < 12; ++i) step(end++, 1);
  EXPECT_GT(propose(end), 0.0) << "11 steps without drafting";
  step(end, 2);
  EXPECT_EQ(propose(end + 2), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DSparkProposerTest, ::testing::Values("tiny", "tiny_gated"),
                         [](const auto& info) { return std::string(info.param); });

// The store keeps what a windowed drafter can still read (the last `window` positions, trimmed
// in amortised moves, never more than max_rows()) and says when a block can be drafted.
TEST(DSparkContext, SlidingWindowKeepsTheLastWindowPositions) {
  constexpr int64_t kWindow = 4;
  DSparkContext c(2, 3, kWindow);
  ASSERT_EQ(c.max_rows(), kWindow + 64);
  std::vector<float> k(2 * 3), v(2 * 3);
  bool trimmed = false;
  for (int64_t p = 0; p < 200; ++p) {
    for (int l = 0; l < 2; ++l) {
      for (int i = 0; i < 3; ++i) {
        k[l * 3 + i] = static_cast<float>(p * 100 + l * 10 + i);
        v[l * 3 + i] = -k[l * 3 + i];
      }
    }
    c.Append(k.data(), v.data(), 1);
    ASSERT_LT(c.size(), c.max_rows());
    ASSERT_GE(c.size(), std::min<int64_t>(p + 1, kWindow));
    trimmed |= c.begin() > 0;
    EXPECT_TRUE(c.CanDraftAt(p + 1)) << p;
    for (int64_t q = c.begin(); q < c.end(); ++q) {
      ASSERT_EQ(c.K(1, q)[2], static_cast<float>(q * 100 + 12));
      ASSERT_EQ(c.V(0, q)[1], -static_cast<float>(q * 100 + 1));
    }
  }
  EXPECT_TRUE(trimmed);
  EXPECT_FALSE(c.CanDraftAt(199));  // the context ends at 200
  c.TruncateTo(198);
  // A block at 198 reads from 194, or what the store holds of that after the last trim.
  EXPECT_TRUE(c.CanDraftAt(198));
  const int64_t cut = c.begin() - 1;
  c.TruncateTo(cut);  // before what is held: the store restarts there, and drafts from what follows
  EXPECT_EQ(c.begin(), cut);
  EXPECT_EQ(c.size(), 0);
  EXPECT_FALSE(c.CanDraftAt(cut)) << "an empty store";
  for (int64_t p = cut; p < cut + kWindow; ++p) {
    c.Append(k.data(), v.data(), 1);
    EXPECT_TRUE(c.CanDraftAt(p + 1)) << p;
  }
  c.TruncateTo(0);
  EXPECT_EQ(c.size(), 0);
  EXPECT_TRUE(c.CanDraftAt(0) == false && c.begin() == 0);

  DSparkContext full(1, 2, -1);  // no window: everything is kept
  EXPECT_EQ(full.max_rows(), -1);
  std::vector<float> row(2, 1.0f);
  for (int p = 0; p < 100; ++p) full.Append(row.data(), row.data(), 1);
  EXPECT_EQ(full.begin(), 0);
  EXPECT_TRUE(full.CanDraftAt(100));
  full.RestartAt(120);  // a skipped prefix: drafts come from what follows it
  EXPECT_FALSE(full.CanDraftAt(120));
  for (int p = 0; p < 50; ++p) full.Append(row.data(), row.data(), 1);
  EXPECT_EQ(full.begin(), 120);
  EXPECT_TRUE(full.CanDraftAt(170));
}

}  // namespace
}  // namespace ember::spec::dspark
