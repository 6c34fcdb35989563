#include "recipe/rules.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "core/check.h"
#include "recipe/embedded_data.h"

namespace ember::recipe {

const std::vector<std::string>& InputFactNames() {
  static const std::vector<std::string> names = {
      "model", "model_source", "architecture", "is_moe", "has_dspark", "model_max_len", "num_layers",
      "num_kv_heads", "hardware", "vendor", "device_memory_gb", "devices_per_node", "nodes", "devices_total",
      "concurrency", "context_len", "input_len", "output_len", "modalities", "multimodal", "goal",
      "speculative_request"};
  return names;
}

const std::vector<std::string>& SettingNames() {
  static const std::vector<std::string> names = {
      "checkpoint", "parallelism", "tp", "pp", "dp", "ep", "replicas", "speculative", "draft_model",
      "num_speculative_tokens", "adaptive_verification", "attention_backend", "kv_cache_dtype", "max_model_len",
      "max_num_seqs", "prefix_caching", "chunked_prefill", "language_model_only", "block_size"};
  return names;
}

const std::vector<std::string>& DerivedFactNames() {
  static const std::vector<std::string> names = {
      "devices_used", "checkpoint_gb", "weights_per_device_gb", "usable_per_device_gb", "kv_budget_per_device_gb",
      "kv_gb_per_sequence", "kv_capacity_tokens", "kv_sequences", "tp_shape_problem", "ep_shape_problem"};
  return names;
}

namespace {

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Every {name} in a message must be a fact the stage can see.
Status CheckPlaceholders(const std::string& id, const std::string& message, bool check_stage) {
  for (size_t open = message.find('{'); open != std::string::npos; open = message.find('{', open + 1)) {
    const size_t close = message.find('}', open);
    if (close == std::string::npos) return InvalidArgument(fmt::format("rule {}: unclosed '{{' in its message", id));
    const std::string name = message.substr(open + 1, close - open - 1);
    if (!Contains(InputFactNames(), name) && !Contains(SettingNames(), name) &&
        !(check_stage && Contains(DerivedFactNames(), name))) {
      return InvalidArgument(fmt::format("rule {}: its message names unknown fact '{}'", id, name));
    }
  }
  return Status::Ok();
}

Status ValidateRule(const Rule& r) {
  const bool check = r.stage == Rule::Stage::kCheck;
  auto known = [&](const std::string& name) {
    return Contains(InputFactNames(), name) || Contains(SettingNames(), name) ||
           (check && Contains(DerivedFactNames(), name));
  };
  std::vector<const Expr*> exprs = {&r.when};
  for (const auto& [name, value] : r.set) {
    if (!Contains(SettingNames(), name)) return InvalidArgument(fmt::format("rule {} sets unknown setting '{}'", r.id, name));
    exprs.push_back(&value);
  }
  for (const Expr* e : exprs) {
    for (const std::string& name : e->Identifiers()) {
      if (!known(name)) return InvalidArgument(fmt::format("rule {} reads unknown fact '{}' in \"{}\"", r.id, name, e->text()));
    }
  }
  if (check && !r.set.empty()) return InvalidArgument(fmt::format("rule {}: check rules may not set settings", r.id));
  if (r.set.empty() && r.warn.empty() && r.refuse.empty()) {
    return InvalidArgument(fmt::format("rule {} has no effect: give it set, warn or refuse", r.id));
  }
  if (r.source.doc.empty() || r.source.quote.empty()) return InvalidArgument(fmt::format("rule {} has no source", r.id));
  EMBER_RETURN_IF_ERROR(CheckPlaceholders(r.id, r.warn, check));
  return CheckPlaceholders(r.id, r.refuse, check);
}

}  // namespace

Expected<std::vector<Rule>> ParseRules(std::string_view json_text) {
  const auto json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("rules") || !json["rules"].is_array()) {
    return InvalidArgument("rules data: expected an object with a 'rules' array");
  }
  std::vector<Rule> rules;
  std::set<std::string> ids;
  for (const auto& j : json["rules"]) {
    Rule r;
    try {
      r.id = j.at("id").get<std::string>();
      const std::string stage = j.at("stage").get<std::string>();
      if (stage != "choose" && stage != "check") {
        return InvalidArgument(fmt::format("rule {}: stage must be choose or check, got '{}'", r.id, stage));
      }
      r.stage = stage == "choose" ? Rule::Stage::kChoose : Rule::Stage::kCheck;
      r.is_default = j.value("default", false);
      auto when = Expr::Parse(j.at("when").get<std::string>());
      if (!when.ok()) return InvalidArgument(fmt::format("rule {}: {}", r.id, when.status().message()));
      r.when = std::move(*when);
      if (j.contains("set")) {
        for (const auto& [name, text] : j["set"].items()) {
          auto value = Expr::Parse(text.get<std::string>());
          if (!value.ok()) return InvalidArgument(fmt::format("rule {}: {}", r.id, value.status().message()));
          r.set.emplace_back(name, std::move(*value));
        }
      }
      r.warn = j.value("warn", "");
      r.refuse = j.value("refuse", "");
      r.source.doc = j.at("source").at("doc").get<std::string>();
      r.source.quote = j.at("source").at("quote").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument(fmt::format("rules data{}: {}", r.id.empty() ? "" : " (rule " + r.id + ")", e.what()));
    }
    if (!ids.insert(r.id).second) return InvalidArgument(fmt::format("rule id {} appears twice", r.id));
    EMBER_RETURN_IF_ERROR(ValidateRule(r));
    rules.push_back(std::move(r));
  }
  return rules;
}

