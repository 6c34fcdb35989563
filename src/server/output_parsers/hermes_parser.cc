// Hermes-style tool calls, used by the Qwen 2.5/3 and many Llama-family chat templates:
//   any text <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call> ...
// Text outside the tags is content; each tag pair holds one JSON call. A call whose JSON does not
// parse stays in the content verbatim (the client sees what the model said rather than nothing).
#include <memory>
#include <optional>

#include "server/output_parsers/output_parser.h"

namespace ember::server {
namespace {

constexpr const char* kOpen = "<tool_call>";
constexpr const char* kClose = "</tool_call>";

std::optional<ParsedToolCall> ParseCall(const std::string& body) {
  const auto json = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("name") || !json["name"].is_string()) return std::nullopt;
  ParsedToolCall call;
  call.name = json["name"].get<std::string>();
  const auto args = json.contains("arguments") ? json["arguments"] : nlohmann::ordered_json::object();
  call.arguments = args.is_string() ? args.get<std::string>() : args.dump();
  return call;
}

class HermesParser : public OutputParser {
 public:
  std::string ForcedPrefix(const std::string& tool_choice, const std::string& function) const override {
    if (tool_choice == "named") return std::string(kOpen) + "\n{\"name\": " + nlohmann::json(function).dump() + ", \"arguments\": ";
    if (tool_choice == "required") return std::string(kOpen) + "\n{\"name\": \"";
    return "";
  }

  // After the prefix: (for "required") the name and `", "arguments": `, then the arguments, then
  // the object's close and the tag's.
  std::vector<structured::ToolCallShape> ForcedCallShapes(const std::string& tool_choice, const std::string& function,
                                                          const nlohmann::ordered_json& tools) const override {
    std::vector<structured::ToolCallShape> shapes;
    if (tool_choice != "named" && tool_choice != "required") return shapes;
    for (const auto& t : tools) {
      const std::string name = t["function"]["name"].get<std::string>();
      if (tool_choice == "named" && name != function) continue;
      structured::ToolCallShape shape;
      // The prefix opened the name's string: the rest of it is the JSON-escaped name minus its quote.
      if (tool_choice == "required") shape.before = nlohmann::json(name).dump().substr(1) + ", \"arguments\": ";
      const auto& f = t["function"];
      if (f.contains("parameters") && f["parameters"].is_object()) shape.parameters_schema = f["parameters"].dump();
      shape.after = std::string("}\n") + kClose;
      shapes.push_back(std::move(shape));
    }
    return shapes;
  }

  ParsedOutput Parse(const std::string& text, bool final, const nlohmann::ordered_json&) const override {
    ParsedOutput out;
    const std::string open = kOpen, close = kClose;
    size_t at = 0;
    while (at < text.size()) {
      const size_t start = text.find(open, at);
      if (start == std::string::npos) {
        std::string tail = text.substr(at);
        if (!final) tail.resize(tail.size() - PartialMarkerSuffix(tail, open));
        out.content += tail;
        break;
      }
      out.content += text.substr(at, start - at);
      const size_t body_start = start + open.size();
      const size_t end = text.find(close, body_start);
      if (end == std::string::npos) {
        // An unfinished call: wait for it while streaming; at the end it is content.
        if (final) out.content += text.substr(start);
        break;
      }
      if (auto call = ParseCall(text.substr(body_start, end - body_start))) {
        out.tool_calls.push_back(std::move(*call));
      } else {
        out.content += text.substr(start, end + close.size() - start);
      }
      at = end + close.size();
    }
    // Whitespace the model puts between the content and its calls is not content. While streaming,
    // trailing whitespace waits until it is known not to precede a call.
    if (!out.tool_calls.empty() || !final) {
      while (!out.content.empty() && (out.content.back() == '\n' || out.content.back() == ' ')) out.content.pop_back();
    }
    return out;
  }
};

// No architecture claims it: a model speaks it when its chat template teaches the tags.
const bool kRegistered = RegisterOutputParser({"hermes", [] { return std::make_unique<HermesParser>(); }, {}, kOpen});

}  // namespace

}  // namespace ember::server
