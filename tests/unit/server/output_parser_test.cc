#include "server/output_parsers/output_parser.h"

#include <gtest/gtest.h>

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;

ParsedOutput ParseWith(const std::string& parser, const std::string& text, bool final = true,
                       const json& tools = nullptr) {
  return MakeOutputParser(parser)->Parse(text, final, tools);
}

// Streams `text` one character at a time through the parser and checks that the deltas add up to
// the final parse: fields only grow, calls arrive whole.
void ExpectStreamingMatchesFinal(const std::string& parser, const std::string& text, const json& tools = nullptr) {
  auto p = MakeOutputParser(parser);
  StreamDiffer differ;
  ParsedOutput streamed;
  for (size_t n = 1; n <= text.size(); ++n) {
    const ParsedOutput now = p->Parse(text.substr(0, n), false, tools);
    const OutputDelta d = differ.Next(now);
    streamed.content += d.content;
    streamed.reasoning += d.reasoning;
    EXPECT_EQ(d.first_tool_index, streamed.tool_calls.size());
    for (const auto& c : d.new_tool_calls) streamed.tool_calls.push_back(c);
  }
  const OutputDelta last = differ.Next(p->Parse(text, true, tools));
  streamed.content += last.content;
  streamed.reasoning += last.reasoning;
  for (const auto& c : last.new_tool_calls) streamed.tool_calls.push_back(c);
  const ParsedOutput final = p->Parse(text, true, tools);
  EXPECT_EQ(streamed.content, final.content) << text;
  EXPECT_EQ(streamed.reasoning, final.reasoning) << text;
  ASSERT_EQ(streamed.tool_calls.size(), final.tool_calls.size()) << text;
  for (size_t i = 0; i < final.tool_calls.size(); ++i) {
    EXPECT_EQ(streamed.tool_calls[i].name, final.tool_calls[i].name);
    EXPECT_EQ(streamed.tool_calls[i].arguments, final.tool_calls[i].arguments);
  }
}

TEST(HermesParserTest, ContentAndCalls) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const ParsedOutput out = ParseWith("hermes", text);
  EXPECT_EQ(out.content, "Let me check.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(out.tool_calls[0].arguments), json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(out.tool_calls[1].arguments, "{}");
  ExpectStreamingMatchesFinal("hermes", text);
}

TEST(HermesParserTest, MalformedOrUnfinishedCallsStayContent) {
  EXPECT_EQ(ParseWith("hermes", "a <tool_call>not json</tool_call>").content, "a <tool_call>not json</tool_call>");
  EXPECT_TRUE(ParseWith("hermes", "a <tool_call>not json</tool_call>").tool_calls.empty());
  EXPECT_EQ(ParseWith("hermes", "a <tool_call>{\"name\": \"f\"").content, "a <tool_call>{\"name\": \"f\"");
  // While streaming, a possible marker start is held back.
  EXPECT_EQ(ParseWith("hermes", "hello <tool_", false).content, "hello");
  EXPECT_EQ(ParseWith("hermes", "hello <tool_", true).content, "hello <tool_");
  ExpectStreamingMatchesFinal("hermes", "plain answer with <b>tags</b> and < signs\n");
}

TEST(MuseSparkParserTest, ChannelsReasoningContentAndCalls) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters":
      {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
       "units": {"type": "array"}, "zip": {"type": "string"}}}}}])");
  const std::string text =
      " to=self<|message|>The user wants weather. I may mention <atem:invoke name=\"x\"> here.<|eom|>"
      "<|start|>assistant to=commentary<|message|>Checking the forecast.<|eom|>"
      "<|start|>assistant to=get_weather<|message|><atem:function_calls>\n<atem:invoke name=\"get_weather\">\n"
      "<atem:parameter name=\"city\">Paris</atem:parameter>\n<atem:parameter name=\"days\">3</atem:parameter>\n"
      "<atem:parameter name=\"units\">[\"C\", \"F\"]</atem:parameter>\n<atem:parameter name=\"zip\">75001</atem:parameter>\n"
      "</atem:invoke>\n</atem:function_calls><|eom|>";
  const ParsedOutput out = ParseWith("muse_spark", text, true, tools);
  EXPECT_EQ(out.reasoning, "The user wants weather. I may mention <atem:invoke name=\"x\"> here.");
  EXPECT_EQ(out.content, "Checking the forecast.");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(out.tool_calls[0].arguments),
            json::parse(R"({"city": "Paris", "days": 3, "units": ["C", "F"], "zip": "75001"})"));
  ExpectStreamingMatchesFinal("muse_spark", text, tools);
}

TEST(MuseSparkParserTest, AnswerWithoutTerminatorAndRecipientlessReasoning) {
  const std::string text = "<|message|>thinking<|eom|><|start|>assistant to=user<|message|>The answer is 4.";
  const ParsedOutput out = ParseWith("muse_spark", text);
  EXPECT_EQ(out.reasoning, "thinking");
  EXPECT_EQ(out.content, "The answer is 4.");
  EXPECT_TRUE(out.tool_calls.empty());
  ExpectStreamingMatchesFinal("muse_spark", text);
  // A partial terminator is held back while streaming.
  EXPECT_EQ(ParseWith("muse_spark", " to=user<|message|>Hi<|e", false).content, "Hi");
}

TEST(OutputParserTest, Registry) {
  for (const std::string& name : OutputParserNames()) EXPECT_NE(MakeOutputParser(name), nullptr) << name;
  EXPECT_EQ(MakeOutputParser("nope"), nullptr);
  EXPECT_TRUE(MakeOutputParser("muse_spark")->needs_special_tokens());
  EXPECT_EQ(OutputParserNames(), (std::vector<std::string>{"hermes", "muse_spark", "plain"}));
  EXPECT_EQ(PartialMarkerSuffix("abc<tool", "<tool_call>"), 5u);
  EXPECT_EQ(PartialMarkerSuffix("abc", "<tool_call>"), 0u);
}

// "--tool-call-parser auto": the architecture a parser claims wins over the template, a template
// marker over the plain fallback.
TEST(OutputParserTest, DefaultForModel) {
  const std::string hermes_template = "{% for t in tools %}<tool_call>{{ t }}</tool_call>{% endfor %}";
  EXPECT_EQ(DefaultOutputParser("muse_spark", ""), "muse_spark");
  EXPECT_EQ(DefaultOutputParser("muse_spark", hermes_template), "muse_spark");
  EXPECT_EQ(DefaultOutputParser("llama", hermes_template), "hermes");
  EXPECT_EQ(DefaultOutputParser("llama", "{{ messages }}"), "plain");
  EXPECT_EQ(DefaultOutputParser("gemma3", ""), "plain");
}

}  // namespace
}  // namespace ember::server
