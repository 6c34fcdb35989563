// Real chat templates (SmolLM2, Gemma 3, Qwen3, Muse Spark: tests/unit/tokenizer/testdata/
// templates) over fuzzed conversations: what a chat request controls. Input: one byte picks the
// template, one byte the flags, then a JSON object {"messages": [...], "tools": [...], "extra":
// {...}}; bytes that are not such JSON become the content of one user message, so raw mutations
// (invalid UTF-8 included) reach the renderer too. Beyond "no crash, no sanitizer report": no hang,
// nothing thrown, and every failure is a Status.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template_inputs.h"
#include "support/source_dir.h"
#include "tokenizer/chat_template.h"

namespace {

using nlohmann::ordered_json;

struct Named {
  const char* file;
  const char* bos;
  const char* eos;
};
constexpr Named kTemplates[] = {
    {"smollm2.jinja", "<|im_start|>", "<|im_end|>"},
    {"gemma3.jinja", "<bos>", "<eos>"},
    {"qwen3.jinja", "", "<|im_end|>"},
    {"muse_spark_xhigh.jinja", "<|begin_of_text|>", "<|eot_id|>"},
};

const std::vector<ember::ChatTemplate>& Templates() {
  static const auto* templates = [] {
    auto* all = new std::vector<ember::ChatTemplate>;
    for (const Named& t : kTemplates) {
      std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/tests/unit/tokenizer/testdata/templates/" + t.file);
      std::stringstream text;
      text << in.rdbuf();
      auto parsed = ember::ChatTemplate::Parse(text.str());
      if (!parsed.ok()) __builtin_trap();  // the harness's own data
      all->push_back(std::move(*parsed));
    }
    return all;
  }();
  return *templates;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t which = data[0] % std::size(kTemplates);
  const uint8_t flags = data[1];
  const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);

  ember::ChatTemplateInputs in;
  ember::fuzz::FuzzLimits(&in);
  in.bos_token = kTemplates[which].bos;
  in.eos_token = kTemplates[which].eos;
  in.add_generation_prompt = flags & 1;
  // Depth-limited as the server's request parser is (the harness copies the parts it uses, and
  // nlohmann's copy recurses).
  const auto shallow = [](int depth, ordered_json::parse_event_t, ordered_json&) { return depth <= 300; };
  ordered_json doc = ordered_json::parse(rest, shallow, /*allow_exceptions=*/false);
  if (doc.is_object()) {
    in.messages = doc.contains("messages") ? doc["messages"] : ordered_json::array();
    if (doc.contains("tools")) in.tools = doc["tools"];
    if (doc.contains("extra")) in.extra = doc["extra"];
  } else {
    // Not a JSON object: the bytes are one user message (after a system one, if flagged).
    if (flags & 2) in.messages.push_back({{"role", "system"}, {"content", "sys"}});
    in.messages.push_back({{"role", (flags & 4) ? "assistant" : "user"}, {"content", std::string(rest)}});
  }
  (void)Templates()[which].Render(in);
  return 0;
}
