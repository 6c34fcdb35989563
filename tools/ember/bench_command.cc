// ember bench --model FILE --pp 512 --tg 128: prompt-processing and generation tokens/s of a real
// model through the engine, measured the way llama-bench does (pp: one step of N prompt tokens
// into an empty cache, logits of the last token only; tg: N single-token steps from an empty
// cache; greedy, so sampling is one argmax per step), so that scripts/bench_vs_llamacpp.py can put
// the two side by side. Rates per wall second and per process CPU-second (steadier on a shared
// machine).
//
// The subcommands roofline, throughput, serve and quant live in tools/ember/bench/.
//
// ember bench decode: batch-1 decode tokens/s of a Muse Spark configuration with random BF16
// weights, printed beside its roofline (weight bytes streamed per token / STREAM triad bandwidth
// measured in the same run).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "core/cpu_features.h"
#include "core/isa.h"
#include "core/logging.h"
#include "core/thread_pool.h"
#include "kernels/cpu/stream.h"
#include "model/arch/muse_spark.h"
#include "model/causal_lm.h"
#include "model/quantized_weights.h"
#include "runner/local_engine.h"
#include "tools/ember/bench/bench_commands.h"
#include "tools/ember/bench/expert_load_report.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"
#include "tools/ember/parallel_ranks.h"
#include "tools/ember/offline_engine.h"

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
  std::optional<std::string> quantization;  // experts quantized while loading (nvfp4, mxfp4, fp8); unset: bf16
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
  LoadOptions load;
  if (o.quantization) {
    auto choice = ParseQuantization(*o.quantization);
    if (!choice.ok()) return Fail(choice.status());
    load.quantization = choice->format;
    load.mxfp4_rounding = choice->mxfp4_rounding;
  }
  auto created = MuseSparkModel::Create(config, weights, QuantScheme{}, load);
  if (!created.ok()) return Fail(created.status());
  const WeightBytes bytes = (*created)->weight_bytes();

  // Prompt, then timed greedy decode steps (batch 1): a request of tokens + 1 outputs, the first
  // of which comes from the untimed prefill step.
  EngineOptions options;
  options.max_num_seqs = 1;
  options.max_model_len = o.prompt + o.tokens + 1;
  options.enable_prefix_caching = false;
  auto engine = LocalEngine::Create(std::move(*created), options);
  if (!engine.ok()) return Fail(engine.status());
  EngineClient& client = (*engine)->client();
  RequestInput input;
  for (int64_t i = 0; i < o.prompt; ++i) input.prompt_token_ids.push_back(static_cast<int32_t>((i * 7919) % o.vocab));
  input.sampling.temperature = 0.0f;
  input.sampling.max_tokens = static_cast<int32_t>(o.tokens + 1);
  input.sampling.ignore_eos = true;
  client.Submit(std::move(input));
  std::vector<double> step_seconds;
  int64_t produced = 0;
  std::string error;
  while (client.HasUnfinished()) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<RequestOutput> outputs = client.Step();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const RequestOutput& out : outputs) {
      // Every step after the one that produced the first token is a timed decode step.
      if (!out.new_token_ids.empty() && produced++ > 0) step_seconds.push_back(seconds);
      if (out.finish_reason == FinishReason::kError) error = out.error;
    }
  }
  if (!error.empty()) return Fail(InvalidArgument(error));
  if (static_cast<int64_t>(step_seconds.size()) != o.tokens) {
    return Fail(Internal(fmt::format("{} decode steps timed, expected {}", step_seconds.size(), o.tokens)));
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
                          {"kernels", std::string(IsaName(ActiveIsa()))},
                          {"experts", o.quantization.value_or("bf16")},
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
  std::printf("Muse Spark decode benchmark (random BF16 weights, experts %s, batch 1, greedy)\n",
              o.quantization.value_or("bf16").c_str());
  std::printf("  config      %lld layers, hidden %lld, %lld experts top-%lld (latent %lld, ffn %lld), vocab %lld\n",
              static_cast<long long>(o.layers), static_cast<long long>(o.hidden), static_cast<long long>(o.experts),
              static_cast<long long>(o.top_k), static_cast<long long>(o.moe_hidden),
              static_cast<long long>(o.moe_intermediate), static_cast<long long>(o.vocab));
  std::printf("  machine     %s; kernels %s; %d threads\n", HostCpuFeatures().ToString().c_str(),
              std::string(IsaName(ActiveIsa())).c_str(), threads);
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

struct ModelBenchOptions {
  std::string model;
  int64_t pp = 512;
  int64_t tg = 128;
  int64_t reps = 5;
  int threads = 0;
  bool json = false;
  parallel::ParallelConfig parallel;  // --tensor-parallel-size, --pipeline-parallel-size
  std::string expert_placement_file;  // --expert-placement
  ExpertLoadFlags expert_load;
};

// Token ids that look like text to nothing in the model: a fixed pseudo-random walk over the
// vocabulary (the speed of a dense model does not depend on which ids it sees).
std::vector<int32_t> BenchTokens(int64_t count, int64_t vocab) {
  std::vector<int32_t> ids(count);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    ids[i] = static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

// Wall-clock and process CPU seconds of one run. On a shared machine the CPU time is the steadier
// measure: a run that is preempted loses wall time but not CPU time (with one thread, tokens per
// CPU-second is the rate the run would have had with the core to itself).
struct RunTime {
  double wall = 0;
  double cpu = 0;
};

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

RunTime Time(const std::function<Status()>& body, Status* status) {
  const double cpu_start = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  *status = body();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          ProcessCpuSeconds() - cpu_start};
}

std::pair<double, double> BestAndMedian(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return {values.back(), n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2])};
}

