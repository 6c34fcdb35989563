// ember inspect: architecture, layer pattern, parameter census and bytes of a model directory.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "model/causal_lm.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"

namespace ember::tools {
namespace {

std::string Billions(int64_t n) {
  if (n >= 1000000000) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1000000) return fmt::format("{:.2f}M", n / 1e6);
  return fmt::format("{}", n);
}

int RunInspect(const std::string& model_dir, bool json) {
  auto model = LoadModel(model_dir);
  if (!model.ok()) return Fail(model.status());
  const ModelSummary s = (*model)->Summary();
  if (json) {
    nlohmann::json out = {
        {"architecture", s.architecture},
        {"num_layers", s.num_layers},
        {"layer_pattern", s.layer_pattern},
        {"hidden_size", s.hidden_size},
        {"num_attention_heads", s.num_heads},
        {"num_key_value_heads", s.num_kv_heads},
        {"head_dim", s.head_dim},
        {"vocab_size", s.vocab_size},
        {"sliding_window", s.sliding_window},
        {"max_position_embeddings", s.max_position_embeddings},
        {"num_experts", s.num_experts},
        {"experts_per_token", s.experts_per_token},
        {"parameters_total", s.parameters_total},
        {"parameters_active_per_token", s.parameters_active},
        {"parameters_embedding_and_lm_head", s.parameters_embedding},
        {"weight_bytes", s.bytes.total},
        {"weight_bytes_per_decode_token", s.bytes.per_token_decode},
    };
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("model          %s\n", model_dir.c_str());
  std::printf("architecture   %s\n", s.architecture.c_str());
  if (s.sliding_window > 0) {
    std::printf("layers         %lld  pattern %s  (S = sliding window of %lld keys, F = full attention)\n",
                static_cast<long long>(s.num_layers), s.layer_pattern.c_str(),
                static_cast<long long>(s.sliding_window));
  } else {
    std::printf("layers         %lld, all full attention\n", static_cast<long long>(s.num_layers));
  }
  std::printf("attention      hidden %lld, %lld query heads, %lld KV heads, head_dim %lld\n",
              static_cast<long long>(s.hidden_size), static_cast<long long>(s.num_heads),
              static_cast<long long>(s.num_kv_heads), static_cast<long long>(s.head_dim));
  if (s.num_experts > 0) {
    std::printf("experts        %lld routed, top-%lld per token\n", static_cast<long long>(s.num_experts),
                static_cast<long long>(s.experts_per_token));
  }
  std::printf("vocabulary     %lld   max positions %lld\n", static_cast<long long>(s.vocab_size),
              static_cast<long long>(s.max_position_embeddings));
  std::printf("parameters     %s total, %s active per token (excluding %s in embedding + lm_head)\n",
              Billions(s.parameters_total).c_str(), Billions(s.parameters_active).c_str(),
              Billions(s.parameters_embedding).c_str());
  std::printf("weight bytes   %.2f MiB total, %.2f MiB streamed per decode token at batch 1\n",
              s.bytes.total / 1048576.0, s.bytes.per_token_decode / 1048576.0);
  return 0;
}

}  // namespace

void RegisterInspectCommand(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("inspect", "Describe a model: architecture, layers, parameters, bytes");
  cmd->add_option("--model", *model, "Model directory (config.json + *.safetensors) or a .gguf file")->required();
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([model, json] { SetExitCode(RunInspect(*model, *json)); });
}

}  // namespace ember::tools
