// The DSpark drafter against the torch reference (scripts/dspark/dspark_model.py, written from
// checkpoint_layout.md independently of this C++): final-normed hidden states, base logits, the
// Markov-corrected logits, confidence logits and calibrated confidences, and the greedy drafts,
// on both tiny fixtures (vanilla Markov head with a sliding-window bidirectional layer; gated head
// with causal full layers), for a 3-position and a 24-position context (the window cuts the latter).
//
// Tolerances are the fixture's (cases.json): the reference is f32 on the same bf16-rounded
// weights, so the two differ only by f32 summation order (matmul blocking, softmax and norm
// reductions) and by RoPE angles (the reference computes them in f64, ember in f32): hidden 1e-4,
// logits 1e-3, confidences 1e-5 absolute. Greedy tokens must be equal.
#include "spec/dspark/drafter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "dspark_fixture.h"
#include "dspark_random_drafter.h"
#include "formats/safetensors_writer.h"
#include "spec/dspark/markov_head.h"

namespace ember::spec::dspark {
namespace {

using test::Fixture;

void ExpectNear(std::span<const float> got, std::span<const float> want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= worst)) {
      worst = d;
      at = i;
    }
  }
  EXPECT_LE(worst, tolerance) << what << ": worst |diff| at " << at << " (got " << got[at] << ", want " << want[at]
                              << ")";
}

class DSparkDrafterTest : public ::testing::TestWithParam<const char*> {};

// Both cases drafted in one ForwardBlocks (a batch of two blocks over different contexts), each
// compared with the reference's outputs for that case alone.
TEST_P(DSparkDrafterTest, MatchesTorchReference) {
  Fixture f(GetParam());
  DSparkDrafter& d = *f.drafter;
  const DSparkConfig& c = d.config();
  const auto& cases = f.cases["cases"];
  const auto& tol = f.cases["tolerance"];
  const double logits_tol = tol["logits_abs"].get<double>();
  const double hidden_tol = tol["hidden_abs"].get<double>();
  const double conf_tol = tol["confidence_abs"].get<double>();

  std::vector<DSparkContext> contexts;
  std::vector<DSparkDrafter::Block> blocks;
  for (const auto& cs : cases) {
    const int64_t s = cs["anchor_position"].get<int64_t>();
    contexts.push_back(d.NewContext());
    d.AppendContext(f.feature_row(0), s, contexts.back());
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    blocks.push_back({&contexts[i], cases[i]["anchor_token"].get<int32_t>(), cases[i]["anchor_position"].get<int64_t>(),
                      c.block_size});
  }
  d.ForwardBlocks(blocks);

  MarkovStage markov(d);
  const int64_t g = c.block_size, h = c.hidden_size, v = c.vocab_size;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string p = "c" + std::to_string(i) + ".";
    const std::vector<float> hidden = test::ReadFloats(*f.expected, p + "hidden");
    const std::vector<float> base = test::ReadFloats(*f.expected, p + "base_logits");
    for (int64_t k = 0; k < g; ++k) {
      ExpectNear(d.Hidden(i, k), std::span<const float>(hidden).subspan(k * h, h), hidden_tol,
                 p + "hidden row " + std::to_string(k));
      ExpectNear(d.BaseLogits(i, k), std::span<const float>(base).subspan(k * v, v), logits_tol,
                 p + "base logits row " + std::to_string(k));
    }
    for (const char* kind : {"greedy", "forced"}) {
      const std::string q = p + kind + "_";
      const std::vector<int32_t> want_tokens = test::ReadInts(*f.expected, q + "tokens");
      std::vector<int32_t> forced;
      if (std::string(kind) == "forced") forced = cases[i]["forced_tokens"].get<std::vector<int32_t>>();
      BlockDraft draft;
      markov.Draft(i, blocks[i].anchor_token, c.block_size, forced, 0.0f, /*keep_logits=*/true, &draft);
      EXPECT_EQ(draft.tokens, want_tokens) << q;
      ExpectNear(draft.logits, test::ReadFloats(*f.expected, q + "logits"), logits_tol, q + "logits");
      ExpectNear(draft.confidence_logits, test::ReadFloats(*f.expected, q + "confidence_logits"), conf_tol * 10,
                 q + "confidence logits");
      ExpectNear(draft.confidences, test::ReadFloats(*f.expected, q + "confidences"), conf_tol, q + "confidences");
    }
  }
}

