#include "tools/ember/common.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdio>

#include "core/cpu_features.h"
#include "core/isa.h"
#include "core/logging.h"
#include "core/thread_pool.h"
#include "exec/expert_json.h"
#include "model/quantized_weights.h"
#include "tools/ember/parallel_ranks.h"

namespace ember::tools {

int Fail(const Status& status) {
  std::fprintf(stderr, "ember: error: %s\n", status.message().c_str());
  // The other ranks of a multi-process engine may be waiting for this one in a collective.
  AbortParallelJob(1);
  return 1;
}

Expected<std::vector<int32_t>> ParseTokenIds(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    int64_t value = -1;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || value < 0 || value > INT32_MAX) {
      return InvalidArgument(fmt::format("token ids must be comma-separated non-negative integers; got '{}'", item));
    }
    ids.push_back(static_cast<int32_t>(value));
    pos = end + 1;
  }
  return ids;
}

std::function<void(int64_t, int64_t)> StderrProgressBar(std::string what) {
  return [what = std::move(what)](int64_t done, int64_t total) {
    constexpr int kWidth = 30;
    const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
    std::fprintf(stderr, "\r%s [%s%s] %lld/%lld", what.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), static_cast<long long>(done),
                 static_cast<long long>(total));
    if (done >= total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

void AddExpertPlacementOption(CLI::App* cmd, std::string* path) {
  cmd->add_option("--expert-placement", *path,
                  "MoE models: JSON map of routed experts to expert-parallel ranks (`ember placement` makes one from "
                  "measured counts); checked against the model at startup");
}

Expected<std::shared_ptr<const exec::ExpertPlacement>> ReadExpertPlacementFlag(const std::string& path) {
  if (path.empty()) return std::shared_ptr<const exec::ExpertPlacement>();
  EMBER_ASSIGN_OR_RETURN(exec::ExpertPlacement placement, exec::ReadExpertPlacementFile(path));
  return std::make_shared<const exec::ExpertPlacement>(std::move(placement));
}

Expected<std::unique_ptr<CausalLM>> LoadModelWithLog(const std::string& model_dir,
                                                     const std::optional<std::string>& quantization,
                                                     bool quantize_dense,
                                                     std::shared_ptr<const exec::ExpertPlacement> expert_placement) {
  const auto start = std::chrono::steady_clock::now();
  LoadOptions options;
  options.communicator = ModelCommunicator();
  options.pipeline = ModelPipelineStage();
  options.expert_parallel = ModelExpertParallel();
  options.expert_communicator = ModelExpertCommunicator();
  options.expert_placement = std::move(expert_placement);
  if (quantization) {
    EMBER_ASSIGN_OR_RETURN(const QuantizationChoice choice, ParseQuantization(*quantization));
    options.quantization = choice.format;
    options.mxfp4_rounding = choice.mxfp4_rounding;
    options.progress = StderrProgressBar(fmt::format("quantizing to {}", *quantization));
    options.quantize_dense = quantize_dense;
  } else if (quantize_dense) {
    return InvalidArgument("--quantize-dense needs --quantization nvfp4|mxfp4|fp8");
  }
  auto model = LoadModel(model_dir, options);
  if (!model.ok()) return model.status();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const WeightBytes bytes = (*model)->weight_bytes();
  EMBER_LOG_INFO("loaded {} ({}) in {:.2f} s: weights {:.1f} MiB{}, {:.1f} MiB streamed per decode token", model_dir,
                 (*model)->info().architecture, seconds, bytes.total / 1048576.0,
                 bytes.repacked > 0 ? fmt::format(" (+{:.1f} MiB repacked for the packed GEMMs)", bytes.repacked / 1048576.0)
                                    : std::string(),
                 bytes.per_token_decode / 1048576.0);
  EMBER_LOG_INFO("cpu: {}; kernels: {}; threads: {}", HostCpuFeatures().ToString(),
                 IsaName(ActiveIsa()), ThreadPool::Global().num_threads());
  return model;
}

}  // namespace ember::tools
