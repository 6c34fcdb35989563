// The draft-model proposer against the drafter's own greedy continuation (computed independently
// through tests/support/single_sequence.h), across batching, chunking and rollback, and its
// failure modes: a foreign vocabulary, an exhausted KV pool.
//
// Most cases run the Muse Spark tiny fixtures (tests/golden/muse_spark: vocab 512, sliding
// window 16 beside full attention, so two KV groups), which are always present and take
// milliseconds; the real GGUF models join when scripts/fetch_models.py has fetched them.
#include "spec/draft_model_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/check.h"
#include "spec/draft_model_loader.h"
#include "spec/vocabulary_check.h"
#include "support/single_sequence.h"
#include "support/source_dir.h"

namespace ember::spec {
namespace {

std::string MuseDir(const char* name) { return std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/" + name; }

// Same rule as scripts/fetch_models.py: $EMBER_MODEL_CACHE, else ~/.cache/ember/models.
std::string ModelCache() {
  const char* cache = std::getenv("EMBER_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  return cache && *cache ? cache : std::string(home ? home : "/") + "/.cache/ember/models";
}

std::unique_ptr<CausalLM> LoadOrDie(const std::string& path) {
  auto model = LoadModel(path);
  EMBER_CHECK(model.ok(), "{}", model.status().ToString());
  return std::move(*model);
}

DraftModelProposerOptions SmallOptions() {
  DraftModelProposerOptions o;
  o.num_speculative_tokens = 4;
  o.max_num_seqs = 4;
  o.max_model_len = 128;
  return o;
}

std::unique_ptr<DraftModelProposer> CreateOrDie(const std::string& path, const DraftModelProposerOptions& o) {
  std::unique_ptr<CausalLM> drafter = LoadOrDie(path);
  const ModelInfo target = drafter->info();
  auto proposer = CreateDraftModelProposer(std::move(drafter), target, o);
  EMBER_CHECK(proposer.ok(), "{}", proposer.status().ToString());
  return std::move(*proposer);
}

// Deterministic pseudo-random tokens, avoiding the lowest ids (specials in the real models).
std::vector<int32_t> Prompt(int64_t length, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> tokens(length);
  uint32_t x = seed * 2654435761u + 1;
  for (int32_t& t : tokens) {
    x = x * 1664525u + 1013904223u;
    t = static_cast<int32_t>(4 + (x >> 8) % (vocab - 4));
  }
  return tokens;
}

// The model's greedy continuation of `tokens`, one sequence alone, one token per step after the
// prompt: what the proposer must draft. Its own argmax (std::max_element: the first maximum).
std::vector<int32_t> GreedyContinuation(CausalLM& model, const std::vector<int32_t>& tokens, int count) {
  auto seq = test::SingleSequence::Create(&model, static_cast<int64_t>(tokens.size()) + count, model.DefaultKvDtype());
  EMBER_CHECK(seq.ok(), "{}", seq.status().ToString());
  std::vector<float> logits;
  EMBER_CHECK(seq->Append(tokens.data(), static_cast<int64_t>(tokens.size()), false, &logits).ok());
  std::vector<int32_t> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    if (i + 1 < count) EMBER_CHECK(seq->Append(&out.back(), 1, false, &logits).ok());
  }
  return out;
}

// One Propose call over `requests` (id i+1 for requests[i]), each asking for `max_tokens[i]`.
std::vector<Draft> ProposeAll(Proposer& proposer, const std::vector<std::vector<int32_t>>& requests,
                              const std::vector<int32_t>& max_tokens, RequestId first_id = 1) {
  std::vector<ProposalInput> inputs(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    inputs[i].req = first_id + i;
    inputs[i].tokens = requests[i];
    inputs[i].num_prompt_tokens = static_cast<int64_t>(requests[i].size());
    inputs[i].max_tokens = max_tokens[i];
  }
  std::vector<Draft> drafts(requests.size());
  proposer.Propose(inputs, drafts);
  return drafts;
}

void ExpectConfidences(const Draft& draft) {
  ASSERT_EQ(draft.confidences.size(), draft.tokens.size());
  for (float c : draft.confidences) {
    EXPECT_GT(c, 0.0f);
    EXPECT_LE(c, 1.0f);
  }
}

TEST(DraftModelGreedy, TiesGoToTheLowestIdAndConfidenceIsTheSoftmax) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f};
  EXPECT_EQ(GreedyToken(logits), 1);
  const std::vector<float> none(3, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(GreedyToken(none), 0);
  const std::vector<float> two = {0.0f, std::log(3.0f)};
  EXPECT_FLOAT_EQ(SoftmaxProbability(two, 1), 0.75f);
}

// (a) The drafter drafting for itself: its drafts are its greedy continuation, for several
// requests batched together that ask for different numbers of tokens (prompts crossing block
// boundaries and the sliding window).
void ExpectDraftsAreGreedyContinuations(const std::string& path, int64_t max_num_batched_tokens) {
  DraftModelProposerOptions o = SmallOptions();
  o.max_num_batched_tokens = max_num_batched_tokens;
  std::unique_ptr<DraftModelProposer> proposer = CreateOrDie(path, o);
  std::unique_ptr<CausalLM> reference = LoadOrDie(path);
  const int64_t vocab = reference->info().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {Prompt(5, vocab, 1), Prompt(23, vocab, 2), Prompt(40, vocab, 3),
                                                     Prompt(1, vocab, 4)};
  const std::vector<int32_t> max_tokens = {4, 3, 1, 9};  // 9 is capped to num_speculative_tokens
  const std::vector<Draft> drafts = ProposeAll(*proposer, prompts, max_tokens);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    const int count = std::min(max_tokens[i], o.num_speculative_tokens);
    EXPECT_EQ(drafts[i].tokens, GreedyContinuation(*reference, prompts[i], count));
    ExpectConfidences(drafts[i]);
  }
}

TEST(DraftModelProposer, DraftsAreTheDraftersGreedyContinuation) {
  ExpectDraftsAreGreedyContinuations(MuseDir("tiny_a"), 2048);
}

// A prefill longer than the step limit is chunked over several forwards (and a batch of more
// requests than max_num_seqs split into several batches) without changing a draft.
TEST(DraftModelProposer, ChunkedCatchUpDraftsTheSame) {
  ExpectDraftsAreGreedyContinuations(MuseDir("tiny_a"), 7);
  DraftModelProposerOptions one_at_a_time = SmallOptions();
  one_at_a_time.max_num_seqs = 1;
  one_at_a_time.max_num_batched_tokens = 16;
  std::unique_ptr<DraftModelProposer> a = CreateOrDie(MuseDir("tiny_a"), SmallOptions());
  std::unique_ptr<DraftModelProposer> b = CreateOrDie(MuseDir("tiny_a"), one_at_a_time);
  const std::vector<std::vector<int32_t>> prompts = {Prompt(30, 512, 7), Prompt(3, 512, 8), Prompt(17, 512, 9)};
  const std::vector<Draft> da = ProposeAll(*a, prompts, {4, 4, 2});
  const std::vector<Draft> db = ProposeAll(*b, prompts, {4, 4, 2});
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(da[i].tokens, db[i].tokens);
    EXPECT_EQ(da[i].confidences, db[i].confidences);  // bitwise: the forward is chunk-invariant
  }
}

