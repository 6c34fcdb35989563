// Muse Spark's channel messages (reference/muse_spark.md §6). After the generation prompt
// "<|start|>assistant" the model writes messages of the form
//   " to=RECIPIENT<|message|>BODY<|eom|>"   then "<|start|>assistant to=...<|message|>...<|eot|>"
// Recipient "self" (and a message without one) is private reasoning -> reasoning_content;
// "commentary" and "user" are visible content; any other recipient is a tool, whose body holds
//   <atem:function_calls><atem:invoke name="F"><atem:parameter name="A">V</atem:parameter>...
//   </atem:invoke></atem:function_calls>
// Only tool-channel bodies are parsed for calls, so an <atem:invoke> quoted in reasoning or in the
// answer is never mistaken for one. Needs the detokenizer to keep special tokens.
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "server/output_parsers/output_parser.h"

namespace ember::server {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kTerminators[] = {"<|eom|>", "<|eot|>", "<|end_of_text|>", "<|start|>"};

// The earliest terminator at or after `from`, and its length.
std::pair<size_t, size_t> FindTerminator(const std::string& text, size_t from) {
  std::pair<size_t, size_t> best{std::string::npos, 0};
  for (std::string_view t : kTerminators) {
    const size_t at = text.find(t, from);
    if (at < best.first) best = {at, t.size()};
  }
  return best;
}

// How much of a trailing unfinished body may be shown while streaming: everything except a suffix
// that could be the start of a terminator.
size_t StreamableLength(const std::string& body) {
  size_t hold = 0;
  for (std::string_view t : kTerminators) hold = std::max(hold, PartialMarkerSuffix(body, std::string(t)));
  return body.size() - hold;
}

std::string Recipient(const std::string& header) {
  const size_t at = header.find("to=");
  if (at == std::string::npos) return "";
  size_t end = at + 3;
  while (end < header.size() && header[end] != ' ' && header[end] != '\n' && header[end] != '<') ++end;
  return header.substr(at + 3, end - at - 3);
}

// The JSON type the tool's schema declares for `argument` of `function`, or "" when unknown.
std::string DeclaredType(const nlohmann::ordered_json& tools, const std::string& function, const std::string& argument) {
  if (!tools.is_array()) return "";
  // Every level is checked before it is read: the schema is the client's, of any shape.
  auto member = [](const nlohmann::ordered_json& obj, const std::string& key) -> const nlohmann::ordered_json* {
    if (!obj.is_object()) return nullptr;
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  };
  for (const auto& tool : tools) {
    const auto* f = member(tool, "function");
    const auto* name = f ? member(*f, "name") : nullptr;
    if (name == nullptr || *name != function) continue;
    const auto* params = member(*f, "parameters");
    const auto* props = params ? member(*params, "properties") : nullptr;
    const auto* arg = props ? member(*props, argument) : nullptr;
    const auto* type = arg ? member(*arg, "type") : nullptr;
    if (type != nullptr && type->is_string()) return type->get<std::string>();
  }
  return "";
}

// Values are written raw: strings as-is, everything else as JSON.
nlohmann::ordered_json ArgumentValue(const std::string& raw, const std::string& type) {
  if (type == "string") return raw;
  const auto parsed = nlohmann::ordered_json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return raw;
  if (type.empty() && parsed.is_string()) return raw;
  return parsed;
}

std::string Attribute(const std::string& tag, const std::string& name) {
  const std::string key = name + "=\"";
  const size_t at = tag.find(key);
  if (at == std::string::npos) return "";
  const size_t end = tag.find('"', at + key.size());
  return end == std::string::npos ? "" : tag.substr(at + key.size(), end - at - key.size());
}

// Parses every <atem:invoke> in a complete tool-channel body; nullopt if it is malformed.
std::optional<std::vector<ParsedToolCall>> ParseFunctionCalls(const std::string& body,
                                                              const nlohmann::ordered_json& tools) {
  std::vector<ParsedToolCall> calls;
  size_t at = 0;
  while (true) {
    const size_t open = body.find("<atem:invoke", at);
    if (open == std::string::npos) break;
    const size_t open_end = body.find('>', open);
    const size_t close = body.find("</atem:invoke>", open);
    if (open_end == std::string::npos || close == std::string::npos) return std::nullopt;
    ParsedToolCall call;
    call.name = Attribute(body.substr(open, open_end - open), "name");
    if (call.name.empty()) return std::nullopt;
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    size_t p = open_end + 1;
    while (true) {
      const size_t param = body.find("<atem:parameter", p);
      if (param == std::string::npos || param > close) break;
      const size_t param_end = body.find('>', param);
      const size_t value_end = body.find("</atem:parameter>", param);
      if (param_end == std::string::npos || value_end == std::string::npos || value_end > close) return std::nullopt;
      const std::string arg = Attribute(body.substr(param, param_end - param), "name");
      if (arg.empty()) return std::nullopt;
      args[arg] = ArgumentValue(body.substr(param_end + 1, value_end - param_end - 1), DeclaredType(tools, call.name, arg));
      p = value_end + std::string_view("</atem:parameter>").size();
    }
    call.arguments = args.dump();
    calls.push_back(std::move(call));
    at = close + std::string_view("</atem:invoke>").size();
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

void Append(std::string& to, const std::string& text) {
  if (!to.empty() && !text.empty()) to += "\n\n";
  to += text;
}

class MuseSparkParser : public OutputParser {
 public:
  bool needs_special_tokens() const override { return true; }
  // A named call opens the tool's channel and its invoke; "required" cannot be forced without
  // constrained decoding (the recipient could still be "user").
  std::string ForcedPrefix(const std::string& tool_choice, const std::string& function) const override {
    if (tool_choice != "named") return "";
    return fmt::format(" to={}<|message|><atem:function_calls>\n<atem:invoke name=\"{}\">\n", function, function);
  }

  ParsedOutput Parse(const std::string& text, bool final, const nlohmann::ordered_json& tools) const override {
    ParsedOutput out;
    size_t at = 0;
    while (at < text.size()) {
      if (text.compare(at, kStart.size(), kStart) == 0) at += kStart.size();
      const size_t body_start_marker = text.find(kMessage, at);
      if (body_start_marker == std::string::npos) {
        // A header still arriving; at the end, stray text is shown rather than lost.
        if (final) Append(out.content, text.substr(at));
        break;
      }
      const std::string recipient = Recipient(text.substr(at, body_start_marker - at));
      const size_t body_start = body_start_marker + kMessage.size();
      auto [end, end_len] = FindTerminator(text, body_start);
      const bool complete = end != std::string::npos || final;
      std::string body = text.substr(body_start, end == std::string::npos ? std::string::npos : end - body_start);
      const bool tool = !recipient.empty() && recipient != "self" && recipient != "commentary" && recipient != "user";
      if (tool) {
        if (!complete) break;  // a call is sent whole
        if (auto calls = ParseFunctionCalls(body, tools)) {
          for (auto& c : *calls) out.tool_calls.push_back(std::move(c));
        } else {
          Append(out.content, body);
        }
      } else {
        if (!complete) body.resize(StreamableLength(body));
        Append(recipient.empty() || recipient == "self" ? out.reasoning : out.content, body);
      }
      if (end == std::string::npos) break;
      at = end + end_len;
      // "<|start|>" both ends a message and begins the next; step back onto it.
      if (text.compare(end, kStart.size(), kStart) == 0) at = end;
    }
    return out;
  }
};

// Every Muse Spark model writes channel messages (ModelInfo::architecture is "muse_spark" for both
// the muse_spark and muse_spark_text config types).
const bool kRegistered =
    RegisterOutputParser({"muse_spark", [] { return std::make_unique<MuseSparkParser>(); }, {"muse_spark"}, ""});

}  // namespace

}  // namespace ember::server
