#include "recipe/serve_args.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "core/ascii.h"

namespace ember::recipe {

namespace {

std::string Quote(const std::string& arg) {
  const bool plain = std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string("-_./=:,@+").find(c) != std::string::npos;
  });
  if (plain && !arg.empty()) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

const Value& Get(const Facts& f, const char* name) {
  static const Value kMissing = Value::String("");
  const auto it = f.find(name);
  return it == f.end() ? kMissing : it->second;
}
int64_t Int(const Facts& f, const char* name) { return static_cast<int64_t>(Get(f, name).number); }
bool Bool(const Facts& f, const char* name) { return Get(f, name).boolean; }
const std::string& Str(const Facts& f, const char* name) { return Get(f, name).string; }

}  // namespace

std::string ServeCommand::Line() const {
  std::string line;
  for (const std::string& a : argv) {
    if (!line.empty()) line += ' ';
    line += Quote(a);
  }
  if (!future_flags.empty()) {
    line += " \\\n    # future (not accepted by ember serve yet):";
    for (const std::string& a : future_flags) {
      line += ' ';
      line += Quote(a);
    }
  }
  return line;
}

ServeCommand BuildServeCommand(const ServeInputs& in) {
  const Facts& s = in.settings;
  ServeCommand c;
  c.argv = {"ember", "serve", in.model};
  auto flag = [&](const std::string& name, const std::string& value) {
    c.argv.push_back(name);
    c.argv.push_back(value);
  };
  flag("--max-model-len", std::to_string(Int(s, "max_model_len")));
  flag("--max-num-seqs", std::to_string(Int(s, "max_num_seqs")));
  if (Str(s, "kv_cache_dtype") != "auto") flag("--kv-cache-dtype", Str(s, "kv_cache_dtype"));
  c.argv.push_back(Bool(s, "prefix_caching") ? "--enable-prefix-caching" : "--no-enable-prefix-caching");
  c.argv.push_back(Bool(s, "chunked_prefill") ? "--enable-chunked-prefill" : "--no-enable-chunked-prefill");
  if (Int(s, "block_size") != 16) flag("--block-size", std::to_string(Int(s, "block_size")));
  if (in.kv_cache_memory > 0) flag("--kv-cache-memory", std::to_string(in.kv_cache_memory));

  auto future = [&](const std::string& name, const std::string& value = "") {
    c.future_flags.push_back(name);
    if (!value.empty()) c.future_flags.push_back(value);
  };
  const std::string parallelism = Str(s, "parallelism");
  // Tensor, pipeline and expert parallelism (TEP, and DEP without tensor parallelism) run on CPU
  // ranks over MPI (src/parallel); accelerators' ranks are future.
  const auto real_on_cpu = [&](const std::string& name, const std::string& value = "") {
    if (in.accelerator) return future(name, value);
    c.argv.push_back(name);
    if (!value.empty()) c.argv.push_back(value);
  };
  if (Int(s, "tp") > 1) real_on_cpu("--tensor-parallel-size", std::to_string(Int(s, "tp")));
  if (Int(s, "pp") > 1) real_on_cpu("--pipeline-parallel-size", std::to_string(Int(s, "pp")));
  if (Int(s, "dp") > 1) real_on_cpu("--data-parallel-size", std::to_string(Int(s, "dp")));
  if (Bool(s, "ep")) real_on_cpu("--enable-expert-parallel");
  if (Bool(s, "speculative")) {
    nlohmann::json spec = {{"method", "dspark"},
                           {"model", Str(s, "draft_model")},
                           {"num_speculative_tokens", Int(s, "num_speculative_tokens")}};
    future("--speculative-config", spec.dump());
  }
  if (Str(s, "attention_backend") == "triton") future("--attention-backend", "TRITON_ATTN");
  if (Bool(s, "language_model_only") && in.accelerator) future("--language-model-only");
  if (in.accelerator) future("--gpu-memory-utilization", fmt::format("{}", in.memory_utilization));
  if (parallelism == "pd_disagg") {
    // ember moves KV between single-process instances (src/disagg); an instance spread over ranks
    // (tensor, pipeline or data parallelism) cannot export its KV yet.
    const bool single_process = Int(s, "tp") <= 1 && Int(s, "pp") <= 1 && Int(s, "dp") <= 1;
    c.notes.push_back(
        single_process
            ? "run two instances of this command, one with --kv-transfer-config "
              "'{\"kv_connector\":\"UcxConnector\",\"kv_role\":\"kv_producer\"}' (prefill) and one with "
              "\"kv_role\":\"kv_consumer\" (decode), and `ember router --prefill URL --decode URL` in front; the "
              "figures are per instance"
            : "run two instances of this command, one prefill and one decode, joined by a KV connector "
              "(--kv-transfer-config: real for single-process instances, future for instances over several "
              "ranks like these); the figures are per instance");
  } else if (Int(s, "replicas") > 1) {
    c.notes.push_back(fmt::format("run {} replicas of this command behind a KV-aware router; the figures are per replica",
                                  Int(s, "replicas")));
  }
  return c;
}

