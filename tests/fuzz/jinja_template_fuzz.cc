// The Jinja engine (tokenizer/jinja, through ChatTemplate) on arbitrary template source, rendered
// over a fixed conversation with tools. Beyond "no crash, no sanitizer report": no hang and no
// unbounded memory, i.e. every render stops within its limits (loops, recursion and the text and
// values it builds), with an error where the template would go past them. The limits are set
// lower than the defaults so that the fuzzer spends its time on many templates, not long ones.
#include <cstdint>
#include <string>

#include "chat_template_inputs.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tmpl = ember::ChatTemplate::Parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!tmpl.ok()) return 0;
  static const ember::ChatTemplateInputs inputs = ember::fuzz::FixedConversation();
  (void)tmpl->Render(inputs);
  return 0;
}