TEST(DraftModelProposer, RealGgufModelsDraftTheirGreedyContinuation) {
  int ran = 0;
  for (const char* name : {"SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"}) {
    const std::string path = ModelCache() + "/" + name;
    if (!std::ifstream(path).good()) continue;
    SCOPED_TRACE(name);
    ExpectDraftsAreGreedyContinuations(path, 2048);
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no model in " << ModelCache() << " (scripts/fetch_models.py)";
}

// (b) After verification kept some drafts and the target appended its own token (and, for some
// requests, more tokens of steps without a proposal), the proposer rewinds to what it shares with
// the new tokens; its next drafts are bitwise those of a proposer that never saw the rejected
// drafts.
TEST(DraftModelProposer, RollbackAfterPartialAcceptanceMatchesAFreshProposer) {
  std::unique_ptr<DraftModelProposer> proposer = CreateOrDie(MuseDir("tiny_a"), SmallOptions());
  const int64_t vocab = proposer->drafter().info().vocab_size;
  std::vector<std::vector<int32_t>> requests = {Prompt(9, vocab, 11), Prompt(20, vocab, 12), Prompt(14, vocab, 13),
                                                Prompt(31, vocab, 14)};
  const std::vector<int32_t> max_tokens = {4, 4, 4, 3};
  std::vector<Draft> drafts = ProposeAll(*proposer, requests, max_tokens);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    // Request i keeps the first `accepted[i]` drafts, then the target's token: a different one
    // where it rejected a draft, any bonus token where it kept all.
    const std::vector<size_t> accepted = {2, 4, 0, 1};
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::vector<int32_t>& d = drafts[i].tokens;
      ASSERT_FALSE(d.empty());
      const size_t keep = std::min(accepted[(i + round) % accepted.size()], d.size());
      requests[i].insert(requests[i].end(), d.begin(), d.begin() + keep);
      const int32_t target_token = keep < d.size() ? (d[keep] + 1 + round) % vocab : (7 * round + 5) % vocab;
      requests[i].push_back(target_token);
      // Some requests also ran steps without a proposal (the tokens diverge before their end).
      if ((i + round) % 2 == 0) requests[i].insert(requests[i].end(), {(target_token + 3) % 512, 42});
      proposer->OnVerified(i + 1, static_cast<int32_t>(d.size()), static_cast<int32_t>(keep));
    }
    drafts = ProposeAll(*proposer, requests, max_tokens);
    std::unique_ptr<DraftModelProposer> fresh = CreateOrDie(MuseDir("tiny_a"), SmallOptions());
    const std::vector<Draft> expected = ProposeAll(*fresh, requests, max_tokens);
    for (size_t i = 0; i < requests.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(drafts[i].tokens, expected[i].tokens);
      EXPECT_EQ(drafts[i].confidences, expected[i].confidences);
    }
  }
  // The same tokens again (a step that verified nothing): the same drafts, the last token recomputed.
  const std::vector<Draft> again = ProposeAll(*proposer, requests, max_tokens);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(again[i].tokens, drafts[i].tokens);
}

