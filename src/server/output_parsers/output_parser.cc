#include "server/output_parsers/output_parser.h"

#include <algorithm>

namespace ember::server {

std::unique_ptr<OutputParser> MakeHermesParser();
std::unique_ptr<OutputParser> MakeMuseSparkParser();

namespace {
class PlainParser : public OutputParser {
 public:
  ParsedOutput Parse(const std::string& text, bool, const nlohmann::ordered_json&) const override {
    return {text, "", {}};
  }
};
}  // namespace

std::unique_ptr<OutputParser> MakeOutputParser(const std::string& name) {
  if (name == "plain") return std::make_unique<PlainParser>();
  if (name == "hermes") return MakeHermesParser();
  if (name == "muse_spark") return MakeMuseSparkParser();
  return nullptr;
}

std::vector<std::string> OutputParserNames() { return {"plain", "hermes", "muse_spark"}; }

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