const std::vector<Rule>& BuiltinRules() {
  static const std::vector<Rule> rules = [] {
    auto parsed = ParseRules(EmbeddedRulesJson());
    EMBER_CHECK(parsed.ok(), "built-in rules.json: {}", parsed.status().ToString());
    return std::move(*parsed);
  }();
  return rules;
}

const Rule* FindRule(std::string_view id) {
  for (const Rule& r : BuiltinRules()) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

std::string FillMessage(const std::string& message, const Facts& facts) {
  std::string out;
  size_t pos = 0;
  while (pos < message.size()) {
    const size_t open = message.find('{', pos);
    const size_t close = open == std::string::npos ? std::string::npos : message.find('}', open);
    if (close == std::string::npos) {
      out += message.substr(pos);
      break;
    }
    out += message.substr(pos, open - pos);
    const auto it = facts.find(message.substr(open + 1, close - open - 1));
    if (it == facts.end()) out += message.substr(open, close - open + 1);
    else out += it->second.kind == Value::Kind::kString ? it->second.string : it->second.ToString();
    pos = close + 1;
  }
  return out;
}

Expected<std::vector<HardwareProfile>> ParseHardware(std::string_view json_text) {
  const auto json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("hardware") || !json["hardware"].is_array()) {
    return InvalidArgument("hardware data: expected an object with a 'hardware' array");
  }
  std::vector<HardwareProfile> out;
  for (const auto& j : json["hardware"]) {
    HardwareProfile h;
    try {
      h.name = j.at("name").get<std::string>();
      h.vendor = j.at("vendor").get<std::string>();
      h.description = j.at("description").get<std::string>();
      h.memory_gb = j.at("memory_gb").get<double>();
      h.devices_per_node = j.at("devices_per_node").get<int64_t>();
      h.interconnect = j.at("interconnect").get<std::string>();
      h.memory_utilization = j.at("memory_utilization").get<double>();
      const std::string sizing = j.at("kv_sizing").get<std::string>();
      if (sizing != "all_free" && sizing != "as_needed") {
        return InvalidArgument(fmt::format("hardware {}: kv_sizing must be all_free or as_needed", h.name));
      }
      h.kv_as_needed = sizing == "as_needed";
      h.kv_max_fraction = j.at("kv_max_fraction").get<double>();
      h.source = j.at("source").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument(fmt::format("hardware data: {}", e.what()));
    }
    if (h.devices_per_node < 1 || h.memory_gb < 0 || h.memory_utilization <= 0 || h.memory_utilization > 1) {
      return InvalidArgument(fmt::format("hardware {}: devices_per_node, memory_gb or memory_utilization out of range", h.name));
    }
    out.push_back(std::move(h));
  }
  return out;
}

const std::vector<HardwareProfile>& BuiltinHardware() {
  static const std::vector<HardwareProfile> hardware = [] {
    auto parsed = ParseHardware(EmbeddedHardwareJson());
    EMBER_CHECK(parsed.ok(), "built-in hardware.json: {}", parsed.status().ToString());
    return std::move(*parsed);
  }();
  return hardware;
}

Expected<const HardwareProfile*> FindHardware(std::string_view name) {
  std::string known;
  for (const HardwareProfile& h : BuiltinHardware()) {
    if (h.name == name) return &h;
    known += (known.empty() ? "" : ", ") + h.name;
  }
  return InvalidArgument(fmt::format("unknown hardware '{}': use one of {} (ember recipe --list-hardware)", name, known));
}

}  // namespace ember::recipe