// The context may arrive one verified position at a time, or in chunks (a prefill, then 1 + accepted
// per step): the drafter's matmuls are row-independent, so the block comes out bitwise the same.
TEST_P(DSparkDrafterTest, ContextChunkingIsBitwiseInvariant) {
  Fixture f(GetParam());
  DSparkDrafter& d = *f.drafter;
  const int64_t s = f.num_positions();
  DSparkContext whole = d.NewContext();
  d.AppendContext(f.feature_row(0), s, whole);
  DSparkContext pieces = d.NewContext();
  for (int64_t p = 0, n = 1; p < s; p += n, n = n % 4 + 1) d.AppendContext(f.feature_row(p), std::min(n, s - p), pieces);
  ASSERT_EQ(pieces.end(), s);

  const int32_t anchor = 77;
  const int32_t g = d.config().block_size;
  std::vector<DSparkDrafter::Block> blocks = {{&whole, anchor, s, g}, {&pieces, anchor, s, g}};
  d.ForwardBlocks(blocks);
  for (int64_t k = 0; k < g; ++k) {
    const auto a = d.BaseLogits(0, k), b = d.BaseLogits(1, k);
    ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << "row " << k;
  }
}

// The last layer computes queries, o_proj and the MLP only for the rows whose logits are wanted
// (ForwardBlocks' num_logits); those rows must come out with the bits of a block whose every row is
// computed, whatever the other blocks of the batch ask for, with the drafter's matmuls as shipped
// and in Q8_0 (the engine's default).
TEST_P(DSparkDrafterTest, WantedRowsHaveTheBitsOfAFullBlock) {
  for (const bool q8 : {false, true}) {
    Fixture f(GetParam());
    DSparkDrafter& d = *f.drafter;
    if (q8) {
      ASSERT_TRUE(d.QuantizeLinearsQ8_0().ok());
    }
    const int64_t s = f.num_positions();
    const int32_t g = d.config().block_size;
    DSparkContext context = d.NewContext();
    d.AppendContext(f.feature_row(0), s, context);
    const int32_t anchors[] = {5, 77, 9};
    std::vector<DSparkDrafter::Block> full;
    for (const int32_t a : anchors) full.push_back({&context, a, s, g});
    d.ForwardBlocks(full);
    std::vector<std::vector<float>> hidden, logits;
    for (size_t b = 0; b < full.size(); ++b) {
      for (int32_t k = 0; k < g; ++k) {
        hidden.emplace_back(d.Hidden(b, k).begin(), d.Hidden(b, k).end());
        logits.emplace_back(d.BaseLogits(b, k).begin(), d.BaseLogits(b, k).end());
      }
    }
    for (const std::vector<int32_t>& wanted : std::vector<std::vector<int32_t>>{{1, 1, 1}, {2, 0, 7}, {g, 3, 1}}) {
      std::vector<DSparkDrafter::Block> blocks;
      for (size_t b = 0; b < full.size(); ++b) blocks.push_back({&context, anchors[b], s, std::min(wanted[b], g)});
      d.ForwardBlocks(blocks);
      for (size_t b = 0; b < blocks.size(); ++b) {
        for (int32_t k = 0; k < blocks[b].num_logits; ++k) {
          const std::string what = fmt::format("q8 {} wanted {} block {} row {}", q8, fmt::join(wanted, ","), b, k);
          const std::vector<float>& h = hidden[b * g + k];
          const std::vector<float>& l = logits[b * g + k];
          ASSERT_TRUE(std::equal(h.begin(), h.end(), d.Hidden(b, k).begin())) << what;
          ASSERT_TRUE(std::equal(l.begin(), l.end(), d.BaseLogits(b, k).begin())) << what;
        }
      }
    }
  }
}

