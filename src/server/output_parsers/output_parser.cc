#include "server/output_parsers/output_parser.h"

#include <algorithm>
#include <map>

#include "core/check.h"

namespace ember::server {
namespace {

// Ordered by name, so that OutputParserNames and the template-marker fallback do not depend on
// the order in which static initialisers ran.
std::map<std::string, OutputParserRegistration>& Registry() {
  static std::map<std::string, OutputParserRegistration> registry;
  return registry;
}

// The fallback of DefaultOutputParser, so it lives (and registers) here rather than in a file of
// its own that could be left out.
constexpr const char* kPlain = "plain";

class PlainParser : public OutputParser {
 public:
  ParsedOutput Parse(const std::string& text, bool, const nlohmann::ordered_json&) const override {
    return {text, "", {}};
  }
};

const bool kRegistered = RegisterOutputParser({kPlain, [] { return std::make_unique<PlainParser>(); }, {}, ""});

}  // namespace

bool RegisterOutputParser(OutputParserRegistration registration) {
  for (const auto& [name, other] : Registry()) {
    for (const std::string& arch : registration.default_for_architectures) {
      const auto& claimed = other.default_for_architectures;
      EMBER_CHECK(std::find(claimed.begin(), claimed.end(), arch) == claimed.end(),
                  "output parsers '{}' and '{}' both claim architecture '{}'", name, registration.name, arch);
    }
  }
  const std::string name = registration.name;
  EMBER_CHECK(Registry().emplace(name, std::move(registration)).second, "output parser '{}' registered twice", name);
  return true;
}

std::unique_ptr<OutputParser> MakeOutputParser(const std::string& name) {
  const auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : it->second.make();
}

std::vector<std::string> OutputParserNames() {
  std::vector<std::string> names;
  for (const auto& [name, registration] : Registry()) names.push_back(name);
  return names;
}

std::string DefaultOutputParser(const std::string& architecture, const std::string& chat_template) {
  for (const auto& [name, r] : Registry()) {
    const auto& archs = r.default_for_architectures;
    if (std::find(archs.begin(), archs.end(), architecture) != archs.end()) return name;
  }
  for (const auto& [name, r] : Registry()) {
    if (!r.template_marker.empty() && chat_template.find(r.template_marker) != std::string::npos) return name;
  }
  return kPlain;
}

size_t PartialMarkerSuffix(const std::string& text, const std::string& marker) {
  const size_t longest = std::min(text.size(), marker.size() - 1);
  for (size_t n = longest; n > 0; --n) {
    if (text.compare(text.size() - n, n, marker, 0, n) == 0) return n;
  }
  return 0;
}

OutputDelta StreamDiffer::Next(const ParsedOutput& now) {
  OutputDelta d;
  // A parser that only grows its fields is a contract; if it ever shrinks (it should not), send
  // nothing rather than garbage.
  if (now.content.size() > content_sent_) {
    d.content = now.content.substr(content_sent_);
    content_sent_ = now.content.size();
  }
  if (now.reasoning.size() > reasoning_sent_) {
    d.reasoning = now.reasoning.substr(reasoning_sent_);
    reasoning_sent_ = now.reasoning.size();
  }
  d.first_tool_index = tools_sent_;
  for (size_t i = tools_sent_; i < now.tool_calls.size(); ++i) d.new_tool_calls.push_back(now.tool_calls[i]);
  tools_sent_ = std::max(tools_sent_, now.tool_calls.size());
  return d;
}

}  // namespace ember::server