nlohmann::json RateStats(int64_t tokens, const std::vector<RunTime>& runs) {
  std::vector<double> tps, cpu_tps;
  for (const RunTime& r : runs) {
    tps.push_back(tokens / r.wall);
    cpu_tps.push_back(tokens / r.cpu);
  }
  const auto [best, median] = BestAndMedian(tps);
  const auto [cpu_best, cpu_median] = BestAndMedian(cpu_tps);
  return {{"tokens", tokens},   {"tokens_per_second", tps},          {"best", best},
          {"median", median},   {"tokens_per_cpu_second", cpu_tps}, {"cpu_best", cpu_best},
          {"cpu_median", cpu_median}};
}

int RunModelBench(const ModelBenchOptions& o) {
  int requested_threads = o.threads;
  if (Status s = StartParallel(o.parallel, &requested_threads); !s.ok()) return Fail(s);
  if (requested_threads > 0) ThreadPool::SetGlobalThreads(requested_threads);
  auto placement = ReadExpertPlacementFlag(o.expert_placement_file);
  if (!placement.ok()) return Fail(placement.status());
  auto loaded = LoadModelWithLog(o.model, std::nullopt, false, *placement);
  if (!loaded.ok()) return Fail(loaded.status());
  const int64_t num_layers = (*loaded)->info().num_layers;
  auto layout = ReportLayout(o.expert_load, *placement, (*loaded)->info().num_experts);
  if (!layout.ok()) return Fail(layout.status());
  const std::vector<int32_t> ids = BenchTokens(std::max<int64_t>(o.pp, 1), (*loaded)->info().vocab_size);
  // The KV memory is allocated once, outside the timed runs (as llama.cpp's context is), and
  // with no prefix cache every run starts from an empty one.
  EngineOptions options;
  options.enable_prefix_caching = false;
  options.max_num_batched_tokens = std::max<int64_t>(o.pp, 2048);  // the whole prompt in one step
  options = OneRequestAtATime(options, std::max(o.pp, o.tg) + 1, **loaded);
  auto engine = CreateEngine(std::move(*loaded), options);
  if (!engine.ok()) return Fail(engine.status());
  EngineClient& client = (*engine)->client();
  // One request to the end: `prompt` tokens computed in one step, then max_tokens - 1 decode
  // steps of one token each (the first token comes from the prompt's step).
  auto run = [&](int64_t prompt, int64_t max_tokens) {
    RequestInput input;
    input.prompt_token_ids.assign(ids.begin(), ids.begin() + prompt);
    input.sampling.temperature = 0.0f;
    input.sampling.max_tokens = static_cast<int32_t>(max_tokens);
    input.sampling.ignore_eos = true;
    client.Submit(std::move(input));
    Status status;
    RunUntilDone(client, [&](RequestOutput& out) {
      if (out.finish_reason == FinishReason::kError) status = InvalidArgument(out.error);
    });
    return status;
  };
  // One pp run: the whole prompt in one step into an empty cache, sampled from its last token.
  auto prompt = [&](int64_t count) { return run(count, 1); };
  // One tg run: `count` single-token steps from an empty cache (a one-token prompt, then decodes).
  auto generate = [&](int64_t count) { return run(1, count); };
  // Warm-up (page in the weights, size the scratch buffers), untimed, like llama-bench's.
  Status status;
  if (o.pp > 0) Time([&] { return prompt(o.pp); }, &status);
  if (!status.ok()) return Fail(status);
  if (o.tg > 0) Time([&] { return generate(std::min<int64_t>(o.tg, 4)); }, &status);
  if (!status.ok()) return Fail(status);
  exec::ExpertLoad warm_up_load;  // the expert load below is the timed runs'
  client.ReadExpertLoad(&warm_up_load);
  std::vector<RunTime> pp_seconds, tg_seconds;
  for (int64_t r = 0; r < o.reps; ++r) {
    if (o.pp > 0) pp_seconds.push_back(Time([&] { return prompt(o.pp); }, &status));
    if (!status.ok()) return Fail(status);
    if (o.tg > 0) tg_seconds.push_back(Time([&] { return generate(o.tg); }, &status));
    if (!status.ok()) return Fail(status);
  }
  const int threads = ThreadPool::Global().num_threads();
  nlohmann::json out = {{"model", o.model}, {"threads", threads}, {"reps", o.reps}};
  if (o.pp > 0) out["pp"] = RateStats(o.pp, pp_seconds);
  if (o.tg > 0) out["tg"] = RateStats(o.tg, tg_seconds);
  exec::ExpertLoad load;
  client.ReadExpertLoad(&load);
  nlohmann::ordered_json expert_section;
  const Status added =
      AddExpertLoadSection(o.expert_load, exec::Difference(load, warm_up_load), num_layers, layout->get(), &expert_section);
  if (!added.ok()) return Fail(added);
  if (expert_section.contains("expert_load")) out["expert_load"] = expert_section["expert_load"];
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%s, %d threads, %lld reps\n", o.model.c_str(), threads, static_cast<long long>(o.reps));
  for (const char* test : {"pp", "tg"}) {
    if (!out.contains(test)) continue;
    const nlohmann::json& t = out[test];
    std::printf("  %s%-5lld %9.2f tok/s best, %9.2f tok/s median (per CPU-second: %.2f best, %.2f median)\n",
                test, static_cast<long long>(t["tokens"]), t["best"].get<double>(), t["median"].get<double>(),
                t["cpu_best"].get<double>(), t["cpu_median"].get<double>());
  }
  PrintExpertLoadSection(expert_section);
  return 0;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: --model FILE for pp/tg tokens/s, or a subcommand");
  auto m = std::make_shared<ModelBenchOptions>();
  bench->add_option("--model", m->model, "Model (GGUF file or model directory) for the pp/tg benchmark");
  bench->add_option("--pp", m->pp, "Prompt tokens processed in one call (0: skip)")->check(CLI::NonNegativeNumber);
  bench->add_option("--tg", m->tg, "Tokens generated one at a time (0: skip)")->check(CLI::NonNegativeNumber);
  bench->add_option("--reps", m->reps, "Timed repetitions of each test")->check(CLI::PositiveNumber);
  bench->add_option("--threads", m->threads, "Worker threads (default: all cores)");
  bench->add_flag("--json", m->json, "Print JSON");
  AddParallelOptions(bench, &m->parallel);
  AddExpertPlacementOption(bench, &m->expert_placement_file);
  AddExpertLoadOptions(bench, &m->expert_load);
  bench->require_subcommand(0, 1);
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
  decode->add_option("--quantization", o->quantization, "Experts in nvfp4, mxfp4 or fp8 (default bf16)");
  decode->add_option("--threads", o->threads, "Worker threads (default: all cores)");
  decode->add_flag("--json", o->json, "Print JSON");
  decode->callback([o] { SetExitCode(RunDecodeBench(*o)); });
  RegisterBenchRooflineCommand(bench);
  RegisterBenchThroughputCommand(bench);
  RegisterBenchServeCommand(bench);
  RegisterBenchQuantCommand(bench);
  bench->callback([bench, m] {
    if (!bench->get_subcommands().empty()) return;  // the subcommand ran its own callback
    if (m->model.empty()) {
      SetExitCode(Fail(InvalidArgument("ember bench needs --model FILE (pp/tg benchmark) or a subcommand (roofline, throughput, serve, "
                                    "decode, quant)")));
      return;
    }
    SetExitCode(RunModelBench(*m));
  });
}

}  // namespace ember::tools
