// ember bench serve: a load generator for any OpenAI-compatible /v1/completions server (ember
// serve, llama.cpp's llama-server, vLLM), like `vllm bench serve`. For each level (a fixed
// concurrency or a Poisson request rate) it sends the same locally generated dataset, streaming,
// and reports TTFT, TPOT, ITL and end-to-end latency (mean, median, p90, p99), request and token
// throughput and goodput under latency targets; --result-json writes the JSON that
// scripts/bench_plot.py turns into a PNG.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tools/ember/bench/bench_commands.h"
#include "tools/ember/bench/serve_load.h"
#include "tools/ember/bench/serve_spec_metrics.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"

namespace ember::tools {
namespace {

using nlohmann::ordered_json;

struct ServeBenchOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string model;
  std::string label = "server";
  std::string api_key;
  bench::DatasetOptions dataset;
  std::vector<int64_t> concurrency;
  std::vector<std::string> request_rate;
  int64_t max_concurrency = 0;
  int64_t warmup = 2;
  std::vector<std::string> goodput;
  std::string extra_body = "{}";
  std::string result_json;
};

std::string Ms(const ordered_json& value, const char* key) {
  const ordered_json& v = value[key];
  return v.is_null() ? "-" : fmt::format("{:.2f}", v.get<double>());
}

void PrintLevel(const std::string& label, const ordered_json& s) {
  std::printf("[%s] %lld ok, %lld failed in %.1fs | %.2f req/s, %.1f in tok/s, %.1f out tok/s | TTFT med %s p99 %s ms | "
              "TPOT med %s ms | ITL med %s p99 %s ms | goodput %.2f req/s%s\n",
              label.c_str(), static_cast<long long>(s["completed"]), static_cast<long long>(s["failed"]),
              s["duration_s"].get<double>(), s["request_throughput"].get<double>(),
              s["input_throughput"].get<double>(), s["output_throughput"].get<double>(),
              Ms(s["ttft_ms"], "median").c_str(), Ms(s["ttft_ms"], "p99").c_str(), Ms(s["tpot_ms"], "median").c_str(),
              Ms(s["itl_ms"], "median").c_str(), Ms(s["itl_ms"], "p99").c_str(), s["request_goodput"].get<double>(),
              s["chunks_equal_usage_tokens"].get<bool>() ? "" : " | chunks != usage tokens (server packs tokens)");
  if (const auto spec = s.find("spec_decode"); spec != s.end() && !spec->is_null()) {
    std::string per_position;
    for (const auto& a : (*spec)["acceptance_per_position"]) per_position += fmt::format(" {:.2f}", a.get<double>());
    std::printf("  speculation: %.0f verification steps, %.2f tokens per step, %.2f draft tokens verified per step, "
                "acceptance %.2f, per position:%s\n",
                (*spec)["num_drafts"].get<double>(), (*spec)["mean_acceptance_length"].get<double>(),
                (*spec)["mean_verified_length"].get<double>(), (*spec)["acceptance_rate"].get<double>(),
                per_position.c_str());
    // The proposer's time against the level's: what speculation costs where it drafts little.
    const double seconds = s["duration_s"].get<double>();
    const double propose = spec->value("propose_seconds", 0.0), intake = spec->value("hidden_states_seconds", 0.0);
    if (seconds > 0 && (propose > 0 || intake > 0)) {
      std::printf("  proposer: drafting %.3f s (%.2f%% of the run), hidden-state intake %.3f s (%.2f%%)\n", propose,
                  100.0 * propose / seconds, intake, 100.0 * intake / seconds);
    }
  }
  for (const auto& error : s["errors"]) std::printf("  error: %s\n", error.get<std::string>().c_str());
  std::fflush(stdout);
}

Expected<double> ParseRate(const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double rate = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(rate > 0)) {
    return InvalidArgument(fmt::format("--request-rate takes positive requests per second or inf; got '{}'", text));
  }
  return rate;
}

