#include "tools/ember/bench/serve_spec_metrics.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ember::tools::bench {
namespace {

// "name{labels} value" -> the value of label `key`, parsed as an index; -1 if absent or bad.
int64_t LabelIndex(std::string_view labels, std::string_view key) {
  const std::string needle = std::string(key) + "=\"";
  const size_t at = labels.find(needle);
  if (at == std::string_view::npos) return -1;
  const std::string_view rest = labels.substr(at + needle.size());
  int64_t index = -1;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
  return ec == std::errc() && end < rest.data() + rest.size() && *end == '"' ? index : -1;
}

void SetAt(std::vector<double>* v, int64_t index, double value) {
  if (index < 0 || index > 1024) return;  // a hostile or broken exposition cannot size us
  if (v->size() <= static_cast<size_t>(index)) v->resize(index + 1, 0.0);
  (*v)[index] = value;
}

std::vector<double> Diff(const std::vector<double>& after, const std::vector<double>& before) {
  std::vector<double> out(after.size(), 0.0);
  for (size_t i = 0; i < after.size(); ++i) out[i] = after[i] - (i < before.size() ? before[i] : 0.0);
  return out;
}

}  // namespace

std::optional<SpecDecodeCounts> ParseSpecDecodeMetrics(std::string_view text) {
  SpecDecodeCounts c;
  bool found = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    const size_t space = line.rfind(' ');
    if (colon == std::string_view::npos || space == std::string_view::npos || colon > space) continue;
    const std::string_view prefix = line.substr(0, colon);
    if (prefix != "ember" && prefix != "vllm") continue;
    const size_t brace = line.find('{');
    const std::string_view name = line.substr(colon + 1, std::min(brace, space) - colon - 1);
    const std::string_view labels = brace < space ? line.substr(brace, space - brace) : std::string_view();
    const double value = std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
    // A counter is a finite count or time: "NaN" or "+Inf" from a broken or hostile server would
    // turn every sum and ratio of the level into NaN.
    if (!std::isfinite(value)) continue;
    if (name == "spec_decode_num_drafts_total") {
      c.num_drafts += value;
      found = true;
    } else if (name == "spec_decode_num_draft_tokens_total") {
      c.num_draft_tokens += value;
    } else if (name == "spec_decode_num_accepted_tokens_total") {
      c.num_accepted_tokens += value;
    } else if (name == "spec_decode_num_accepted_tokens_per_pos_total") {
      SetAt(&c.accepted_per_position, LabelIndex(labels, "position"), value);
    } else if (name == "spec_decode_num_drafts_per_len_total") {
      SetAt(&c.drafts_per_length, LabelIndex(labels, "length") - 1, value);
    } else if (name == "spec_decode_propose_seconds_total") {
      c.propose_seconds += value;
    } else if (name == "spec_decode_hidden_states_seconds_total") {
      c.hidden_states_seconds += value;
    }
  }
  if (!found) return std::nullopt;
  return c;
}

std::optional<SpecDecodeCounts> ScrapeSpecDecode(const ServerTarget& target) {
  int status = 0;
  auto text = GetText(target, "/metrics", &status);
  if (!text.ok() || status != 200) return std::nullopt;
  return ParseSpecDecodeMetrics(*text);
}

nlohmann::ordered_json SummarizeSpecDecode(const SpecDecodeCounts& before, const SpecDecodeCounts& after) {
  const double drafts = after.num_drafts - before.num_drafts;
  const double propose_seconds = after.propose_seconds - before.propose_seconds;
  const double hidden_states_seconds = after.hidden_states_seconds - before.hidden_states_seconds;
  if (!(drafts > 0) && !(propose_seconds > 0) && !(hidden_states_seconds > 0)) return nullptr;
  const double draft_tokens = after.num_draft_tokens - before.num_draft_tokens;
  const double accepted = after.num_accepted_tokens - before.num_accepted_tokens;
  // Per draft; a level where the plans verified nothing has none to divide by.
  const auto per_draft = [&](double n) { return drafts > 0 ? n / drafts : 0.0; };
  nlohmann::ordered_json per_position = nlohmann::ordered_json::array();
  for (double n : Diff(after.accepted_per_position, before.accepted_per_position)) per_position.push_back(per_draft(n));
  nlohmann::ordered_json per_length = nlohmann::ordered_json::array();
  for (double n : Diff(after.drafts_per_length, before.drafts_per_length)) per_length.push_back(per_draft(n));
  return {{"num_drafts", drafts},
          {"num_draft_tokens", draft_tokens},
          {"num_accepted_tokens", accepted},
          {"acceptance_rate", draft_tokens > 0 ? accepted / draft_tokens : 0.0},
          {"mean_acceptance_length", 1.0 + per_draft(accepted)},
          {"mean_verified_length", per_draft(draft_tokens)},
          {"acceptance_per_position", per_position},
          {"drafts_per_length", per_length},
          {"propose_seconds", propose_seconds},
          {"hidden_states_seconds", hidden_states_seconds}};
}

}  // namespace ember::tools::bench