// The Markov stage drafts a batch's blocks in lockstep, one low-rank matmul per position over the
// blocks still drafting. Each block's draft (its corrected logits, bit for bit) is the one it gets
// drafted alone, whatever the other blocks want: more or fewer positions, sampled or greedy, a
// threshold that stops some early.
TEST_P(DSparkDrafterTest, BlocksDraftedTogetherHaveTheBitsOfEachAlone) {
  Fixture f(GetParam());
  DSparkDrafter& d = *f.drafter;
  const int64_t s = f.num_positions();
  const int32_t g = d.config().block_size;
  DSparkContext context = d.NewContext();
  d.AppendContext(f.feature_row(0), s, context);
  const int32_t anchors[] = {5, 77, 9, 31};
  const int32_t wanted[] = {g, 2, g - 1, 0};
  std::vector<DSparkDrafter::Block> blocks;
  for (size_t b = 0; b < 4; ++b) blocks.push_back({&context, anchors[b], s, wanted[b]});
  d.ForwardBlocks(blocks);
  const DraftSampling sampled{.temperature = 0.8f, .seed = 42, .first_index = s + 1};
  const DraftSampling samplings[] = {{}, sampled, {}, {}};
  MarkovStage markov(d);
  for (const float threshold : {0.0f, 0.3f}) {
    std::vector<BlockDraft> together(4);
    std::vector<MarkovBlock> batch;
    for (size_t b = 0; b < 4; ++b) batch.push_back({b, anchors[b], wanted[b], {}, samplings[b], &together[b]});
    markov.DraftBlocks(batch, threshold, /*keep_logits=*/true);
    for (size_t b = 0; b < 4; ++b) {
      SCOPED_TRACE(::testing::Message() << "threshold " << threshold << " block " << b);
      BlockDraft alone;
      markov.Draft(b, anchors[b], wanted[b], {}, threshold, /*keep_logits=*/true, &alone, samplings[b]);
      EXPECT_EQ(together[b].tokens, alone.tokens);
      EXPECT_EQ(together[b].confidences, alone.confidences);
      EXPECT_EQ(together[b].probabilities, alone.probabilities);
      ASSERT_EQ(together[b].logits.size(), alone.logits.size());
      if (!alone.logits.empty()) {
        EXPECT_EQ(std::memcmp(together[b].logits.data(), alone.logits.data(), alone.logits.size() * sizeof(float)), 0);
      }
    }
  }
}

// A confidence threshold ends the draft before the first position below it; the positions before
// are the untruncated draft's.
TEST_P(DSparkDrafterTest, ConfidenceThresholdTruncatesAtFirstLowPosition) {
  Fixture f(GetParam());
  DSparkDrafter& d = *f.drafter;
  DSparkContext context = d.NewContext();
  f.ForwardBlockAfterAllPositions(5, context);
  const int32_t g = d.config().block_size;
  MarkovStage markov(d);
  BlockDraft full;
  markov.Draft(0, 5, g, {}, 0.0f, false, &full);
  ASSERT_EQ(static_cast<int32_t>(full.tokens.size()), g);
  for (int32_t cut = 0; cut < g; ++cut) {
    // A threshold just above position cut's confidence, if no earlier one is lower.
    const float threshold = std::nextafter(full.confidences[cut], 2.0f);
    size_t expect = 0;
    while (expect < full.confidences.size() && full.confidences[expect] >= threshold) ++expect;
    BlockDraft truncated;
    markov.Draft(0, 5, g, {}, threshold, false, &truncated);
    ASSERT_EQ(truncated.tokens.size(), expect) << "threshold " << threshold;
    EXPECT_TRUE(std::equal(truncated.tokens.begin(), truncated.tokens.end(), full.tokens.begin()));
  }
}

