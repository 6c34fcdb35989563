#include "recipe/report.h"

#include <fmt/format.h>

namespace ember::recipe {

namespace {

nlohmann::json ValueToJson(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kBool: return v.boolean;
    case Value::Kind::kNumber:
      if (v.number == static_cast<double>(static_cast<int64_t>(v.number))) return static_cast<int64_t>(v.number);
      return v.number;
    case Value::Kind::kString: return v.string;
    case Value::Kind::kList: return v.list;
  }
  return nullptr;
}

nlohmann::json FindingsJson(const std::vector<Finding>& findings) {
  nlohmann::json out = nlohmann::json::array();
  for (const Finding& f : findings) {
    out.push_back({{"rule", f.rule_id}, {"message", f.message}, {"source", f.source.doc}, {"quote", f.source.quote}});
  }
  return out;
}

std::string Bytes(int64_t b) {
  if (b >= 1'000'000'000) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1'000'000) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1'000) return fmt::format("{:.1f} KB", b / 1e3);
  return fmt::format("{} B", b);
}

std::string Kind(const KvGroupRow& g) {
  return g.kind == kv::AttentionKind::kFull ? std::string("full") : fmt::format("sliding {}", g.window);
}

const Value& Fact(const Recipe& r, const char* name) { return r.facts.at(name); }

}  // namespace

nlohmann::json RecipeToJson(const Recipe& r) {
  const MemoryPlan& m = r.memory;
  const Workload& w = r.request.workload;
  nlohmann::json weights_checkpoint, weights_device;
  for (int c = 0; c < kNumComponents; ++c) {
    const std::string name(ComponentName(static_cast<Component>(c)));
    weights_checkpoint[name] = m.checkpoint[c];
    weights_device[name] = m.per_device[c];
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const KvGroupRow& g : m.kv_groups) {
    groups.push_back({{"kind", g.kind == kv::AttentionKind::kFull ? "full" : "sliding"},
                      {"window", g.window},
                      {"layers", g.layers},
                      {"bytes_per_token_per_device", g.bytes_per_token},
                      {"tokens_held_per_sequence", g.tokens_held_per_sequence}});
  }
  nlohmann::json decisions = nlohmann::json::object();
  for (const Decision& d : r.decisions) decisions[d.setting] = {{"value", ValueToJson(d.value)}, {"rule", d.rule_id}};
  nlohmann::json command_argv = r.command.argv;
  return {
      {"ok", r.ok()},
      {"model", {{"name", r.model.name}, {"source", r.model.source}, {"architecture", r.model.architecture},
                 {"layers", r.model.num_layers}, {"max_position_embeddings", r.model.max_position_embeddings}}},
      {"hardware", {{"name", r.hardware.name}, {"vendor", r.hardware.vendor},
                    {"memory_bytes_per_device", r.device_memory_bytes},
                    {"devices_per_node", Fact(r, "devices_per_node").number}, {"nodes", r.request.nodes},
                    {"interconnect", r.hardware.interconnect}}},
      {"workload", {{"concurrency", w.concurrency}, {"context_len", w.context_len}, {"input_len", w.input_len},
                    {"output_len", w.output_len}, {"modalities", w.modalities}, {"goal", w.goal},
                    {"speculative", w.speculative}}},
      {"checkpoint", Fact(r, "checkpoint").string},
      {"parallelism", {{"kind", Fact(r, "parallelism").string}, {"tp", ValueToJson(Fact(r, "tp"))},
                       {"pp", ValueToJson(Fact(r, "pp"))}, {"dp", ValueToJson(Fact(r, "dp"))},
                       {"ep", Fact(r, "ep").boolean}, {"replicas", ValueToJson(Fact(r, "replicas"))},
                       {"devices_used", ValueToJson(Fact(r, "devices_used"))}}},
      {"speculative", {{"enabled", Fact(r, "speculative").boolean}, {"draft_model", Fact(r, "draft_model").string},
                       {"num_speculative_tokens", ValueToJson(Fact(r, "num_speculative_tokens"))},
                       {"adaptive_verification", Fact(r, "adaptive_verification").boolean},
                       {"attention_backend", Fact(r, "attention_backend").string}}},
      {"kv_cache", {{"dtype", Fact(r, "kv_cache_dtype").string}, {"resolved_dtype", kv::KvDtypeName(r.kv_dtype)},
                    {"block_size", ValueToJson(Fact(r, "block_size"))}}},
      {"scheduler", {{"max_model_len", ValueToJson(Fact(r, "max_model_len"))},
                     {"max_num_seqs", ValueToJson(Fact(r, "max_num_seqs"))},
                     {"prefix_caching", Fact(r, "prefix_caching").boolean},
                     {"chunked_prefill", Fact(r, "chunked_prefill").boolean},
                     {"language_model_only", Fact(r, "language_model_only").boolean}}},
      {"weights", {{"checkpoint_bytes", m.checkpoint_total}, {"checkpoint_by_component", weights_checkpoint},
                   {"per_device_bytes", m.per_device_total}, {"per_device_by_component", weights_device},
                   {"tensors", r.tensors.size()}}},
      {"kv", {{"groups", groups}, {"usable_bytes_per_device", m.usable_per_device},
              {"budget_bytes_per_device", m.kv_budget_per_device},
              {"bytes_per_sequence_per_device", m.kv_bytes_per_sequence},
              {"bytes_per_sequence_all_full_attention", m.kv_bytes_per_sequence_all_full},
              {"hybrid_ratio", r.hybrid_kv_ratio}, {"capacity_tokens", m.kv_capacity_tokens},
              {"sequences_at_max_model_len", m.kv_sequences}, {"num_blocks", m.kv.num_blocks}}},
      {"command", {{"argv", command_argv}, {"future_flags", r.command.future_flags}, {"notes", r.command.notes},
                   {"line", r.command.Line()}}},
      {"decisions", decisions},
      {"warnings", FindingsJson(r.warnings)},
      {"refusals", FindingsJson(r.refusals)},
      {"rules_fired", r.fired},
  };
}

