// ember bench throughput MODEL: offline throughput through the LocalEngine, like `vllm bench
// throughput`. Every prompt is added at once and the engine core is stepped until all finish
// (continuous batching under --max-num-seqs / --max-num-batched-tokens), so the numbers are what
// the engine sustains with a full queue, without HTTP or tokenization in the timed part.
//
// Prompts are random token ids (--input-len, --output-len, --num-prompts, --range-ratio; seeded
// by --seed) or a JSONL file (--dataset) whose lines carry "prompt" (text, or token ids) and
// "output_len" or "max_tokens". Every request uses temperature 1 and ignore_eos, so it produces
// exactly its output length.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/logging.h"
#include "core/thread_pool.h"
#include "tokenizer/model_tokenizer.h"
#include "tools/ember/bench/bench_commands.h"
#include "tools/ember/bench/expert_load_report.h"
#include "tools/ember/bench/serve_dataset.h"
#include "tools/ember/commands.h"
#include "tools/ember/parallel_ranks.h"
#include "tools/ember/common.h"
#include "tools/ember/engine_options.h"
#include "tools/ember/offline_engine.h"

namespace ember::tools {
namespace {

struct ThroughputOptions {
  std::string model;
  std::string dataset;  // JSONL file; empty: synthetic
  int64_t input_len = 128;
  int64_t output_len = 64;
  int64_t num_prompts = 64;
  double range_ratio = 0;
  bool json = false;
  EngineFlags flags;
  ExpertLoadFlags expert_load;
};

struct Prompt {
  std::vector<int32_t> ids;
  int64_t output_len = 0;
};

std::vector<Prompt> SyntheticPrompts(const ThroughputOptions& o, int64_t vocab) {
  bench::BenchRng rng(o.flags.engine.seed);
  std::vector<Prompt> prompts(static_cast<size_t>(o.num_prompts));
  for (Prompt& p : prompts) {
    p.ids.resize(static_cast<size_t>(bench::SampleLength(rng, o.input_len, o.range_ratio)));
    for (int32_t& id : p.ids) id = static_cast<int32_t>(rng.UniformInt(0, vocab - 1));
    p.output_len = bench::SampleLength(rng, o.output_len, o.range_ratio);
  }
  return prompts;
}

Expected<std::vector<Prompt>> ReadPrompts(const std::string& path, const std::string& model_path, int64_t vocab) {
  std::ifstream in(path);
  if (!in) return IoError(fmt::format("cannot read {}", path));
  std::unique_ptr<Tokenizer> tokenizer;  // loaded on the first text prompt
  std::vector<Prompt> prompts;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto where = [&](const std::string& what) { return InvalidArgument(fmt::format("{}:{}: {}", path, line_no, what)); };
    const auto body = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("prompt")) return where("need a JSON object with \"prompt\"");
    Prompt p;
    const nlohmann::json& prompt = body["prompt"];
    if (prompt.is_string()) {
      if (!tokenizer) {
        auto loaded = LoadModelTokenizer(model_path);
        if (!loaded.ok()) return where("a text prompt needs the model's tokenizer: " + loaded.status().message());
        tokenizer = std::move(*loaded);
      }
      p.ids = tokenizer->Encode(prompt.get<std::string>(), /*add_special=*/true, /*parse_special=*/true);
    } else if (prompt.is_array()) {
      for (const auto& id : prompt) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
          return where(fmt::format("token ids must be integers in [0, {})", vocab));
        }
        p.ids.push_back(id.get<int32_t>());
      }
    } else {
      return where("\"prompt\" must be text or a list of token ids");
    }
    const char* key = body.contains("output_len") ? "output_len" : "max_tokens";
    if (!body.contains(key) || !body[key].is_number_integer() || body[key].get<int64_t>() < 1) {
      return where("need \"output_len\" (or \"max_tokens\"): a positive integer");
    }
    p.output_len = body[key].get<int64_t>();
    if (p.ids.empty()) return where("empty prompt");
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) return InvalidArgument(fmt::format("{} has no prompts", path));
  return prompts;
}