Expected<ParsedServe> ParseServeCommand(const std::vector<std::string>& raw) {
  std::vector<std::string> args = raw;
  if (!args.empty() && args.front() == "ember") args.erase(args.begin());
  if (args.empty() || args.front() != "serve") {
    return InvalidArgument("--check expects an ember serve command line after '--', e.g. -- serve MODEL --max-model-len 32768");
  }
  ParsedServe p;
  Facts& s = p.settings;
  // ember serve's own defaults (engine_options.cc) for everything the command leaves out.
  s["max_num_seqs"] = Value::Number(256);
  s["prefix_caching"] = Value::Bool(true);
  s["chunked_prefill"] = Value::Bool(true);
  s["kv_cache_dtype"] = Value::String("auto");
  s["block_size"] = Value::Number(16);
  s["speculative"] = Value::Bool(false);
  s["draft_model"] = Value::String("none");
  s["num_speculative_tokens"] = Value::Number(0);
  s["adaptive_verification"] = Value::Bool(false);
  s["attention_backend"] = Value::String("default");
  s["language_model_only"] = Value::Bool(false);
  int64_t tp = 1, pp = 1, dp = 1;
  bool ep = false, disagg = false;

  // Flags ember serve accepts that do not change the deployment's shape or memory.
  static const std::vector<std::string> kNeutralWithValue = {
      "--host", "--port", "--served-model-name", "--api-key", "--api-key-env", "--max-waiting-requests",
      "--max-prompts-per-request", "--default-max-tokens", "--allowed-origins",
      "--max-request-body", "--max-n", "--generation-config", "--tool-call-parser", "--max-num-batched-tokens",
      "--scheduling-policy", "--seed", "--long-prefill-token-threshold", "--threads", "--gpu-memory-utilization",
      "--reasoning-parser"};
  for (size_t i = 1; i < args.size(); ++i) {
    std::string name = args[i], value;
    const size_t eq = name.find('=');
    const bool inline_value = name.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (name.empty() || name[0] != '-') {
      if (!p.model.empty()) return InvalidArgument(fmt::format("serve takes one MODEL, got '{}' and '{}'", p.model, name));
      p.model = name;
      continue;
    }
    auto next = [&]() -> Expected<std::string> {
      if (inline_value) return value;
      if (i + 1 >= args.size()) return InvalidArgument(fmt::format("{} needs a value", name));
      return args[++i];
    };
    auto number = [&]() -> Expected<double> {
      EMBER_ASSIGN_OR_RETURN(std::string v, next());
      char* end = nullptr;
      const double n = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || n < 0) return InvalidArgument(fmt::format("{} needs a number, got '{}'", name, v));
      return n;
    };
    if (name == "--max-model-len") {
      EMBER_ASSIGN_OR_RETURN(double n, number());
      s["max_model_len"] = Value::Number(n);
    } else if (name == "--max-num-seqs") {
      EMBER_ASSIGN_OR_RETURN(double n, number());
      s["max_num_seqs"] = Value::Number(n);
    } else if (name == "--block-size") {
      EMBER_ASSIGN_OR_RETURN(double n, number());
      s["block_size"] = Value::Number(n);
    } else if (name == "--enable-prefix-caching" || name == "--no-enable-prefix-caching") {
      s["prefix_caching"] = Value::Bool(name == "--enable-prefix-caching");
    } else if (name == "--enable-chunked-prefill" || name == "--no-enable-chunked-prefill") {
      s["chunked_prefill"] = Value::Bool(name == "--enable-chunked-prefill");
    } else if (name == "--kv-cache-dtype") {
      EMBER_ASSIGN_OR_RETURN(std::string v, next());
      static const std::map<std::string, std::string> kAliases = {
          {"fp8_e4m3", "fp8"}, {"bfloat16", "bf16"}, {"float16", "f16"}, {"half", "f16"}, {"float32", "f32"}};
      const auto alias = kAliases.find(v);
      s["kv_cache_dtype"] = Value::String(alias == kAliases.end() ? v : alias->second);
    } else if (name == "--kv-cache-memory") {
      EMBER_ASSIGN_OR_RETURN(std::string v, next());
      (void)v;  // sized by the recipe's own arithmetic; the value is not a deployment choice
    } else if (name == "--tensor-parallel-size" || name == "-tp") {
      EMBER_ASSIGN_OR_RETURN(double n, number());
      tp = static_cast<int64_t>(n);
    } else if (name == "--pipeline-parallel-size" || name == "-pp") {
      EMBER_ASSIGN_OR_RETURN(double n, number());
      pp = static_cast<int64_t>(n);
    } else if (name == "--data-parallel-size" || name == "-dp") {
      EMBER_ASSIGN_OR_RETURN(double n, number());
      dp = static_cast<int64_t>(n);
    } else if (name == "--enable-expert-parallel") {
      ep = true;
    } else if (name == "--kv-transfer-config") {
      EMBER_ASSIGN_OR_RETURN(std::string v, next());
      disagg = true;
    } else if (name == "--language-model-only") {
      s["language_model_only"] = Value::Bool(true);
    } else if (name == "--attention-backend") {
      EMBER_ASSIGN_OR_RETURN(std::string v, next());
      const std::string lower = AsciiLower(v);
      s["attention_backend"] = Value::String(lower.find("triton") != std::string::npos   ? "triton"
                                             : lower.find("aiter") != std::string::npos ? "aiter"
                                                                                         : lower);
    } else if (name == "--quantization") {
      EMBER_ASSIGN_OR_RETURN(std::string v, next());
      if (v.find("mxfp4") != std::string::npos) s["checkpoint"] = Value::String("mxfp4");
      else if (v.find("fp8") != std::string::npos) s["checkpoint"] = Value::String("fp8");
      else if (v.find("nvfp4") != std::string::npos || v == "modelopt_fp4") s["checkpoint"] = Value::String("nvfp4");
    } else if (name == "--speculative-config") {
      EMBER_ASSIGN_OR_RETURN(std::string v, next());
      const auto json = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
      if (!json.is_object()) return InvalidArgument(fmt::format("--speculative-config is not a JSON object: {}", v));
      s["speculative"] = Value::Bool(true);
      s["adaptive_verification"] = Value::Bool(json.value("method", "") == "dspark");
      s["draft_model"] = Value::String(json.value("model", std::string("unknown")));
      s["num_speculative_tokens"] = Value::Number(json.value("num_speculative_tokens", 0));
    } else if (std::find(kNeutralWithValue.begin(), kNeutralWithValue.end(), name) != kNeutralWithValue.end()) {
      EMBER_ASSIGN_OR_RETURN(std::string v, next());
    } else {
      return InvalidArgument(fmt::format("ember recipe --check does not know the serve flag '{}'", name));
    }
  }
  if (p.model.empty()) return InvalidArgument("the serve command names no MODEL");
  const char* parallelism = disagg ? "pd_disagg" : dp > 1 ? "dp_attention_ep" : pp > 1 ? "tp_pp" : ep ? "tp_ep"
                            : tp > 1 ? "tp" : "single";
  s["parallelism"] = Value::String(parallelism);
  s["tp"] = Value::Number(static_cast<double>(tp));
  s["pp"] = Value::Number(static_cast<double>(pp));
  s["dp"] = Value::Number(static_cast<double>(dp));
  s["ep"] = Value::Bool(ep);
  s["replicas"] = Value::Number(disagg ? 2 : 1);
  return p;
}

}  // namespace ember::recipe