int RunServeBench(ServeBenchOptions o) {
  bench::GoodputTargets targets;
  for (const std::string& item : o.goodput) {
    if (Status s = bench::ParseGoodputTarget(item, &targets); !s.ok()) return Fail(s);
  }
  const auto extra = nlohmann::json::parse(o.extra_body, nullptr, /*allow_exceptions=*/false);
  if (!extra.is_object()) return Fail(InvalidArgument("--extra-body must be a JSON object"));
  std::vector<double> rates;
  for (const std::string& text : o.request_rate) {
    auto rate = ParseRate(text);
    if (!rate.ok()) return Fail(rate.status());
    rates.push_back(*rate);
  }
  if (o.concurrency.empty() && rates.empty()) o.concurrency = {1};
  auto target = bench::ParseBaseUrl(o.base_url, o.api_key);
  if (!target.ok()) return Fail(target.status());
  if (o.model.empty()) {
    auto model = bench::DiscoverModel(*target);
    if (!model.ok()) return Fail(model.status());
    o.model = *model;
  }
  auto sessions = bench::BuildSessions(o.dataset);
  if (!sessions.ok()) return Fail(sessions.status());

  ordered_json rate_config = ordered_json::array();
  for (double r : rates) rate_config.push_back(std::isfinite(r) ? ordered_json(r) : ordered_json("inf"));
  const bench::DatasetOptions& d = o.dataset;
  ordered_json out = {
      {"label", o.label},
      {"base_url", o.base_url},
      {"model", o.model},
      {"client", "ember bench serve"},
      {"config",
       {{"dataset", d.name}, {"dataset_path", d.path}, {"num_prompts", d.num_prompts}, {"input_len", d.input_len},
        {"output_len", d.output_len}, {"range_ratio", d.range_ratio}, {"long_input_len", d.long_input_len},
        {"long_fraction", d.long_fraction}, {"prefix_len", d.prefix_len},
        {"turns", d.turns}, {"concurrency", o.concurrency}, {"request_rate", rate_config},
        {"max_concurrency", o.max_concurrency}, {"seed", d.seed}, {"warmup", o.warmup}, {"goodput", o.goodput},
        {"extra_body", extra}}},
      {"levels", ordered_json::array()}};

  struct Level {
    const char* kind;
    bench::LoadLevel load;
    ordered_json value;
  };
  std::vector<Level> levels;
  for (int64_t c : o.concurrency) levels.push_back({"concurrency", {.concurrency = c, .seed = d.seed}, c});
  for (size_t i = 0; i < rates.size(); ++i) {
    levels.push_back({"request_rate",
                      {.request_rate = rates[i], .max_concurrency = o.max_concurrency, .seed = d.seed},
                      rate_config[i]});
  }
  bool all_ok = true;
  for (const Level& level : levels) {
    if (o.warmup > 0) {
      // Not counted: the first requests of a fresh server pay for page faults and buffer sizing.
      bench::BenchRng rng(~d.seed);
      std::vector<bench::Session> warm;
      for (int64_t i = 0; i < o.warmup; ++i) warm.push_back({{{bench::RandomWords(rng, 16), 4}}});
      bench::RunLoadLevel(*target, o.model, warm, {.concurrency = o.warmup}, extra);
    }
    // The server's speculation counters around the level (after the warm-up), when it has them.
    const auto spec_before = bench::ScrapeSpecDecode(*target);
    const bench::LevelRun run = bench::RunLoadLevel(*target, o.model, *sessions, level.load, extra);
    ordered_json summary = bench::Summarize(run.results, run.duration_s, targets);
    summary[level.kind] = level.value;
    if (spec_before) {
      if (const auto spec_after = bench::ScrapeSpecDecode(*target)) {
        summary["spec_decode"] = bench::SummarizeSpecDecode(*spec_before, *spec_after);
      }
    }
    PrintLevel(fmt::format("{} {}={}", o.label, level.kind, level.value.dump()), summary);
    all_ok = all_ok && summary["failed"].get<int64_t>() == 0;
    out["levels"].push_back(std::move(summary));
  }
  if (!o.result_json.empty()) {
    std::ofstream file(o.result_json);
    file << out.dump(1) << "\n";
    if (!file) return Fail(IoError(fmt::format("cannot write {}", o.result_json)));
  }
  return all_ok ? 0 : 1;
}

}  // namespace

void RegisterBenchServeCommand(CLI::App* bench) {
  auto o = std::make_shared<ServeBenchOptions>();
  if (const char* key = std::getenv("OPENAI_API_KEY")) o->api_key = key;
  CLI::App* cmd = bench->add_subcommand(
      "serve", "Load generator for an OpenAI-compatible server: TTFT, TPOT, ITL, throughput, goodput");
  cmd->add_option("--base-url", o->base_url, "Server URL, e.g. http://127.0.0.1:8000");
  cmd->add_option("--model", o->model, "Model name sent in requests (default: the first of /v1/models)");
  cmd->add_option("--label", o->label, "Name of this server in the results and plots");
  cmd->add_option("--api-key", o->api_key, "Bearer token (default: $OPENAI_API_KEY)");
  bench::DatasetOptions& d = o->dataset;
  cmd->add_option("--dataset", d.name,
                  "random, mixed (random with a share of long prompts), prefix (shared prefix, multi-turn sessions), "
                  "code, edit (rewrite a Python file with a "
                  "rename), quote (quote a passage): edit and quote answers repeat the prompt; or jsonl "
                  "(--dataset-path: {\"prompt\": ..., \"output_len\": N} per line)")
      ->check(CLI::IsMember({"random", "mixed", "prefix", "code", "edit", "quote", "jsonl"}));
  cmd->add_option("--dataset-path", d.path, "jsonl dataset: the file");
  cmd->add_option("--num-prompts", d.num_prompts, "Requests per level")->check(CLI::PositiveNumber);
  cmd->add_option("--input-len", d.input_len, "Prompt tokens (about; prefix: tokens of each new message)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", d.output_len, "Output tokens per request (max_tokens, ignore_eos)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--range-ratio", d.range_ratio, "Lengths drawn uniformly in len * [1 - r, 1 + r]");
  cmd->add_option("--long-input-len", d.long_input_len, "mixed dataset: a long prompt's tokens (default 2048)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--long-fraction", d.long_fraction, "mixed dataset: the share of long prompts (default 0.25)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--prefix-len", d.prefix_len, "prefix dataset: tokens of the shared prefix")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--turns", d.turns, "prefix dataset: turns per session")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", d.seed, "Seed of the dataset and of the Poisson arrivals");
  cmd->add_option("--concurrency", o->concurrency, "Fixed concurrency levels, e.g. 1,4,16,64 (default 1)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--request-rate", o->request_rate, "Poisson request rates in req/s, e.g. 0.5,2,inf")->delimiter(',');
  cmd->add_option("--max-concurrency", o->max_concurrency, "With --request-rate: sessions in flight at most")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--warmup", o->warmup, "Short requests before each level, not counted")->check(CLI::NonNegativeNumber);
  cmd->add_option("--goodput", o->goodput, "Latency targets in ms: ttft:MS tpot:MS e2el:MS");
  cmd->add_option("--extra-body", o->extra_body, "JSON object merged into every request body");
  cmd->add_option("--result-json", o->result_json, "Write the results here (scripts/bench_plot.py plots them)");
  cmd->callback([o] { SetExitCode(RunServeBench(*o)); });
}

}  // namespace ember::tools
