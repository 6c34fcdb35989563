#include "spec/dspark/dspark_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/logging.h"

namespace ember::spec::dspark {
namespace {

// The first `size` ids of the drafter's draft_vocab.json (-1: DefaultDraftVocabSize; 0: none).
Status ApplyDraftVocabulary(DSparkDrafter& drafter, int32_t size) {
  const std::vector<int32_t>& ranked = drafter.config().draft_vocab;
  if (size == 0) return Status::Ok();
  if (ranked.empty()) {
    if (size < 0) return Status::Ok();
    return InvalidArgument(fmt::format("dspark: draft_vocab_size is {} but the drafter ships no draft_vocab.json; "
                                       "leave draft_vocab_size out to draft from the full vocabulary", size));
  }
  const size_t n = size < 0 ? static_cast<size_t>(DefaultDraftVocabSize(drafter.config()))
                            : std::min<size_t>(ranked.size(), static_cast<size_t>(size));
  if (static_cast<int64_t>(n) >= drafter.config().vocab_size) return Status::Ok();
  if (const Status s = drafter.UseDraftVocabulary(std::vector<int32_t>(ranked.begin(), ranked.begin() + n)); !s.ok()) {
    if (size > 0) return s;
    EMBER_LOG_WARN("{}; drafting from the full vocabulary", s.message());
    return Status::Ok();
  }
  const std::optional<double> covered = DraftVocabCoverage(drafter.config(), static_cast<int64_t>(n));
  const std::string coverage = covered ? fmt::format(", {:.1f}% of those answers' tokens", 100.0 * *covered) : "";
  EMBER_LOG_INFO("dspark: drafting from the {} most frequent tokens of the drafter's training answers (of the {} it "
                 "lists{}; vocabulary {}; draft_vocab_size to change it, 0 for the full vocabulary)",
                 n, ranked.size(), coverage, drafter.config().vocab_size);
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<DSparkProposer>> LoadDSparkProposer(const std::string& dir, const CausalLM& target,
                                                             const DSparkProposerOptions& options) {
  const ModelInfo& info = target.info();
  const DSparkTargetInfo target_info{info.architecture, info.hidden_size, info.vocab_size, info.num_layers};
  EMBER_ASSIGN_OR_RETURN(DSparkConfig config, LoadDSparkConfig(dir));
  // The fit first: a drafter for another target is the likeliest mistake, and its message says so
  // better than a tensor shape would.
  EMBER_RETURN_IF_ERROR(CheckFitsTarget(config, target_info));
  EMBER_ASSIGN_OR_RETURN(DSparkWeights weights, LoadDSparkWeights(dir, config));
  SharedTargetWeights shared;
  shared.lm_head = target.lm_head();
  // Probed once, so a target without the accessor fails here with its own message.
  std::vector<float> row(info.hidden_size);
  if (const Status probe = target.DrafterEmbedToken(0, row.data()); probe.ok()) {
    shared.embed = [&target](int32_t token, float* out) { return target.DrafterEmbedToken(token, out); };
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<DSparkDrafter> drafter,
                         DSparkDrafter::Create(std::move(config), std::move(weights), std::move(shared)));
  EMBER_RETURN_IF_ERROR(ApplyDraftVocabulary(*drafter, options.draft_vocab_size));
  if (options.quantize_q8_0) {
    if (const Status s = drafter->QuantizeLinearsQ8_0(); !s.ok()) {
      return InvalidArgument(fmt::format("dspark: \"quantization\": \"q8_0\": {}", s.message()));
    }
    EMBER_LOG_INFO("dspark: the drafter's matmuls quantized to Q8_0");
  }
  TargetFinalNorm final_norm = [&target](const float* x, int64_t rows, float* out) {
    return target.ApplyFinalNorm(x, rows, out);
  };
  return DSparkProposer::Create(std::move(drafter), target_info, std::move(final_norm), options);
}

}  // namespace ember::spec::dspark
