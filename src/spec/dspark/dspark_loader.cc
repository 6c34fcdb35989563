#include "spec/dspark/dspark_loader.h"

#include <fmt/format.h>

#include <vector>

namespace ember::spec::dspark {

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
  TargetFinalNorm final_norm = [&target](const float* x, int64_t rows, float* out) {
    return target.ApplyFinalNorm(x, rows, out);
  };
  return DSparkProposer::Create(std::move(drafter), target_info, std::move(final_norm), options);
}

}  // namespace ember::spec::dspark