int RunThroughputBench(ThroughputOptions& o) {
  if (Status s = o.flags.Finish(); !s.ok()) return Fail(s);
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) return Fail(InvalidArgument("--range-ratio must be in [0, 1)"));
  auto model = LoadModelWithLog(o.model, std::nullopt, false, o.flags.expert_placement);
  if (!model.ok()) return Fail(model.status());
  const int64_t vocab = (*model)->info().vocab_size;
  const int64_t num_layers = (*model)->info().num_layers;
  auto layout = ReportLayout(o.expert_load, o.flags.expert_placement, (*model)->info().num_experts);
  if (!layout.ok()) return Fail(layout.status());
  std::vector<Prompt> prompts;
  if (o.dataset.empty()) {
    prompts = SyntheticPrompts(o, vocab);
  } else {
    auto read = ReadPrompts(o.dataset, o.model, vocab);
    if (!read.ok()) return Fail(read.status());
    prompts = std::move(*read);
  }
  auto engine = CreateEngine(std::move(*model), o.flags.engine);
  if (!engine.ok()) return Fail(engine.status());
  for (const std::string& line : (*engine)->DescribePlan()) EMBER_LOG_INFO("{}", line);
  EngineClient& client = (*engine)->client();

  const int64_t steps_before = (*engine)->runner().num_steps();
  const auto start = std::chrono::steady_clock::now();
  int64_t input_tokens = 0, output_tokens = 0, failed = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestInput input;
    input.external_id = fmt::format("bench-{}", i);
    input.prompt_token_ids = prompts[i].ids;
    input.sampling.temperature = 1.0f;
    input.sampling.max_tokens = static_cast<int32_t>(prompts[i].output_len);
    input.sampling.ignore_eos = true;
    input_tokens += static_cast<int64_t>(prompts[i].ids.size());
    client.Submit(std::move(input));
  }
  RunUntilDone(client, [&](RequestOutput& out) {
    output_tokens += static_cast<int64_t>(out.new_token_ids.size());
    if (!out.finished || out.error.empty()) return;
    ++failed;  // counted in the result and the exit status; the log says why
    EMBER_LOG_ERROR("{}: {}", out.external_id, out.error);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t n = static_cast<int64_t>(prompts.size());
  nlohmann::ordered_json out = {{"model", o.model},
                                {"threads", ThreadPool::Global().num_threads()},
                                {"dataset", o.dataset.empty() ? "random" : o.dataset},
                                {"num_requests", n},
                                {"failed", failed},
                                {"total_input_tokens", input_tokens},
                                {"total_output_tokens", output_tokens},
                                {"elapsed_s", seconds},
                                {"steps", (*engine)->runner().num_steps() - steps_before},
                                {"requests_per_second", n / seconds},
                                {"input_tokens_per_second", input_tokens / seconds},
                                {"output_tokens_per_second", output_tokens / seconds},
                                {"total_tokens_per_second", (input_tokens + output_tokens) / seconds}};
  // Speculative decoding's counters (zero without it), as /metrics would report them, so offline
  // runs can give tokens per verification step and acceptance per draft position.
  const SpecDecodeCounters& spec = client.Stats().spec_decode;
  out["spec_decode"] = {{"num_drafts", spec.num_drafts},
                        {"num_draft_tokens", spec.num_draft_tokens},
                        {"num_accepted_tokens", spec.num_accepted_tokens},
                        {"accepted_per_position", spec.accepted_per_position}};
  // Mixture-of-experts models: tokens per layer and expert over the run (the engine is new).
  exec::ExpertLoad load;
  client.ReadExpertLoad(&load);
  if (Status s = AddExpertLoadSection(o.expert_load, load, num_layers, layout->get(), &out); !s.ok()) return Fail(s);
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%lld requests (%lld input + %lld output tokens) in %.2f s, %lld engine steps, %d threads\n",
                static_cast<long long>(n), static_cast<long long>(input_tokens), static_cast<long long>(output_tokens),
                seconds, static_cast<long long>(out["steps"].get<int64_t>()), ThreadPool::Global().num_threads());
    std::printf("  %.2f requests/s, %.1f input tok/s, %.1f output tok/s, %.1f total tok/s\n", n / seconds,
                input_tokens / seconds, output_tokens / seconds, (input_tokens + output_tokens) / seconds);
    PrintExpertLoadSection(out);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

void RegisterBenchThroughputCommand(CLI::App* bench) {
  auto o = std::make_shared<ThroughputOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "throughput", "Offline throughput: all prompts through the engine at once (requests/s, tokens/s)");
  cmd->add_option("model", o->model, "Model (GGUF file or model directory)")->required();
  cmd->add_option("--dataset", o->dataset,
                  "JSONL file: one {\"prompt\": text or token ids, \"output_len\": N} per line (default: random ids)");
  cmd->add_option("--input-len", o->input_len, "Synthetic prompt tokens")->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", o->output_len, "Synthetic output tokens per request")->check(CLI::PositiveNumber);
  cmd->add_option("--num-prompts", o->num_prompts, "Synthetic requests")->check(CLI::PositiveNumber);
  cmd->add_option("--range-ratio", o->range_ratio, "Synthetic lengths drawn uniformly in len * [1 - r, 1 + r]");
  cmd->add_flag("--json", o->json, "Print JSON");
  AddEngineOptions(cmd, &o->flags);
  AddExpertLoadOptions(cmd, &o->expert_load);
  cmd->callback([o] { SetExitCode(RunThroughputBench(*o)); });
}

}  // namespace ember::tools
