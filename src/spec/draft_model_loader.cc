#include "spec/draft_model_loader.h"

#include <fmt/format.h>

#include "spec/vocabulary_check.h"

namespace ember::spec {

Expected<std::unique_ptr<DraftModelProposer>> LoadDraftModelProposer(const std::string& drafter_path,
                                                                     const std::string& target_path,
                                                                     const ModelInfo& target,
                                                                     const DraftModelProposerOptions& options,
                                                                     const LoadOptions& load_options) {
  Expected<std::unique_ptr<CausalLM>> drafter = LoadModel(drafter_path, load_options);
  if (!drafter.ok()) {
    return Status(drafter.status().code(),
                  fmt::format("draft_model: loading {}: {}", drafter_path, drafter.status().message()));
  }
  EMBER_RETURN_IF_ERROR(CheckSameTokenizer(target_path, drafter_path));
  return CreateDraftModelProposer(std::move(*drafter), target, options);
}

}  // namespace ember::spec
