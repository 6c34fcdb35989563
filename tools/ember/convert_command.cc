// ember convert: quantize a bf16 checkpoint's routed experts and write the producer-compatible
// layout (model/convert_checkpoint.h), so that loading skips the conversion.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "model/convert_checkpoint.h"
#include "model/quantized_weights.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"

namespace ember::tools {
namespace {

struct ConvertOptions {
  std::string model;
  std::string out;
  std::string quantization;
};

int RunConvert(const ConvertOptions& o) {
  auto choice = ParseQuantization(o.quantization);
  if (!choice.ok()) return Fail(choice.status());
  const auto start = std::chrono::steady_clock::now();
  auto stats = ConvertCheckpoint(o.model, o.out, choice->format,
                                 StderrProgressBar(fmt::format("quantizing experts to {}", o.quantization)),
                                 choice->mxfp4_rounding);
  if (!stats.ok()) return Fail(stats.status());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %lld expert tensors as %s, tensor bytes %.1f MiB -> %.1f MiB, %.1f s\n", o.out.c_str(),
              static_cast<long long>(stats->tensors_converted), o.quantization.c_str(), stats->bytes_in / 1048576.0,
              stats->bytes_out / 1048576.0, seconds);
  return 0;
}

}  // namespace

void RegisterConvertCommand(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Quantize a bf16 checkpoint's routed experts and write it (ModelOpt NVFP4, Quark-style MXFP4, FP8)");
  cmd->add_option("model", o->model, "bf16 model directory (config.json + *.safetensors)")->required();
  cmd->add_option("out", o->out, "Output directory (new or empty)")->required();
  cmd->add_option("--quantization", o->quantization, "nvfp4, mxfp4 (Quark's default \"even\" scale rounding), mxfp4-floor (OCP MX v1.0 scales) or fp8")
      ->required();
  cmd->callback([o] { SetExitCode(RunConvert(*o)); });
}

}  // namespace ember::tools
