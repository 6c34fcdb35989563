#include "recipe/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/host_memory.h"
#include "model/tensor_parallel.h"

namespace ember::recipe {

namespace {

double Gb(int64_t bytes) { return std::round(static_cast<double>(bytes) / 1e7) / 100.0; }  // 2 decimals

bool IsOneOf(const std::string& v, std::initializer_list<const char*> options) {
  return std::any_of(options.begin(), options.end(), [&](const char* o) { return v == o; });
}

Status ValidateRequest(const RecipeRequest& r) {
  const Workload& w = r.workload;
  if (w.concurrency < 1) return InvalidArgument("--concurrency must be at least 1");
  if (w.context_len < 0 || w.input_len < 0 || w.output_len < 0) {
    return InvalidArgument("--context-len, --input-len and --output-len must not be negative");
  }
  if (!IsOneOf(w.goal, {"latency", "throughput"})) {
    return InvalidArgument(fmt::format("--goal must be latency or throughput, got '{}'", w.goal));
  }
  if (!IsOneOf(w.speculative, {"on", "off", "auto"})) {
    return InvalidArgument(fmt::format("--speculative must be on, off or auto, got '{}'", w.speculative));
  }
  if (w.modalities.empty()) return InvalidArgument("--modalities needs at least one of text, image, video, audio");
  for (const std::string& m : w.modalities) {
    if (!IsOneOf(m, {"text", "image", "video", "audio"})) {
      return InvalidArgument(fmt::format("unknown modality '{}': use text, image, video or audio", m));
    }
  }
  if (r.nodes < 1 || r.devices_per_node < 0) return InvalidArgument("--nodes must be at least 1 and --devices-per-node positive");
  for (const auto& [name, value] : r.fixed) {
    if (std::find(SettingNames().begin(), SettingNames().end(), name) == SettingNames().end()) {
      return InvalidArgument(fmt::format("'{}' is not a recipe setting", name));
    }
  }
  return Status::Ok();
}

// The loaders' own refusal of this tensor-parallel size (model/tensor_parallel.h), "" if none: the
// heads, the dense MLP and (without expert parallelism) each expert's FFN must split evenly.
std::string TensorParallelProblem(const ModelDescription& m, int64_t tp, bool ep) {
  if (tp <= 1 || m.num_heads <= 0 || m.kv_layers.empty()) return "";
  const TensorParallelRank rank{0, tp};
  const kv::LayerKvSpec& kv = m.kv_layers.front();
  if (auto layer = SplitLayer(m.num_heads, kv.num_kv_heads, kv.head_dim, m.mlp_intermediate, rank); !layer.ok()) {
    return layer.status().message();
  }
  if (m.expert_intermediate > 0 && !ep) {
    if (auto experts = rank.Block(m.expert_intermediate, "experts' FFN features"); !experts.ok()) {
      return experts.status().message();
    }
  }
  return "";
}

// Expert parallelism's refusals, "" if none: EP needs routed experts that split evenly over its
// tp x dp ranks (model/arch/muse_spark.cc refuses the same), and data-parallel attention needs EP
// (its ranks would otherwise each hold every expert).
std::string ExpertParallelProblem(const ModelDescription& m, int64_t tp, int64_t dp, bool ep, bool cpu) {
  if (!ep) {
    if (dp > 1 && m.is_moe) {
      return fmt::format("--data-parallel-size {} without --enable-expert-parallel: every rank would hold all {} "
                         "experts; add --enable-expert-parallel", dp, m.num_experts);
    }
    return "";
  }
  if (!m.is_moe) return "--enable-expert-parallel on a model without routed experts: leave it out";
  if (cpu && dp > 1 && tp > 1) {
    return fmt::format("data-parallel attention with tensor parallelism (dp {} x tp {}) is not built for CPU ranks "
                       "yet: use --data-parallel-size {} with --tensor-parallel-size 1, or TEP (tp with "
                       "--enable-expert-parallel)", dp, tp, dp * tp);
  }
  const int64_t ranks = tp * dp;
  if (ranks <= 1 || m.num_experts <= 0 || m.num_experts % ranks == 0) return "";
  std::string works;
  for (int64_t n = 1; n <= m.num_experts; ++n) {
    if (m.num_experts % n == 0) works += fmt::format("{}{}", works.empty() ? "" : ", ", n);
  }
  return fmt::format("expert parallelism over tp x dp = {} ranks cannot split {} experts evenly; tp x dp must "
                     "divide them: {}", ranks, m.num_experts, works);
}

Facts InputFacts(const RecipeRequest& r, const ModelDescription& m, const HardwareProfile& hw, int64_t devices_per_node,
                 int64_t device_memory) {
  const Workload& w = r.workload;
  auto num = [](int64_t v) { return Value::Number(static_cast<double>(v)); };
  const bool multimodal = std::any_of(w.modalities.begin(), w.modalities.end(), [](const std::string& x) { return x != "text"; });
  return Facts{
      {"model", Value::String(m.name)},
      {"model_source", Value::String(m.source)},
      {"architecture", Value::String(m.architecture)},
      {"is_moe", Value::Bool(m.is_moe)},
      {"has_dspark", Value::Bool(m.has_dspark)},
      {"model_max_len", num(m.max_position_embeddings)},
      {"num_layers", num(m.num_layers)},
      {"num_kv_heads", num(m.kv_layers.front().num_kv_heads)},
      {"hardware", Value::String(hw.name)},
      {"vendor", Value::String(hw.vendor)},
      {"device_memory_gb", Value::Number(Gb(device_memory))},
      {"devices_per_node", num(devices_per_node)},
      {"nodes", num(r.nodes)},
      {"devices_total", num(devices_per_node * r.nodes)},
      {"concurrency", num(w.concurrency)},
      {"context_len", num(w.context_len)},
      {"input_len", num(w.input_len)},
      {"output_len", num(w.output_len)},
      {"modalities", Value::List(w.modalities)},
      {"multimodal", Value::Bool(multimodal)},
      {"goal", Value::String(w.goal)},
      {"speculative_request", Value::String(w.speculative)},
  };
}

Finding MakeFinding(const Rule& rule, const std::string& message, const Facts& facts) {
  return Finding{rule.id, FillMessage(message, facts), rule.source};
}

// Stage 2: choose rules in file order.
Status RunChooseRules(const Facts& fixed, Recipe* r) {
  std::map<std::string, size_t> decision_of;
  for (const auto& [name, value] : fixed) {
    r->facts[name] = value;
    decision_of[name] = r->decisions.size();
    r->decisions.push_back(Decision{name, value, "user"});
  }
  for (const Rule& rule : BuiltinRules()) {
    if (rule.stage != Rule::Stage::kChoose) continue;
    EMBER_ASSIGN_OR_RETURN(const bool fires, rule.when.EvalBool(r->facts));
    if (!fires) continue;
    r->fired.push_back(rule.id);
    // All values see the facts as they were before this rule.
    std::vector<std::pair<std::string, Value>> values;
    for (const auto& [name, expr] : rule.set) {
      EMBER_ASSIGN_OR_RETURN(Value v, expr.Eval(r->facts));
      values.emplace_back(name, std::move(v));
    }
    for (auto& [name, value] : values) {
      if (fixed.count(name)) {
        if (!rule.is_default && !(value == fixed.at(name))) {
          r->warnings.push_back(Finding{rule.id,
                                        fmt::format("recommends {} = {}; the deployment has {}", name, value.ToString(),
                                                    fixed.at(name).ToString()),
                                        rule.source});
        }
        continue;
      }
      r->facts[name] = value;
      auto it = decision_of.find(name);
      if (it == decision_of.end()) {
        decision_of[name] = r->decisions.size();
        r->decisions.push_back(Decision{name, value, rule.id});
      } else {
        r->decisions[it->second] = Decision{name, value, rule.id};
      }
    }
    if (!rule.warn.empty()) r->warnings.push_back(MakeFinding(rule, rule.warn, r->facts));
    if (!rule.refuse.empty()) r->refusals.push_back(MakeFinding(rule, rule.refuse, r->facts));
  }
  for (const std::string& name : SettingNames()) {
    if (!r->facts.count(name)) return Internal(fmt::format("no rule set '{}': rules.json needs a default for it", name));
  }
  return Status::Ok();
}

Expected<int64_t> WholeSetting(const Facts& f, const char* name, int64_t min) {
  const Value& v = f.at(name);
  if (v.kind != Value::Kind::kNumber || v.number != std::floor(v.number) || v.number < static_cast<double>(min)) {
    return InvalidArgument(fmt::format("setting {} = {} is not a whole number >= {}: check --devices-per-node and --nodes",
                                       name, v.ToString(), min));
  }
  return static_cast<int64_t>(v.number);
}

std::string ServeModelArgument(const Recipe& r) {
  if (r.model.source != "preset") return r.model.path;
  const std::string& checkpoint = r.facts.at("checkpoint").string;
  auto format = FindFormat(checkpoint);
  if (format.ok() && !(*format)->muse_spark_open_repo.empty()) return (*format)->muse_spark_open_repo;
  return "meta-models/Muse-Spark-Open-816B-A42B";  // quantized while loading (fp8)
}

}  // namespace

Expected<Recipe> PlanRecipe(const RecipeRequest& request) {
  EMBER_RETURN_IF_ERROR(ValidateRequest(request));
  Recipe r;
  r.request = request;
  EMBER_ASSIGN_OR_RETURN(r.model, DescribeModel(request.model));
  EMBER_ASSIGN_OR_RETURN(const HardwareProfile* hw, FindHardware(request.hardware));
  r.hardware = *hw;
  const int64_t devices_per_node = request.devices_per_node > 0 ? request.devices_per_node : hw->devices_per_node;
  r.device_memory_bytes = request.device_memory_gb > 0 ? static_cast<int64_t>(request.device_memory_gb * 1e9)
                          : hw->memory_gb > 0          ? static_cast<int64_t>(hw->memory_gb * 1e9)
                                                       : AvailableMemoryBytes();
  if (r.device_memory_bytes <= 0) return Unimplemented("cannot read this machine's memory: pass --device-memory-gb");

  // 1-2: facts, then the choose rules.
  r.facts = InputFacts(request, r.model, *hw, devices_per_node, r.device_memory_bytes);
  EMBER_RETURN_IF_ERROR(RunChooseRules(request.fixed, &r));
  const Facts& f = r.facts;

  // 3: memory arithmetic.
  EMBER_ASSIGN_OR_RETURN(r.tensors, CensusFor(r.model, f.at("checkpoint").string));
  const std::string& kv_dtype = f.at("kv_cache_dtype").string;
  if (kv_dtype == "auto") {
    r.kv_dtype = r.model.default_kv_dtype;
  } else {
    EMBER_ASSIGN_OR_RETURN(r.kv_dtype, kv::ParseKvDtype(kv_dtype));
  }
  MemoryInputs in;
  in.tensors = r.tensors;
  in.load_towers = !f.at("language_model_only").boolean;
  in.kv_layers = r.model.kv_layers;
  in.kv_dtype = r.kv_dtype;
  EMBER_ASSIGN_OR_RETURN(in.block_size, WholeSetting(f, "block_size", 1));
  EMBER_ASSIGN_OR_RETURN(in.shape.tp, WholeSetting(f, "tp", 1));
  EMBER_ASSIGN_OR_RETURN(in.shape.pp, WholeSetting(f, "pp", 1));
  EMBER_ASSIGN_OR_RETURN(in.shape.dp, WholeSetting(f, "dp", 1));
  EMBER_ASSIGN_OR_RETURN(in.shape.replicas, WholeSetting(f, "replicas", 1));
  in.device_memory_bytes = r.device_memory_bytes;
  in.memory_utilization = hw->memory_utilization;
  in.kv_as_needed = hw->kv_as_needed;
  in.kv_max_fraction = hw->kv_max_fraction;
  EMBER_ASSIGN_OR_RETURN(in.max_model_len, WholeSetting(f, "max_model_len", 1));
  EMBER_ASSIGN_OR_RETURN(in.max_num_seqs, WholeSetting(f, "max_num_seqs", 1));
  if (in.max_model_len > r.model.max_position_embeddings) {
    return InvalidArgument(fmt::format("max-model-len {} exceeds the model's context length {}", in.max_model_len,
                                       r.model.max_position_embeddings));
  }
  EMBER_ASSIGN_OR_RETURN(r.memory, PlanMemory(in));
  const MemoryPlan& m = r.memory;
  r.hybrid_kv_ratio = m.kv_bytes_per_sequence_all_full > 0
                          ? static_cast<double>(m.kv_bytes_per_sequence) / m.kv_bytes_per_sequence_all_full
                          : 0;

  // 4: check rules, which may also read the derived facts.
  auto num = [](double v) { return Value::Number(v); };
  r.facts["devices_used"] = num(static_cast<double>(in.shape.DevicesUsed()));
  const bool ep = r.facts.at("ep").boolean;
  r.facts["tp_shape_problem"] = Value::String(TensorParallelProblem(r.model, in.shape.tp, ep));
  r.facts["ep_shape_problem"] = Value::String(
      ExpertParallelProblem(r.model, in.shape.tp, in.shape.dp, ep, r.facts.at("vendor").string == "cpu"));
  r.facts["checkpoint_gb"] = num(Gb(m.checkpoint_total));
  r.facts["weights_per_device_gb"] = num(Gb(m.per_device_total));
  r.facts["usable_per_device_gb"] = num(Gb(m.usable_per_device));
  r.facts["kv_budget_per_device_gb"] = num(Gb(m.kv_budget_per_device));
  r.facts["kv_gb_per_sequence"] = num(Gb(m.kv_bytes_per_sequence));
  r.facts["kv_capacity_tokens"] = num(static_cast<double>(m.kv_capacity_tokens));
  r.facts["kv_sequences"] = num(static_cast<double>(m.kv_sequences));
  for (const Rule& rule : BuiltinRules()) {
    if (rule.stage != Rule::Stage::kCheck) continue;
    EMBER_ASSIGN_OR_RETURN(const bool fires, rule.when.EvalBool(r.facts));
    if (!fires) continue;
    r.fired.push_back(rule.id);
    if (!rule.warn.empty()) r.warnings.push_back(MakeFinding(rule, rule.warn, r.facts));
    if (!rule.refuse.empty()) r.refusals.push_back(MakeFinding(rule, rule.refuse, r.facts));
  }

  ServeInputs serve;
  serve.model = ServeModelArgument(r);
  serve.settings = r.facts;
  serve.kv_cache_memory = hw->kv_as_needed ? m.kv_budget_per_device : 0;
  serve.memory_utilization = hw->memory_utilization;
  serve.accelerator = hw->vendor != "cpu";
  r.command = BuildServeCommand(serve);
  return r;
}

Status ApplyServeCommand(const std::vector<std::string>& serve_args, RecipeRequest* request) {
  EMBER_ASSIGN_OR_RETURN(ParsedServe parsed, ParseServeCommand(serve_args));
  request->fixed = parsed.settings;
  if (parsed.model.find("Muse-Spark-Open") != std::string::npos) {
    // A published checkpoint name: the preset in that checkpoint's format (unless --quantization said otherwise).
    request->model = kMuseSparkOpenPreset;
    if (!request->fixed.count("checkpoint")) {
      std::string checkpoint = "bf16";
      for (const CheckpointFormat& f : BuiltinFormats()) {
        if (!f.muse_spark_open_repo.empty() && f.muse_spark_open_repo == parsed.model) checkpoint = f.name;
      }
      request->fixed["checkpoint"] = Value::String(checkpoint);
    }
  } else {
    request->model = parsed.model;
  }
  EMBER_ASSIGN_OR_RETURN(ModelDescription model, DescribeModel(request->model));
  if (!request->fixed.count("checkpoint")) {
    request->fixed["checkpoint"] = Value::String(model.source == "gguf" ? "gguf" : "bf16");
  }
  // ember serve's default context is the model's own.
  if (!request->fixed.count("max_model_len")) {
    request->fixed["max_model_len"] = Value::Number(static_cast<double>(model.max_position_embeddings));
  }
  return Status::Ok();
}

}  // namespace ember::recipe