// (c) A drafter whose vocabulary is not the target's is refused, naming both sizes.
TEST(DraftModelProposer, RejectsADrafterWithAnotherVocabulary) {
  std::unique_ptr<CausalLM> target = LoadOrDie(MuseDir("tiny_b"));
  auto proposer = CreateDraftModelProposer(LoadOrDie(MuseDir("tiny_a")), target->info(), SmallOptions());
  ASSERT_FALSE(proposer.ok());
  const std::string& message = proposer.status().message();
  EXPECT_NE(message.find("vocab_size 512"), std::string::npos) << message;
  EXPECT_NE(message.find("vocab_size 1000"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer"), std::string::npos) << message;

  auto loaded = LoadDraftModelProposer(MuseDir("tiny_b"), MuseDir("tiny_a"), LoadOrDie(MuseDir("tiny_a"))->info(),
                                       SmallOptions());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("vocab_size 1000"), std::string::npos) << loaded.status().message();
}

TEST(DraftModelProposer, RejectsBadOptions) {
  std::unique_ptr<CausalLM> target = LoadOrDie(MuseDir("tiny_a"));
  DraftModelProposerOptions o = SmallOptions();
  o.num_speculative_tokens = 0;
  auto proposer = CreateDraftModelProposer(LoadOrDie(MuseDir("tiny_a")), target->info(), o);
  ASSERT_FALSE(proposer.ok());
  EXPECT_NE(proposer.status().message().find("num_speculative_tokens"), std::string::npos);
  o = SmallOptions();
  o.max_model_len = target->info().max_position_embeddings + 1;
  proposer = CreateDraftModelProposer(LoadOrDie(MuseDir("tiny_a")), target->info(), o);
  ASSERT_FALSE(proposer.ok());
  EXPECT_NE(proposer.status().message().find("max_model_len"), std::string::npos);
}

// (c) A pool too small for every request: the ones that find it empty get no draft (no crash);
// OnReleased returns a request's blocks, and a released request is drafted again from scratch.
TEST(DraftModelProposer, PoolExhaustionGivesNoDraftAndReleaseFreesBlocks) {
  std::unique_ptr<CausalLM> probe = LoadOrDie(MuseDir("tiny_a"));
  auto config = kv::PlanKvGroups(probe->KvLayerSpecs(), 16, probe->DefaultKvDtype());
  ASSERT_TRUE(config.ok());
  const int64_t groups = static_cast<int64_t>(config->groups.size());
  // 20 prompt tokens + 3 computed drafts = 23 positions: 2 blocks per group for one request.
  DraftModelProposerOptions o = SmallOptions();
  o.kv_cache_memory_bytes = (1 + 2 * groups) * config->BytesPerBlock();
  std::unique_ptr<DraftModelProposer> proposer = CreateOrDie(MuseDir("tiny_a"), o);
  ASSERT_EQ(proposer->num_free_blocks(), 2 * groups);

  const std::vector<std::vector<int32_t>> prompts = {Prompt(20, 512, 21), Prompt(20, 512, 22)};
  std::vector<Draft> drafts = ProposeAll(*proposer, prompts, {4, 4});
  EXPECT_EQ(drafts[0].tokens, GreedyContinuation(*probe, prompts[0], 4));
  EXPECT_TRUE(drafts[1].tokens.empty());
  EXPECT_TRUE(drafts[1].confidences.empty());
  EXPECT_EQ(proposer->num_free_blocks(), 0);
  EXPECT_EQ(proposer->num_tracked_requests(), 1);

  // Too long for max_model_len: no draft either, nothing held.
  const std::vector<Draft> too_long = ProposeAll(*proposer, {Prompt(o.max_model_len + 1, 512, 23)}, {4}, 9);
  EXPECT_TRUE(too_long[0].tokens.empty());

  proposer->OnReleased(1, prompts[0], 20, /*completed=*/false);
  EXPECT_EQ(proposer->num_free_blocks(), 2 * groups);
  EXPECT_EQ(proposer->num_tracked_requests(), 0);
  drafts = ProposeAll(*proposer, {prompts[1]}, {4}, 2);
  EXPECT_EQ(drafts[0].tokens, GreedyContinuation(*probe, prompts[1], 4));
  proposer->OnReleased(2, prompts[1], 20, /*completed=*/true);
  drafts = ProposeAll(*proposer, {prompts[0]}, {4}, 1);
  EXPECT_EQ(drafts[0].tokens, GreedyContinuation(*probe, prompts[0], 4));
}

TokenizerSpec Vocabulary(std::vector<std::string> tokens) {
  TokenizerSpec spec;
  spec.tokens = std::move(tokens);
  spec.bos_id = 0;
  spec.eos_id = 1;
  return spec;
}

TEST(DraftModelVocabulary, NamesTheFirstDifferingId) {
  const TokenizerSpec target = Vocabulary({"<s>", "</s>", "a", "b", "c"});
  EXPECT_TRUE(CheckSameVocabulary(target, target).ok());

  Status s = CheckSameVocabulary(target, Vocabulary({"<s>", "</s>", "a", "x", "c"}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("token id 3 (target 'b', drafter 'x'"), std::string::npos) << s.message();

  s = CheckSameVocabulary(target, Vocabulary({"<s>", "</s>", "a", "b"}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("token id 4 (target 'c', drafter no token"), std::string::npos) << s.message();

  TokenizerSpec other_eos = target;
  other_eos.eos_id = 4;
  s = CheckSameVocabulary(target, other_eos);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("EOS"), std::string::npos) << s.message();
}

TEST(DraftModelVocabulary, ComparesTheTokenizersOfModelPaths) {
  // The fixtures carry no tokenizer: nothing to compare.
  EXPECT_TRUE(CheckSameTokenizer(MuseDir("tiny_a"), MuseDir("tiny_b")).ok());
  const std::string smollm = ModelCache() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  const std::string gemma = ModelCache() + "/gemma-3-270m-q4_k_m.gguf";
  if (!std::ifstream(smollm).good() || !std::ifstream(gemma).good()) {
    GTEST_SKIP() << "SmolLM2 and Gemma 3 270M not in " << ModelCache() << " (scripts/fetch_models.py)";
  }
  EXPECT_TRUE(CheckSameTokenizer(smollm, smollm).ok());
  const Status differ = CheckSameTokenizer(smollm, gemma);
  ASSERT_FALSE(differ.ok());
  EXPECT_NE(differ.message().find("token id"), std::string::npos) << differ.message();
  const Status one_sided = CheckSameTokenizer(smollm, MuseDir("tiny_a"));
  ASSERT_FALSE(one_sided.ok());
  EXPECT_NE(one_sided.message().find("only the target"), std::string::npos) << one_sided.message();
}

TEST(DraftModelLoader, LoadsADrafterFromItsPath) {
  std::unique_ptr<CausalLM> target = LoadOrDie(MuseDir("tiny_a"));
  auto proposer = LoadDraftModelProposer(MuseDir("tiny_a"), MuseDir("tiny_a"), target->info(), SmallOptions());
  ASSERT_TRUE(proposer.ok()) << proposer.status().ToString();
  EXPECT_EQ((*proposer)->name(), "draft_model");
  const std::vector<int32_t> prompt = Prompt(12, 512, 31);
  const std::vector<Draft> drafts = ProposeAll(**proposer, {prompt}, {3});
  EXPECT_EQ(drafts[0].tokens, GreedyContinuation(*target, prompt, 3));

  auto missing = LoadDraftModelProposer("/nonexistent/draft.gguf", MuseDir("tiny_a"), target->info(), SmallOptions());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/draft.gguf"), std::string::npos);
}

}  // namespace
}  // namespace ember::spec
