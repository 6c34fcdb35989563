// Helpers shared by the ember subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/expert_placement.h"
#include "model/causal_lm.h"

namespace ember::tools {

// Prints "ember: error: <message>" to stderr and returns the exit status 1 (in a multi-process
// engine it ends every rank: tools/ember/parallel_ranks.h AbortParallelJob).
int Fail(const Status& status);
// "1,2, 3" -> {1, 2, 3}; rejects anything that is not a comma-separated list of non-negative ints.
Expected<std::vector<int32_t>> ParseTokenIds(const std::string& text);
// The help text of --kv-cache-dtype ("auto" is the model's DefaultKvDtype()), shared by the
// commands that take it.
inline constexpr const char* kKvCacheDtypeHelp =
    "KV cache element type: auto (the model's default: f16 for GGUF, bf16 for safetensors), f32, f16, bf16, fp8";

// LoadModel with a startup log line (architecture, weight bytes, ISA, threads, load time).
// `quantization` (a ParseQuantization name: "nvfp4", "mxfp4", "fp8", ...) quantizes a bf16
// checkpoint's experts while loading, with a progress bar on stderr; nullopt (--quantization not
// given) keeps the stored formats. A given but empty value is an error, not "none": the
// commands hold the flag in a std::optional so the two stay apart.
// `quantize_dense` extends it to the decoder layers' dense linears. `expert_placement`
// (--expert-placement) goes to LoadOptions, which checks it against the model.
Expected<std::unique_ptr<CausalLM>> LoadModelWithLog(
    const std::string& model_dir, const std::optional<std::string>& quantization = std::nullopt,
    bool quantize_dense = false, std::shared_ptr<const exec::ExpertPlacement> expert_placement = nullptr);
// --expert-placement FILE on `cmd`, into `path`.
void AddExpertPlacementOption(CLI::App* cmd, std::string* path);
// The placement in `path` (exec/expert_json.h), null for an empty path.
Expected<std::shared_ptr<const exec::ExpertPlacement>> ReadExpertPlacementFlag(const std::string& path);
// The help text of --quantization, shared by the commands that load a model.
inline constexpr const char* kQuantizationHelp =
    "Quantize a bf16 checkpoint's routed experts (dense Llama / Qwen3 / Gemma 3 directories: every decoder-layer "
    "linear) while loading: nvfp4, mxfp4 (scales rounded as Quark's default "
    "\"even\"; mxfp4-floor for the OCP MX v1.0 rule) or fp8 (128x128 blocks); `ember convert` writes the result to "
    "disk (Muse Spark)";
inline constexpr const char* kQuantizeDenseHelp =
    "With --quantization: also quantize the attention, latent-projection and dense-MLP linears, and (ember serve) "
    "the image/video/audio towers' linears (those whose input width the format's block does not divide stay bf16)";
// A progress callback drawing "<what> [#####     ] done/total" on stderr (one line, redrawn).
std::function<void(int64_t, int64_t)> StderrProgressBar(std::string what);

}  // namespace ember::tools
