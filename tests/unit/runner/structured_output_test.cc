// Structured outputs through the whole engine (scheduler, runner masks, sampler): every output of
// a constrained request follows its grammar, checked by a reference written elsewhere (std::regex,
// nlohmann's JSON parser); unconstrained requests in the same batches are bitwise what they are
// without any constrained neighbour; speculative decoding leaves constrained requests alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <random>
#include <regex>

#include <nlohmann/json.hpp>

#include "runner/constraint_masks.h"
#include "structured/compiler.h"
#include "support/engine_run.h"
#include "tokenizer/model_tokenizer.h"
#include "unit/runner/local_engine_support.h"

namespace ember {
namespace {

TEST(ApplyTokenBitmask, MasksExactlyTheClearedBits) {
  std::mt19937 rng(7);
  for (int vocab : {1, 31, 32, 33, 100, 1000}) {
    std::vector<uint32_t> mask((vocab + 31) / 32);
    for (uint32_t& w : mask) w = rng() | (rng() % 3 == 0 ? 0xffffffffu : 0u);
    std::vector<float> logits(vocab);
    for (int t = 0; t < vocab; ++t) logits[t] = static_cast<float>(t) * 0.5f - 3.0f;
    std::vector<float> want = logits;
    for (int t = 0; t < vocab; ++t) {
      if (!((mask[t / 32] >> (t % 32)) & 1u)) want[t] = -std::numeric_limits<float>::infinity();
    }
    ApplyTokenBitmask(mask, logits);
    EXPECT_EQ(logits, want) << vocab;
  }
}

// The tiny Muse Spark model has no tokenizer: its ids get a synthetic text, lower-case letters
// and digits and a few multi-character pieces, EOS ids none.
std::vector<std::string> SyntheticVocabulary(int64_t vocab, const std::vector<int32_t>& eos) {
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-";
  std::vector<std::string> v(static_cast<size_t>(vocab));
  for (int64_t t = 0; t < vocab; ++t) {
    v[t] = t % 7 == 3 ? alphabet.substr(t % 30, 2) : std::string(1, alphabet[t % alphabet.size()]);
  }
  for (int32_t id : eos) v[id].clear();
  return v;
}

std::string Text(const std::vector<std::string>& vocab, const std::vector<int32_t>& ids, const std::vector<int32_t>& eos) {
  std::string s;
  for (int32_t id : ids) {
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) s += vocab[id];
  }
  return s;
}

// Ends a request the way the server does: the first EOS id as its EOS, the others as stop tokens.
void StopsLikeTheServer(const std::vector<int32_t>& eos, RequestInput* in) {
  in->eos_token_id = eos.empty() ? -1 : eos[0];
  for (size_t i = 1; i < eos.size(); ++i) in->sampling.stop_token_ids.push_back(eos[i]);
}

std::vector<RequestInput> Mixed(int32_t vocab, const std::vector<int32_t>& eos,
                                const std::shared_ptr<const TokenConstraint>& constraint, bool with_constrained) {
  std::vector<RequestInput> inputs;
  std::mt19937 rng(3);
  for (int i = 0; i < 6; ++i) {
    RequestInput in;
    for (int k = 0; k < 9 + 3 * i; ++k) in.prompt_token_ids.push_back(static_cast<int32_t>(rng() % (vocab - 1)) + 1);
    in.sampling.max_tokens = 24;
    in.sampling.logprobs = 2;
    if (i % 2 == 1) {
      in.sampling.temperature = 1.0f;
      in.sampling.seed = 50 + i;
    }
    const bool constrained = i % 3 != 0;
    if (constrained) {
      if (!with_constrained) continue;
      in.sampling.constraint = constraint;
      StopsLikeTheServer(eos, &in);
    } else {
      in.sampling.ignore_eos = true;
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

TEST(StructuredOutput, TinyModelFollowsRegexAndLeavesOthersAlone) {
  const std::string pattern = "[a-f]{2,5}-[0-9]{1,3}";
  for (const char* spec : {"", R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":1,"adaptive":false})"}) {
    SCOPED_TRACE(spec);
    EngineOptions o = test::SmallChunkedEngine();
    o.speculative_config = spec;
    auto engine = test::MakeEngine(test::kTinyMuseA, o);
    ASSERT_NE(engine, nullptr);
    const int32_t vocab = static_cast<int32_t>(engine->model().info().vocab_size);
    // The tiny model's config names no EOS its vocabulary has: its last id plays that part.
    const std::vector<int32_t> eos =
        engine->eos_token_ids().empty() ? std::vector<int32_t>{vocab - 1} : engine->eos_token_ids();
    const std::vector<std::string> words = SyntheticVocabulary(vocab, eos);
    structured::ConstraintCompiler compiler(words, eos);
    structured::ConstraintSpec regex;
    regex.kind = structured::ConstraintSpec::Kind::kRegex;
    regex.text = pattern;
    auto constraint = compiler.Compile(regex);
    ASSERT_TRUE(constraint.ok()) << constraint.status().message();

    const std::vector<RequestInput> mixed = Mixed(vocab, eos, *constraint, true);
    const auto results = test::RunToCompletion(engine->core(), mixed);
    const std::regex re(pattern);
    int constrained = 0;
    for (size_t i = 0; i < mixed.size(); ++i) {
      if (mixed[i].sampling.constraint == nullptr) continue;
      ++constrained;
      const test::RunResult& r = results.at(i);
      const std::string text = Text(words, r.tokens, eos);
      EXPECT_TRUE(std::regex_match(text, re)) << "request " << i << ": '" << text << "'";
      EXPECT_EQ(r.reason, FinishReason::kStop) << "request " << i << ": '" << text << "'";
      // Logprobs describe the masked logits: a token outside the grammar has none.
      for (const TokenLogprobs& lp : r.logprobs) EXPECT_GT(lp.logprob, -std::numeric_limits<float>::infinity());
    }
    EXPECT_EQ(constrained, 4);

    // The unconstrained requests are bitwise what they are alone.
    auto alone_engine = test::MakeEngine(test::kTinyMuseA, o);
    ASSERT_NE(alone_engine, nullptr);
    const std::vector<RequestInput> alone = Mixed(vocab, eos, nullptr, false);
    const auto alone_results = test::RunToCompletion(alone_engine->core(), alone);
    size_t k = 0;
    for (size_t i = 0; i < mixed.size(); ++i) {
      if (mixed[i].sampling.constraint != nullptr) continue;
      test::ExpectBitwiseEqual(alone_results.at(k++), results.at(i), "unconstrained request " + std::to_string(i));
    }
  }
}

// The real SmolLM2 with its own tokenizer: a JSON schema's outputs parse and follow it.
TEST(StructuredOutput, SmolLM2JsonSchema) {
  const std::string path = test::CachedModel("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::ifstream(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch_models.py)";
  EngineOptions o = test::SmallChunkedEngine();
  o.kv_cache_dtype = "auto";
  auto engine = test::MakeEngine(path, o);
  ASSERT_NE(engine, nullptr);
  auto tokenizer = LoadModelTokenizer(path);
  ASSERT_TRUE(tokenizer.ok());
  const int64_t vocab = engine->model().info().vocab_size;
  structured::ConstraintCompiler compiler(structured::TokenBytes(**tokenizer, vocab), engine->eos_token_ids());
  structured::ConstraintSpec spec;
  spec.kind = structured::ConstraintSpec::Kind::kJsonSchema;
  spec.text = R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                  "population": {"type": "integer", "minimum": 0, "maximum": 100000000}},
                  "required": ["city", "population"], "additionalProperties": false})";
  auto constraint = compiler.Compile(spec);
  ASSERT_TRUE(constraint.ok()) << constraint.status().message();
  std::vector<RequestInput> inputs;
  for (int i = 0; i < 4; ++i) {
    RequestInput in;
    in.prompt_token_ids = (*tokenizer)->Encode("The largest city in France, as JSON:", false, false);
    in.sampling.max_tokens = 64;
    in.sampling.temperature = i == 0 ? 0.0f : 1.0f;
    in.sampling.seed = 7 + i;
    in.sampling.constraint = *constraint;
    StopsLikeTheServer(engine->eos_token_ids(), &in);
    inputs.push_back(std::move(in));
  }
  const auto results = test::RunToCompletion(engine->core(), inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string text = (*tokenizer)->Decode(results.at(i).tokens, /*skip_special=*/true);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_EQ(j.size(), 2u) << text;
    EXPECT_TRUE(j["city"].is_string()) << text;
    EXPECT_TRUE(j["population"].is_number_integer()) << text;
    EXPECT_EQ(results.at(i).reason, FinishReason::kStop) << text;
  }
}

}  // namespace
}  // namespace ember