// Probabilistic drafting: each position's q is softmax(l_k / T) of that position's corrected
// logits given the tokens drawn before it (replaying the drawn tokens reproduces them), the draws
// are a pure function of (seed, position), and the first position's draws over many seeds follow
// its q (a goodness-of-fit chi-square; the critical value at tail 1e-3 for the degrees of freedom).
TEST_P(DSparkDrafterTest, SampledDraftsComeFromTheDistributionsTheyReturn) {
  Fixture f(GetParam());
  DSparkDrafter& d = *f.drafter;
  const int64_t s = f.num_positions();
  DSparkContext context = d.NewContext();
  f.ForwardBlockAfterAllPositions(5, context);
  const int32_t g = d.config().block_size;
  const int64_t vocab = d.config().vocab_size;
  MarkovStage markov(d);
  constexpr float kTemperature = 2.0f;
  BlockDraft sampled, replayed, again;
  markov.Draft(0, 5, g, {}, 0.0f, false, &sampled, {.temperature = kTemperature, .seed = 11, .first_index = s + 1});
  ASSERT_EQ(static_cast<int32_t>(sampled.tokens.size()), g);
  ASSERT_EQ(static_cast<int64_t>(sampled.probabilities.size()), g * vocab);
  markov.Draft(0, 5, g, sampled.tokens, 0.0f, /*keep_logits=*/true, &replayed);
  for (int32_t k = 0; k < g; ++k) {
    const float* l = replayed.logits.data() + k * vocab;
    const float* q = sampled.probabilities.data() + k * vocab;
    const float max = *std::max_element(l, l + vocab);
    double z = 0, sum = 0;
    for (int64_t v = 0; v < vocab; ++v) z += std::exp((static_cast<double>(l[v]) - max) / kTemperature);
    for (int64_t v = 0; v < vocab; ++v) {
      sum += q[v];
      EXPECT_NEAR(q[v], std::exp((static_cast<double>(l[v]) - max) / kTemperature) / z, 1e-6) << "position " << k;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_GT(q[sampled.tokens[k]], 0.0f);
  }
  markov.Draft(0, 5, g, {}, 0.0f, false, &again, {.temperature = kTemperature, .seed = 11, .first_index = s + 1});
  EXPECT_EQ(again.tokens, sampled.tokens) << "the same seed and position draw the same tokens";

  constexpr int kDraws = 4000;
  std::vector<int> counts(vocab, 0);
  for (int seed = 0; seed < kDraws; ++seed) {
    markov.Draft(0, 5, 1, {}, 0.0f, false, &again,
                 {.temperature = kTemperature, .seed = static_cast<uint64_t>(seed), .first_index = s + 1});
    ++counts[again.tokens[0]];
  }
  // Categories expected at least 5 times; the rest pooled into one.
  double chi = 0, pooled_expected = 0, pooled_seen = 0;
  int df = -1;
  for (int64_t v = 0; v < vocab; ++v) {
    const double expected = kDraws * static_cast<double>(sampled.probabilities[v]);
    if (expected < 5.0) {
      pooled_expected += expected;
      pooled_seen += counts[v];
      continue;
    }
    chi += (counts[v] - expected) * (counts[v] - expected) / expected;
    ++df;
  }
  if (pooled_expected >= 5.0) {
    chi += (pooled_seen - pooled_expected) * (pooled_seen - pooled_expected) / pooled_expected;
    ++df;
  }
  ASSERT_GE(df, 5) << "q too peaked for the test: raise the temperature";
  // Wilson-Hilferty approximation of the upper 1e-3 point of chi-square(df).
  const double zq = 3.0902, a = 2.0 / (9.0 * df);
  const double critical = df * std::pow(1.0 - a + zq * std::sqrt(a), 3.0);
  EXPECT_LT(chi, critical) << "df " << df;
}

// A draft vocabulary (FR-Spec; UseDraftVocabulary): each position's logits are bitwise the full
// vocabulary's at the ids it holds, a greedy draft takes the best of those, and one whose tokens
// are all held is the full drafter's draft; sampled q rows are 0 outside it and sum to 1.
TEST_P(DSparkDrafterTest, DraftVocabularyDraftsTheBestTokenItHolds) {
  Fixture f(GetParam()), g(GetParam());
  const int64_t vocab = f.drafter->config().vocab_size;
  const int32_t block = f.drafter->config().block_size;
  DSparkContext fc = f.drafter->NewContext(), gc = g.drafter->NewContext();
  f.ForwardBlockAfterAllPositions(5, fc);
  MarkovStage full_markov(*f.drafter);
  BlockDraft full;
  full_markov.Draft(0, 5, block, {}, 0.0f, /*keep_logits=*/true, &full);
  ASSERT_EQ(static_cast<int32_t>(full.tokens.size()), block);

  // Every third token, in a scrambled order, without the full draft's first token.
  std::vector<int32_t> ids;
  for (int32_t v = 0; v < vocab; v += 3) {
    if (v != full.tokens[0]) ids.push_back(static_cast<int32_t>((v * 7) % vocab));
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  ids.erase(std::remove(ids.begin(), ids.end(), full.tokens[0]), ids.end());
  std::reverse(ids.begin(), ids.end());
  ASSERT_TRUE(g.drafter->UseDraftVocabulary(ids).ok());
  ASSERT_EQ(g.drafter->draft_vocab_size(), static_cast<int64_t>(ids.size()));
  g.ForwardBlockAfterAllPositions(5, gc);
  MarkovStage markov(*g.drafter);
  BlockDraft sub;
  markov.Draft(0, 5, block, {}, 0.0f, /*keep_logits=*/true, &sub);
  ASSERT_EQ(sub.logits.size(), block * ids.size());
  size_t best = 0;
  for (size_t j = 0; j < ids.size(); ++j) {
    ASSERT_EQ(sub.logits[j], full.logits[ids[j]]) << "position 0, draft id " << j;
    if (full.logits[ids[j]] > full.logits[ids[best]]) best = j;
  }
  EXPECT_EQ(sub.tokens[0], ids[best]);
  EXPECT_NE(sub.tokens[0], full.tokens[0]);
  EXPECT_EQ(sub.confidences[0], full.confidences[0]) << "the confidence head does not read the logits";

  // A vocabulary holding the full draft's tokens drafts exactly it.
  Fixture h(GetParam());
  std::vector<int32_t> holding(full.tokens.begin(), full.tokens.end());
  std::sort(holding.begin(), holding.end());
  holding.erase(std::unique(holding.begin(), holding.end()), holding.end());
  for (int32_t v = 1; v < vocab; v += 5) {
    if (std::find(holding.begin(), holding.end(), v) == holding.end()) holding.push_back(v);
  }
  ASSERT_TRUE(h.drafter->UseDraftVocabulary(holding).ok());
  DSparkContext hc = h.drafter->NewContext();
  h.ForwardBlockAfterAllPositions(5, hc);
  MarkovStage h_markov(*h.drafter);
  BlockDraft same, sampled;
  h_markov.Draft(0, 5, block, {}, 0.0f, false, &same);
  EXPECT_EQ(same.tokens, full.tokens);
  EXPECT_EQ(same.confidences, full.confidences);
  h_markov.Draft(0, 5, block, {}, 0.0f, false, &sampled, {.temperature = 1.0f, .seed = 3, .first_index = 100});
  ASSERT_EQ(static_cast<int64_t>(sampled.probabilities.size()), block * vocab);
  for (int32_t k = 0; k < block; ++k) {
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const float q = sampled.probabilities[k * vocab + v];
      const bool held = std::find(holding.begin(), holding.end(), static_cast<int32_t>(v)) != holding.end();
      if (!held) ASSERT_EQ(q, 0.0f) << "token " << v << " is outside the draft vocabulary";
      sum += q;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_GT(sampled.probabilities[k * vocab + sampled.tokens[k]], 0.0f);
  }
  EXPECT_FALSE(h.drafter->UseDraftVocabulary({0, 0}).ok()) << "a repeated id";
  EXPECT_FALSE(h.drafter->UseDraftVocabulary({static_cast<int32_t>(vocab)}).ok()) << "an id outside the vocabulary";
}

// A checkpoint that ships its own embed_tokens / lm_head (DeepSpec's released drafters carry frozen
// copies of the target's) drafts with them, needing nothing from the target.
TEST(DSparkDrafter, ShippedEmbeddingAndHeadAreUsed) {
  Fixture f("tiny");
  const test::TempDir tmp("shipped");
  std::filesystem::copy_file(f.dir + "/config.json", tmp.path + "/config.json");
  auto model = test::OpenOrDie(f.dir + "/model.safetensors");
  std::vector<SafetensorsEntry> entries;
  for (const SafetensorTensor& t : model->tensors()) entries.push_back({t.name, t.dtype, t.shape, t.view.data});
  for (const char* name : {"embed_tokens.weight", "lm_head.weight"}) {
    const SafetensorTensor* t = f.target->Find(name);
    entries.push_back({name, t->dtype, t->shape, t->view.data});
  }
  ASSERT_TRUE(WriteSafetensors(tmp.path + "/model.safetensors", entries).ok());
  auto config = LoadDSparkConfig(tmp.path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto weights = LoadDSparkWeights(tmp.path, *config);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  auto own = DSparkDrafter::Create(*config, std::move(*weights), SharedTargetWeights{});
  ASSERT_TRUE(own.ok()) << own.status().ToString();

  const int64_t s = f.num_positions();
  const int32_t g = (*own)->config().block_size;
  DSparkContext a = f.drafter->NewContext(), b = (*own)->NewContext();
  f.drafter->AppendContext(f.feature_row(0), s, a);
  (*own)->AppendContext(f.feature_row(0), s, b);
  std::vector<DSparkDrafter::Block> block_a = {{&a, 9, s, g}}, block_b = {{&b, 9, s, g}};
  f.drafter->ForwardBlocks(block_a);
  (*own)->ForwardBlocks(block_b);
  for (int64_t k = 0; k < g; ++k) {
    const auto x = f.drafter->BaseLogits(0, k), y = (*own)->BaseLogits(0, k);
    ASSERT_TRUE(std::equal(x.begin(), x.end(), y.begin())) << "row " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DSparkDrafterTest, ::testing::Values("tiny", "tiny_gated", "muse_tiny"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace ember::spec::dspark
