// The prompt of a chat request, rendered and tokenized as /tokenize and /v1/chat/completions do
// (routes/chat_prompt.h), against transformers' apply_chat_template(..., tokenize=True) on SmolLM2
// and Gemma 3: every conversation of testdata/chat_template_ids.json
// (scripts/make_chat_ids_fixtures.py), through the same request parsing a /tokenize body gets.
// The vocabularies and templates are the committed extracts, so no model file is needed.
#include "server/routes/chat_prompt.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "../tokenizer/tokenizer_fixtures.h"

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;
using tokenizer_testing::FixturePath;
using tokenizer_testing::ReadFileBytes;

struct Model {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;
  ServingModel serving;
};

const Model& Load(const std::string& name) {
  static auto* models = new std::map<std::string, Model>();
  auto it = models->find(name);
  if (it != models->end()) return it->second;
  Model& m = (*models)[name];
  auto tok = Tokenizer::Create(tokenizer_testing::ReadVocab(name + "_vocab.bin.gz"));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  m.tokenizer = std::move(tok).value();
  auto tmpl = ChatTemplate::Parse(ReadFileBytes(FixturePath("templates/" + name + ".jinja")));
  EXPECT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  m.chat_template = std::make_unique<ChatTemplate>(std::move(tmpl).value());
  m.serving.tokenizer = m.tokenizer.get();
  m.serving.chat_template = m.chat_template.get();
  return m;
}

const json& Fixtures() {
  static const json* fixtures = new json(json::parse(ReadFileBytes(FixturePath("chat_template_ids.json"))));
  return *fixtures;
}

TEST(ChatPromptTest, TokenizeWithMessagesEqualsApplyChatTemplate) {
  size_t checked = 0, refused = 0;
  std::map<std::string, size_t> per_template;
  for (const json& c : Fixtures()["cases"]) {
    const std::string name = c["template"].get<std::string>() + "/" + c["case"].get<std::string>();
    const Model& model = Load(c["template"]);
    auto parsed = ParseTokenizeRequest(c["request"]);
    std::variant<std::string, ApiError> rendered = ApiError{};
    if (auto* request = std::get_if<TokenizeRequest>(&parsed)) {
      ASSERT_TRUE(request->chat.has_value()) << name;
      rendered = RenderChatPrompt(model.serving, *request->chat);
    } else {
      rendered = std::get<ApiError>(parsed);
    }
    if (c.contains("error")) {
      // transformers raised: the API answers 400.
      ASSERT_TRUE(std::holds_alternative<ApiError>(rendered)) << name << ": transformers raised " << c["error"];
      EXPECT_EQ(std::get<ApiError>(rendered).http_status, 400) << name;
      ++refused;
      continue;
    }
    ASSERT_TRUE(std::holds_alternative<std::string>(rendered))
        << name << ": " << std::get<ApiError>(rendered).message;
    const std::vector<int32_t> want = c["ids"];
    const std::vector<int32_t> got = TokenizeChatPrompt(model.serving, std::get<std::string>(rendered));
    EXPECT_EQ(got, want) << name;
    checked += got == want;
    ++per_template[c["template"]];
  }
  EXPECT_GE(per_template["smollm2"], 40u);
  EXPECT_GE(per_template["gemma3"], 30u);
  EXPECT_GE(refused, 10u);
  std::printf("[ chat prompts ] %zu equal to apply_chat_template, %zu refused as it refuses\n", checked, refused);
}

// The three template-facing divergences, one by one, on Gemma 3 (whose template trims content and
// loops over content parts).
TEST(ChatPromptTest, Gemma3ContinuesTrimmedMessagesAndSeesContentParts) {
  const Model& gemma = Load("gemma3");
  ChatPrompt chat;
  chat.add_generation_prompt = false;
  chat.continue_final_message = true;
  chat.messages = json::parse(R"([{"role": "user", "content": "Capital of France?"},
                                  {"role": "assistant", "content": "The capital is "}])");
  auto out = RenderChatPrompt(gemma.serving, chat);
  ASSERT_TRUE(std::holds_alternative<std::string>(out)) << std::get<ApiError>(out).message;
  EXPECT_EQ(std::get<std::string>(out),
            "<bos><start_of_turn>user\nCapital of France?<end_of_turn>\n<start_of_turn>model\nThe capital is");

  chat.continue_final_message = false;
  chat.add_generation_prompt = true;
  chat.messages = json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "Hello "},
                                                              {"type": "text", "text": " world"}]}])");
  out = RenderChatPrompt(gemma.serving, chat);
  ASSERT_TRUE(std::holds_alternative<std::string>(out)) << std::get<ApiError>(out).message;
  // Each part trimmed by the template, as transformers and vLLM render it; joined first, it would
  // read "Hello \n world".
  EXPECT_EQ(std::get<std::string>(out), "<bos><start_of_turn>user\nHelloworld<end_of_turn>\n<start_of_turn>model\n");

  // SmolLM2's template concatenates content as a string: it gets the parts joined by "\n".
  out = RenderChatPrompt(Load("smollm2").serving, chat);
  ASSERT_TRUE(std::holds_alternative<std::string>(out)) << std::get<ApiError>(out).message;
  EXPECT_NE(std::get<std::string>(out).find("<|im_start|>user\nHello \n world<|im_end|>"), std::string::npos);
}

}  // namespace
}  // namespace ember::server
