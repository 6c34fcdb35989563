// Turns a model's generated text into what the chat API returns: visible content, reasoning
// (`reasoning_content`) and tool calls, from the model's native format. One parser per format
// (Hermes-style <tool_call> JSON for the Llama/Qwen families, Muse Spark's channel messages with
// <atem:function_calls>), chosen by name; a new format is one more file that registers itself
// (RegisterOutputParser), saying also which models it serves when the parser is "auto".
//
// Streaming works by re-parsing the whole text so far with `final = false`: a parser then leaves out
// anything that may still be the start of a marker or an unfinished call, so every field only ever
// grows and the stream sends the difference (StreamDiffer).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "structured/constraint_spec.h"

namespace ember::server {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object as text, as OpenAI returns it
};

struct ParsedOutput {
  std::string content;
  std::string reasoning;
  std::vector<ParsedToolCall> tool_calls;  // complete calls only
};

class OutputParser {
 public:
  virtual ~OutputParser() = default;
  // `tools` is the request's tool list (null when none), for argument types.
  virtual ParsedOutput Parse(const std::string& text, bool final, const nlohmann::ordered_json& tools) const = 0;
  // Whether the detokenizer must keep special tokens (channel markers are special tokens).
  virtual bool needs_special_tokens() const { return false; }
  // Text appended to the prompt (and counted as the start of the output) so that the model
  // continues inside a call: tool_choice "required" or "named" (`function`). Without constrained
  // decoding this is how a call is forced; "" when the format cannot force it.
  virtual std::string ForcedPrefix(const std::string& tool_choice, const std::string& function) const { return ""; }
  // What may follow ForcedPrefix so that the call parses: for each function the call may name,
  // the text up to its arguments, their JSON schema (the function's parameters) and the text that
  // closes the call. The route constrains decoding to these; empty when the format cannot.
  virtual std::vector<structured::ToolCallShape> ForcedCallShapes(const std::string& tool_choice,
                                                                  const std::string& function,
                                                                  const nlohmann::ordered_json& tools) const {
    return {};
  }
};

// What a parser file registers: its --tool-call-parser name, a factory, and how "auto" recognises
// the models that speak its format.
struct OutputParserRegistration {
  std::string name;
  std::function<std::unique_ptr<OutputParser>()> make;
  // ModelInfo::architecture values whose models always write this format, whatever their chat
  // template shows (Muse Spark's channel messages are special tokens the template never spells out).
  std::vector<std::string> default_for_architectures;
  // A chat-template substring that shows the template teaches this format ("<tool_call>"); "" for none.
  std::string template_marker;
};

// Called from a static registrar in the parser's own file (binaries link ember_server
// whole-archive so that the registrars run). A name or an architecture registered twice is a bug.
bool RegisterOutputParser(OutputParserRegistration registration);

// The parser registered as `name` ("hermes", "muse_spark", "plain": everything is content); null
// for an unknown name.
std::unique_ptr<OutputParser> MakeOutputParser(const std::string& name);
// Every registered name, sorted.
std::vector<std::string> OutputParserNames();
// What "--tool-call-parser auto" picks for a model: the parser that claims its architecture, else
// the first parser (by name) whose template marker the chat template contains, else "plain".
std::string DefaultOutputParser(const std::string& architecture, const std::string& chat_template);

// Length of the longest suffix of `text` that is a proper prefix of `marker` (text that must be
// held back while streaming because the marker may be arriving).
size_t PartialMarkerSuffix(const std::string& text, const std::string& marker);

// What changed since the previous call: the new content and reasoning text and the tool calls that
// completed.
struct OutputDelta {
  std::string content;
  std::string reasoning;
  std::vector<ParsedToolCall> new_tool_calls;
  size_t first_tool_index = 0;  // OpenAI's tool_calls[].index of new_tool_calls[0]
  bool empty() const { return content.empty() && reasoning.empty() && new_tool_calls.empty(); }
};

class StreamDiffer {
 public:
  OutputDelta Next(const ParsedOutput& now);

 private:
  size_t content_sent_ = 0, reasoning_sent_ = 0, tools_sent_ = 0;
};

}  // namespace ember::server
