// ember bench decode: batch-1 decode tokens/s of a Muse Spark configuration with random BF16
// weights, printed beside its roofline (weight bytes streamed per token / STREAM triad bandwidth
// measured in the same run).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/cpu_features.h"
#include "core/logging.h"
#include "core/thread_pool.h"
#include "kernels/cpu/stream.h"
#include "kernels/matmul.h"
#include "model/arch/muse_spark.h"
#include "model/sequence.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"

namespace ember::tools {
namespace {

struct DecodeBenchOptions {
  int64_t layers = 8;
  int64_t hidden = 1024;
  int64_t heads = 16;
  int64_t kv_heads = 4;
  int64_t head_dim = 64;
  int64_t experts = 64;
  int64_t top_k = 8;
  int64_t moe_hidden = 1024;
  int64_t moe_intermediate = 1024;
  int64_t vocab = 32768;
  int64_t prompt = 32;
  int64_t tokens = 64;
  int64_t stream_mib = 512;
  int threads = 0;
  bool json = false;
};

MuseSparkConfig MakeConfig(const DecodeBenchOptions& o) {
  MuseSparkConfig c = MuseSparkConfig::MuseSparkOpen();
  c.vocab_size = o.vocab;
  c.hidden_size = o.hidden;
  c.num_hidden_layers = o.layers;
  c.num_attention_heads = o.heads;
  c.num_key_value_heads = o.kv_heads;
  c.head_dim = o.head_dim;
  c.num_local_experts = o.experts;
  c.num_experts_per_tok = o.top_k;
  c.moe_hidden_size = o.moe_hidden;
  c.moe_intermediate_size = o.moe_intermediate;
  c.SetDefaultLayerPattern();
  return c;
}

int RunDecodeBench(const DecodeBenchOptions& o) {
  if (o.threads > 0) ThreadPool::SetGlobalThreads(o.threads);
  const int threads = ThreadPool::Global().num_threads();
  const MuseSparkConfig config = MakeConfig(o);
  auto weights = std::make_shared<RandomWeightSource>(/*seed=*/1, /*stddev=*/0.02f);
  auto created = MuseSparkModel::Create(config, weights);
  if (!created.ok()) return Fail(created.status());
  MuseSparkModel& model = **created;
  const WeightBytes bytes = model.weight_bytes();

  // Prompt, then timed greedy decode steps (batch 1).
  std::vector<int32_t> prompt(o.prompt);
  for (int64_t i = 0; i < o.prompt; ++i) prompt[i] = static_cast<int32_t>((i * 7919) % o.vocab);
  auto sequence = Sequence::Create(&model, o.prompt + o.tokens, model.DefaultKvDtype());
  if (!sequence.ok()) return Fail(sequence.status());
  std::vector<float> logits;
  Status status = sequence->Append(prompt.data(), o.prompt, false, &logits);
  if (!status.ok()) return Fail(status);
  std::vector<double> step_seconds;
  for (int64_t t = 0; t < o.tokens; ++t) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const auto start = std::chrono::steady_clock::now();
    status = sequence->Append(&next, 1, false, &logits);
    if (!status.ok()) return Fail(status);
    step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(step_seconds.begin(), step_seconds.end());
  double total = 0;
  for (double s : step_seconds) total += s;
  const double mean_tps = o.tokens / total;
  const double median_tps = 1.0 / step_seconds[step_seconds.size() / 2];

  const double triad_gbps = kernels::MeasureStreamTriadGBps(o.stream_mib << 20, 5, threads);
  const double roofline_tps = triad_gbps * 1e9 / bytes.per_token_decode;
  if (o.json) {
    nlohmann::json out = {{"config", {{"layers", o.layers}, {"hidden", o.hidden}, {"experts", o.experts},
                                      {"top_k", o.top_k}, {"moe_hidden", o.moe_hidden},
                                      {"moe_intermediate", o.moe_intermediate}, {"vocab", o.vocab}}},
                          {"threads", threads},
                          {"kernels", std::string(kernels::ActiveVariant().name)},
                          {"weight_bytes_total", bytes.total},
                          {"weight_bytes_per_token", bytes.per_token_decode},
                          {"decode_tokens_per_second_mean", mean_tps},
                          {"decode_tokens_per_second_median", median_tps},
                          {"stream_triad_gbps", triad_gbps},
                          {"roofline_tokens_per_second", roofline_tps},
                          {"fraction_of_roofline", mean_tps / roofline_tps}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("Muse Spark decode benchmark (random BF16 weights, batch 1, greedy)\n");
  std::printf("  config      %lld layers, hidden %lld, %lld experts top-%lld (latent %lld, ffn %lld), vocab %lld\n",
              static_cast<long long>(o.layers), static_cast<long long>(o.hidden), static_cast<long long>(o.experts),
              static_cast<long long>(o.top_k), static_cast<long long>(o.moe_hidden),
              static_cast<long long>(o.moe_intermediate), static_cast<long long>(o.vocab));
  std::printf("  machine     %s; kernels %s; %d threads\n", HostCpuFeatures().ToString().c_str(),
              std::string(kernels::ActiveVariant().name).c_str(), threads);
  std::printf("  weights     %.1f MiB total, %.1f MiB streamed per token\n", bytes.total / 1048576.0,
              bytes.per_token_decode / 1048576.0);
  std::printf("  decode      %.2f tok/s mean, %.2f tok/s median over %lld tokens after a %lld-token prompt\n",
              mean_tps, median_tps, static_cast<long long>(o.tokens), static_cast<long long>(o.prompt));
  std::printf("  STREAM      triad %.2f GB/s (%lld MiB arrays, %d threads)\n", triad_gbps,
              static_cast<long long>(o.stream_mib), threads);
  std::printf("  roofline    %.2f tok/s = triad bandwidth / bytes per token\n", roofline_tps);
  std::printf("  ratio       %.2f of roofline\n", mean_tps / roofline_tps);
  return 0;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto o = std::make_shared<DecodeBenchOptions>();
  CLI::App* decode = bench->add_subcommand("decode", "Batch-1 decode tokens/s vs the memory-bandwidth roofline");
  decode->add_option("--layers", o->layers, "Decoder layers")->check(CLI::PositiveNumber);
  decode->add_option("--hidden", o->hidden, "Hidden size")->check(CLI::PositiveNumber);
  decode->add_option("--heads", o->heads, "Query heads")->check(CLI::PositiveNumber);
  decode->add_option("--kv-heads", o->kv_heads, "KV heads")->check(CLI::PositiveNumber);
  decode->add_option("--head-dim", o->head_dim, "Head dimension")->check(CLI::PositiveNumber);
  decode->add_option("--experts", o->experts, "Routed experts")->check(CLI::PositiveNumber);
  decode->add_option("--top-k", o->top_k, "Experts per token")->check(CLI::PositiveNumber);
  decode->add_option("--moe-hidden", o->moe_hidden, "Latent expert width")->check(CLI::PositiveNumber);
  decode->add_option("--moe-intermediate", o->moe_intermediate, "Expert FFN width")->check(CLI::PositiveNumber);
  decode->add_option("--vocab", o->vocab, "Vocabulary size")->check(CLI::PositiveNumber);
  decode->add_option("--prompt", o->prompt, "Prompt tokens before timing")->check(CLI::PositiveNumber);
  decode->add_option("--tokens", o->tokens, "Timed decode tokens")->check(CLI::PositiveNumber);
  decode->add_option("--stream-mib", o->stream_mib, "STREAM array size in MiB (3 arrays)")->check(CLI::PositiveNumber);
  decode->add_option("--threads", o->threads, "Worker threads (default: all cores)");
  decode->add_flag("--json", o->json, "Print JSON");
  decode->callback([o] { SetExitCode(RunDecodeBench(*o)); });
}

}  // namespace ember::tools
