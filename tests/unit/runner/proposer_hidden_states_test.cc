// The runner hands a proposer that asks for target hidden states (DSpark's seam) the rows of every
// position each step verified: prompt chunks, the last token and accepted drafts, never rejected
// drafts; each position once, in order, bitwise the hidden states of the final sequence computed
// in one pass.
#include <gtest/gtest.h>

#include <map>

#include "model/causal_lm.h"
#include "runner/local_engine.h"
#include "spec/ngram_proposer.h"
#include "support/engine_run.h"
#include "support/single_sequence.h"
#include "support/source_dir.h"

namespace ember {
namespace {

const std::string kTinyA = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";

// Drafts with prompt lookup (some accepted, most rejected on a random-weight model, and all the
// more rollback to check) and records every hidden-state row it is shown.
class RecordingProposer final : public spec::Proposer {
 public:
  explicit RecordingProposer(std::vector<int32_t> layers) : layers_(std::move(layers)), lookup_(1, 3) {}
  std::string_view name() const override { return "recording"; }
  std::span<const int32_t> TargetHiddenStateLayers() const override { return layers_; }
  void ObserveTargetHiddenStates(spec::RequestId req, const spec::TargetHiddenStates& states) override {
    auto& rows = rows_[req];
    EXPECT_EQ(states.first_position, static_cast<int64_t>(rows.size())) << "request " << req << ": a gap or a repeat";
    for (int64_t i = 0; i < states.num_rows; ++i) {
      std::vector<float> row;
      for (size_t t = 0; t < layers_.size(); ++t) {
        const std::span<const float> r = states.Row(t, i);
        row.insert(row.end(), r.begin(), r.end());
      }
      rows.push_back(std::move(row));
    }
  }
  void Propose(std::span<const spec::ProposalInput> inputs, std::span<spec::Draft> drafts) override {
    lookup_.Propose(inputs, drafts);
    // Random-weight outputs rarely repeat: add a draft of the last token so something is verified.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (drafts[i].tokens.empty()) drafts[i].tokens.push_back(inputs[i].tokens.back());
    }
  }
  void OnReleased(spec::RequestId req, std::span<const int32_t>, int64_t, bool completed) override {
    if (!completed) rows_.erase(req);  // a preempted request is shown again from position 0
  }
  const std::vector<std::vector<float>>& rows(spec::RequestId req) { return rows_[req]; }

 private:
  std::vector<int32_t> layers_;
  spec::NgramProposer lookup_;
  std::map<spec::RequestId, std::vector<std::vector<float>>> rows_;
};

TEST(ProposerHiddenStates, EveryVerifiedPositionOnceInOrderBitwise) {
  const std::vector<int32_t> layers = {0, 2};
  auto model = LoadModel(kTinyA);
  ASSERT_TRUE(model.ok());
  EngineOptions o;
  o.kv_cache_dtype = "f32";
  o.max_model_len = 128;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 16;  // prompts in several chunks
  o.kv_cache_memory_bytes = 16 << 20;
  o.speculative_config = R"({"method":"ngram","num_speculative_tokens":3,"adaptive":false})";
  auto engine = LocalEngine::Create(std::move(*model), o);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  auto owned = std::make_unique<RecordingProposer>(layers);
  RecordingProposer* recorder = owned.get();
  (*engine)->runner().set_proposer(std::move(owned));

  std::vector<RequestInput> inputs;
  for (int i = 0; i < 3; ++i) {
    RequestInput in;
    for (int t = 0; t < 20 + 7 * i; ++t) in.prompt_token_ids.push_back(1 + (t * 37 + i * 11) % 97 % (10 + i));
    in.sampling.max_tokens = 12;
    in.sampling.ignore_eos = true;
    inputs.push_back(std::move(in));
  }
  const auto results = test::RunToCompletion((*engine)->core(), inputs);
  EXPECT_GT((*engine)->core().Stats().spec_decode.num_draft_tokens, 0);

  auto reference_model = LoadModel(kTinyA);
  ASSERT_TRUE(reference_model.ok());
  for (size_t r = 0; r < inputs.size(); ++r) {
    std::vector<int32_t> sequence = inputs[r].prompt_token_ids;
    const std::vector<int32_t>& out = results.at(r).tokens;
    sequence.insert(sequence.end(), out.begin(), out.end() - 1);  // the last token is never computed
    auto single = test::SingleSequence::Create(reference_model->get(), 128, kv::KvDtype::kF32);
    ASSERT_TRUE(single.ok());
    single->set_hidden_state_layers(layers);
    std::vector<float> logits;
    ASSERT_TRUE(single->Append(sequence.data(), static_cast<int64_t>(sequence.size()), false, &logits).ok());
    const int64_t hidden = (*reference_model)->info().hidden_size;
    const int64_t n = static_cast<int64_t>(sequence.size());
    const auto& rows = recorder->rows(r);
    ASSERT_EQ(static_cast<int64_t>(rows.size()), n) << "request " << r;
    for (int64_t p = 0; p < n; ++p) {
      for (size_t t = 0; t < layers.size(); ++t) {
        const float* want = single->hidden_states().data() + (static_cast<int64_t>(t) * n + p) * hidden;
        ASSERT_TRUE(std::equal(want, want + hidden, rows[p].begin() + static_cast<int64_t>(t) * hidden))
            << "request " << r << " position " << p << " tap " << t;
      }
    }
  }
}

}  // namespace
}  // namespace ember
