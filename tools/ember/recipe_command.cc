// ember recipe: the deployment planner (src/recipe). Model x hardware x workload -> the memory
// figures, settings and `ember serve` command, with every warning and refusal citing its rule.
//   ember recipe --hardware b200 --checkpoint nvfp4 --goal throughput --concurrency 128
//   ember recipe --hardware mi355x --check -- serve amd/Muse-Spark-Open-816B-A42B-Quark-MXFP4 --data-parallel-size 8
// Exit status: 0 fine, 2 when a rule refuses the deployment, 1 on bad input.
#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "recipe/planner.h"
#include "recipe/report.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"

namespace ember::tools {
namespace {

struct RecipeOptions {
  recipe::RecipeRequest request;
  std::string checkpoint;
  std::string parallelism;
  std::string kv_cache_dtype;
  std::string modalities = "text";
  bool json = false;
  bool list_hardware = false;
  std::string explain;
  bool check = false;
  std::vector<std::string> serve_args;
};

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int RunRecipe(RecipeOptions& o) {
  if (o.list_hardware) {
    std::printf("%s", o.json ? (recipe::HardwareJson().dump(2) + "\n").c_str() : recipe::HardwareTable().c_str());
    return 0;
  }
  if (!o.explain.empty()) {
    const recipe::Rule* rule = recipe::FindRule(o.explain);
    if (rule == nullptr) {
      std::string ids;
      for (const recipe::Rule& r : recipe::BuiltinRules()) ids += "\n  " + r.id;
      return Fail(InvalidArgument(fmt::format("no rule '{}'; the rules are:{}", o.explain, ids)));
    }
    std::printf("%s", recipe::ExplainRule(*rule).c_str());
    return 0;
  }
  recipe::RecipeRequest& req = o.request;
  req.workload.modalities = SplitCommas(o.modalities);
  if (o.check) {
    if (Status s = recipe::ApplyServeCommand(o.serve_args, &req); !s.ok()) return Fail(s);
  } else if (!o.serve_args.empty()) {
    return Fail(InvalidArgument("a serve command line after '--' needs --check"));
  }
  if (!o.checkpoint.empty()) req.fixed["checkpoint"] = recipe::Value::String(o.checkpoint);
  if (!o.parallelism.empty()) req.fixed["parallelism"] = recipe::Value::String(o.parallelism);
  if (!o.kv_cache_dtype.empty()) req.fixed["kv_cache_dtype"] = recipe::Value::String(o.kv_cache_dtype);
  auto plan = recipe::PlanRecipe(req);
  if (!plan.ok()) return Fail(plan.status());
  if (o.json) {
    std::printf("%s\n", recipe::RecipeToJson(*plan).dump(2).c_str());
  } else {
    std::printf("%s", recipe::RecipeToText(*plan).c_str());
  }
  return plan->ok() ? 0 : 2;
}

}  // namespace

void RegisterRecipeCommand(CLI::App& app) {
  auto o = std::make_shared<RecipeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "recipe", "Plan a deployment: memory per device, parallelism, KV capacity and the ember serve command");
  recipe::RecipeRequest& r = o->request;
  cmd->add_option("--model", r.model, "muse-spark-open (built-in preset), a .gguf file, or a Muse Spark config.json / directory")
      ->capture_default_str();
  cmd->add_option("--checkpoint", o->checkpoint, "bf16, nvfp4, mxfp4 or fp8 (default: the platform's; gguf files as stored)");
  cmd->add_option("--hardware", r.hardware, "b200, gb200, gb300, b300, h200, mi350x, mi355x, tpu-v7 or cpu")
      ->capture_default_str();
  cmd->add_option("--devices-per-node", r.devices_per_node, "Devices per node (default: the preset's)");
  cmd->add_option("--nodes", r.nodes, "Nodes")->capture_default_str();
  cmd->add_option("--device-memory-gb", r.device_memory_gb, "Override memory per device in GB (CPU default: MemAvailable)");
  cmd->add_option("--concurrency", r.workload.concurrency, "Requests served at once")->capture_default_str();
  cmd->add_option("--context-len", r.workload.context_len, "Longest request in tokens (default: the platform's)");
  cmd->add_option("--input-len", r.workload.input_len, "Typical prompt tokens");
  cmd->add_option("--output-len", r.workload.output_len, "Typical output tokens");
  cmd->add_option("--modalities", o->modalities, "Comma-separated: text, image, video, audio")->capture_default_str();
  cmd->add_option("--goal", r.workload.goal, "latency or throughput")->capture_default_str();
  cmd->add_option("--speculative", r.workload.speculative, "on, off or auto")->capture_default_str();
  cmd->add_option("--parallelism", o->parallelism, "Force single, tp, tp_ep, tp_pp, dp_attention_ep or pd_disagg");
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "Force auto, bf16, f16, f32 or fp8");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--list-hardware", o->list_hardware, "List the hardware presets");
  cmd->add_option("--explain", o->explain, "Print one rule: condition, effect and source");
  cmd->add_flag("--check", o->check, "Validate the ember serve command given after '--' against the rules");
  cmd->add_option("serve_args", o->serve_args, "With --check: -- serve MODEL [flags]");
  cmd->callback([o] { SetExitCode(RunRecipe(*o)); });
}

}  // namespace ember::tools