std::string RecipeToText(const Recipe& r) {
  const MemoryPlan& m = r.memory;
  const Workload& w = r.request.workload;
  std::string s;
  auto line = [&](const std::string& text) { s += text + "\n"; };
  line(fmt::format("ember recipe: {} ({}) on {} x {} {} ({} per device, {})", r.model.name, Fact(r, "checkpoint").string,
                   r.request.nodes, Fact(r, "devices_per_node").ToString(), r.hardware.name,
                   Bytes(r.device_memory_bytes), r.hardware.interconnect));
  line(fmt::format("workload: concurrency {}, context {}, input {}, output {}, modalities {}, goal {}, speculative {}",
                   w.concurrency, w.context_len > 0 ? std::to_string(w.context_len) : "default", w.input_len,
                   w.output_len, Value::List(w.modalities).ToString(), w.goal, w.speculative));
  line("");
  line(fmt::format("{:<20} {:>14} {:>14}", "weights", "checkpoint", "per device"));
  for (int c = 0; c < kNumComponents; ++c) {
    if (m.checkpoint[c] == 0) continue;
    line(fmt::format("{:<20} {:>14} {:>14}", ComponentName(static_cast<Component>(c)), Bytes(m.checkpoint[c]),
                     Bytes(m.per_device[c])));
  }
  line(fmt::format("{:<20} {:>14} {:>14}", "total", Bytes(m.checkpoint_total), Bytes(m.per_device_total)));
  line("");
  line(fmt::format("KV cache ({} elements, block {} tokens), per device:", kv::KvDtypeName(r.kv_dtype),
                   Fact(r, "block_size").ToString()));
  line(fmt::format("  {:<14} {:>7} {:>16} {:>22}", "group", "layers", "bytes/token", "tokens held/sequence"));
  for (const KvGroupRow& g : m.kv_groups) {
    line(fmt::format("  {:<14} {:>7} {:>16} {:>22}", Kind(g), g.layers, g.bytes_per_token, g.tokens_held_per_sequence));
  }
  line(fmt::format("  one sequence of {} tokens: {} ({:.3f} of all-full-attention {})",
                   Fact(r, "max_model_len").ToString(), Bytes(m.kv_bytes_per_sequence), r.hybrid_kv_ratio,
                   Bytes(m.kv_bytes_per_sequence_all_full)));
  line(fmt::format("  usable {} - weights {} = KV budget {}: {} tokens, {} full-length sequences",
                   Bytes(m.usable_per_device), Bytes(m.per_device_total), Bytes(m.kv_budget_per_device),
                   m.kv_capacity_tokens, m.kv_sequences));
  line("");
  line("settings (rule that chose each):");
  for (const Decision& d : r.decisions) {
    line(fmt::format("  {:<24} {:<34} {}", d.setting, r.facts.at(d.setting).ToString(), d.rule_id));
  }
  line("");
  line("command:");
  line("  " + r.command.Line());
  for (const std::string& n : r.command.notes) line("  # " + n);
  if (!r.warnings.empty()) {
    line("");
    line("warnings:");
    for (const Finding& f : r.warnings) line(fmt::format("  [{}] {} ({})", f.rule_id, f.message, f.source.doc));
  }
  if (!r.refusals.empty()) {
    line("");
    line("REFUSED:");
    for (const Finding& f : r.refusals) line(fmt::format("  [{}] {} ({})", f.rule_id, f.message, f.source.doc));
  }
  return s;
}

std::string HardwareTable() {
  std::string s = fmt::format("{:<8} {:<7} {:>10} {:>9}  {}\n", "name", "vendor", "memory", "per node", "interconnect");
  for (const HardwareProfile& h : BuiltinHardware()) {
    s += fmt::format("{:<8} {:<7} {:>10} {:>9}  {}\n", h.name, h.vendor,
                     h.memory_gb > 0 ? fmt::format("{:g} GB", h.memory_gb) : std::string("detected"),
                     h.devices_per_node, h.interconnect);
  }
  return s;
}

nlohmann::json HardwareJson() {
  nlohmann::json out = nlohmann::json::array();
  for (const HardwareProfile& h : BuiltinHardware()) {
    out.push_back({{"name", h.name}, {"vendor", h.vendor}, {"description", h.description},
                   {"memory_gb", h.memory_gb}, {"devices_per_node", h.devices_per_node},
                   {"interconnect", h.interconnect}, {"memory_utilization", h.memory_utilization},
                   {"source", h.source}});
  }
  return out;
}

std::string ExplainRule(const Rule& rule) {
  std::string s = fmt::format("{} ({} stage{})\n  when:   {}\n", rule.id,
                              rule.stage == Rule::Stage::kChoose ? "choose" : "check",
                              rule.is_default ? ", default" : "", rule.when.text());
  for (const auto& [name, expr] : rule.set) s += fmt::format("  set:    {} = {}\n", name, expr.text());
  if (!rule.warn.empty()) s += fmt::format("  warn:   {}\n", rule.warn);
  if (!rule.refuse.empty()) s += fmt::format("  refuse: {}\n", rule.refuse);
  s += fmt::format("  source: {}\n          \"{}\"\n", rule.source.doc, rule.source.quote);
  return s;
}

}  // namespace ember::recipe
