// POST /v1/chat/completions: messages rendered with the model's own chat template, the reply
// parsed into content, reasoning_content and tool_calls by the model's output parser.
#include <fmt/format.h>

#include "server/http_util.h"
#include "server/protocol/kv_transfer_params.h"
#include "server/routes/chat_prompt.h"
#include "server/routes/prepare.h"
#include "server/routes/routes.h"
#include "server/routes/streaming.h"

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;

json LogprobsJson(const std::vector<LogprobEntry>& entries) {
  json content = json::array();
  auto bytes = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(c);
    return b;
  };
  for (const LogprobEntry& e : entries) {
    json top = json::array();
    for (const auto& [text, lp] : e.top) top.push_back({{"token", text}, {"logprob", lp}, {"bytes", bytes(text)}});
    content.push_back({{"token", e.token}, {"logprob", e.logprob}, {"bytes", bytes(e.token)}, {"top_logprobs", top}});
  }
  return content;
}

json ToolCallJson(const ParsedToolCall& call, size_t index, bool with_index) {
  json c = {{"id", NewRequestId("call_").substr(0, 29)}, {"type", "function"},
            {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
  if (with_index) {
    json indexed = {{"index", index}};
    indexed.update(c);
    c = std::move(indexed);
  }
  return c;
}

std::string FinishReason(const TextDelta& d, bool has_tool_calls) {
  return d.finish_reason == "stop" && has_tool_calls ? "tool_calls" : d.finish_reason;
}

// vLLM's echo: the final message's content comes first in the reply when that message has the
// role being generated, which is the assistant's with add_generation_prompt and otherwise the final
// message's own (so continuing a message, or echo without a generation prompt, repeats it).
std::string EchoText(const ChatCompletionRequest& request) {
  if (!request.echo) return "";
  const json& last = request.chat.messages.back();
  const std::string role = last["role"].get<std::string>();
  if (request.chat.add_generation_prompt && role != "assistant") return "";
  return last.contains("content") ? ContentText(last["content"]) : "";
}

}  // namespace

void HandleChatCompletions(ServingContext& context, const HttpRequest& req, HttpResponse& res) {
  auto body = ParseJsonBody(req);
  if (auto* e = std::get_if<ApiError>(&body)) return SendError(res, *e);
  SamplingParams defaults = context.config.default_sampling;
  defaults.max_tokens = context.config.default_max_tokens;
  auto parsed = ParseChatCompletionRequest(std::get<json>(body), defaults);
  if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(res, *e);
  ChatCompletionRequest& request = std::get<ChatCompletionRequest>(parsed);
  auto admitted = Admit(context, request.common.model, /*num_prompts=*/1, request.common.sampling.n);
  if (auto* e = std::get_if<ApiError>(&admitted)) return SendError(res, *e);

  const bool tools_enabled = request.tool_choice != "none";
  auto rendered = RenderChatPrompt(context.model, request.chat, tools_enabled);
  if (auto* e = std::get_if<ApiError>(&rendered)) return SendError(res, *e);
  std::string prompt_text = std::move(std::get<std::string>(rendered));
  const OutputParser& parser = *context.model.output_parser;
  const std::string forced = tools_enabled ? parser.ForcedPrefix(request.tool_choice, request.forced_function) : "";
  prompt_text += forced;
  if (!forced.empty()) {
    // A forced call is constrained to parse: the function's name and its parameters' schema.
    std::vector<structured::ToolCallShape> shapes =
        parser.ForcedCallShapes(request.tool_choice, request.forced_function, request.chat.tools);
    if (!shapes.empty()) {
      if (request.common.constraint) {
        return SendError(res, BadRequest(fmt::format("'{}' cannot be combined with tool_choice \"{}\"",
                                                     request.common.constraint_field, request.tool_choice),
                                         "tool_choice"));
      }
      structured::ConstraintSpec spec;
      spec.kind = structured::ConstraintSpec::Kind::kToolCall;
      spec.tool_calls = std::move(shapes);
      request.common.constraint = std::move(spec);
      request.common.constraint_field = "tools";
    }
  }
  // The template writes BOS itself when the model wants one.
  std::vector<std::vector<int32_t>> prompts = {TokenizeChatPrompt(context.model, prompt_text)};
  auto media = ExpandChatMedia(context, request.chat, request.use_audio_in_video, &prompts[0]);
  if (auto* e = std::get_if<ApiError>(&media)) return SendError(res, *e);
  const std::vector<MultiModalFeature>& features = std::get<std::vector<MultiModalFeature>>(media);
  auto choices = MakeChoices(context, request.common, prompts);
  if (auto* e = std::get_if<ApiError>(&choices)) return SendError(res, *e);
  for (ChoiceSpec& c : std::get<std::vector<ChoiceSpec>>(choices)) c.mm_features = features;

  const std::string id = NewRequestId("chatcmpl-");
  const int64_t created = UnixNow();
  const std::string model = context.config.served_model_name;
  const bool want_logprobs = request.common.sampling.logprobs.has_value();
  const json tools = request.chat.tools;
  const std::string echo = EchoText(request);
  auto job = std::make_shared<GenerationJob>(&context, std::move(std::get<std::vector<ChoiceSpec>>(choices)), id,
                                             std::move(std::get<Admission::Slot>(admitted)));
  job->Start();
  auto parse = [&parser, tools_enabled, tools, forced](const std::string& text, bool final) {
    ParsedOutput out = parser.Parse(forced + text, final, tools);
    if (!tools_enabled) out.tool_calls.clear();
    // A forced call (tool_choice required or named) answers with calls only, as OpenAI does;
    // whatever the model writes after the call is not part of the answer. A call cut short
    // (max_tokens) did not parse: its text stays as content, with finish_reason "length", rather
    // than vanish.
    if (!forced.empty() && (!out.tool_calls.empty() || !final)) out.content.clear();
    return out;
  };

  if (request.common.stream) {
    struct ChoiceState {
      std::string text;
      StreamDiffer differ;
      bool started = false;
      bool any_tool_call = false;
    };
    auto states = std::make_shared<std::vector<ChoiceState>>(job->num_choices());
    auto chunk = [=](json choice) {
      json c = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                {"choices", json::array({std::move(choice)})}};
      if (request.common.include_usage) c["usage"] = nullptr;
      return c;
    };
    StreamFormat format;
    format.on_delta = [=](const ChoiceDelta& d) {
      std::vector<json> out;
      ChoiceState& st = (*states)[d.choice];
      if (!st.started) {
        st.started = true;
        out.push_back(chunk({{"index", d.choice}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                             {"logprobs", nullptr}, {"finish_reason", nullptr}}));
        if (!echo.empty()) {
          out.push_back(chunk({{"index", d.choice}, {"delta", {{"content", echo}}}, {"logprobs", nullptr},
                               {"finish_reason", nullptr}}));
        }
      }
      st.text += d.delta.text;
      const OutputDelta od = st.differ.Next(parse(st.text, d.delta.finished));
      json delta = json::object();
      if (!od.reasoning.empty()) delta["reasoning_content"] = od.reasoning;
      if (!od.content.empty()) delta["content"] = od.content;
      if (!od.new_tool_calls.empty()) {
        json calls = json::array();
        for (size_t i = 0; i < od.new_tool_calls.size(); ++i) {
          calls.push_back(ToolCallJson(od.new_tool_calls[i], od.first_tool_index + i, true));
        }
        delta["tool_calls"] = calls;
        st.any_tool_call = true;
      }
      if (delta.empty() && !d.delta.finished && d.delta.logprobs.empty()) return out;
      json choice = {{"index", d.choice}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
      if (want_logprobs) choice["logprobs"] = {{"content", LogprobsJson(d.delta.logprobs)}};
      if (d.delta.finished) choice["finish_reason"] = FinishReason(d.delta, st.any_tool_call);
      out.push_back(chunk(std::move(choice)));
      return out;
    };
    format.on_done = [=](const GenerationJob& j) {
      std::vector<json> out;
      if (request.common.include_usage) {
        out.push_back({{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                       {"choices", json::array()}, {"usage", UsageJson(j.usage())}});
      }
      return out;
    };
    return StreamJob(res, job, std::move(format));
  }

  struct Collected {
    std::vector<std::string> texts;
    std::vector<std::vector<LogprobEntry>> logprobs;
    std::vector<TextDelta> last;
    std::string error;
  };
  auto acc = std::make_shared<Collected>();
  acc->texts.resize(job->num_choices());
  acc->logprobs.resize(job->num_choices());
  acc->last.resize(job->num_choices());
  CollectFormat format;
  format.on_delta = [acc](const ChoiceDelta& d) {
    acc->texts[d.choice] += d.delta.text;
    for (const LogprobEntry& e : d.delta.logprobs) acc->logprobs[d.choice].push_back(e);
    if (d.delta.finished) {
      acc->last[d.choice] = d.delta;
      if (d.delta.finish_reason == "error" && acc->error.empty()) acc->error = d.delta.error;
    }
  };
  format.on_done = [=, engine = context.engine](const GenerationJob& j, HttpResponse& out) {
    if (!acc->error.empty()) return SendError(out, GenerationError(*engine, acc->error));
    json out_choices = json::array();
    for (size_t i = 0; i < j.num_choices(); ++i) {
      const ParsedOutput p = parse(acc->texts[i], true);
      json message = {{"role", "assistant"}};
      message["content"] = p.content.empty() && !p.tool_calls.empty() ? json() : json(p.content);
      // With echo the content is always a string, as vLLM makes it (echo text + content or "").
      if (request.echo) message["content"] = echo + p.content;
      if (!p.reasoning.empty()) message["reasoning_content"] = p.reasoning;
      if (!p.tool_calls.empty()) {
        json calls = json::array();
        for (size_t k = 0; k < p.tool_calls.size(); ++k) calls.push_back(ToolCallJson(p.tool_calls[k], k, false));
        message["tool_calls"] = calls;
      }
      json choice = {{"index", i}, {"message", message},
                     {"logprobs", want_logprobs ? json{{"content", LogprobsJson(acc->logprobs[i])}} : json()},
                     {"finish_reason", FinishReason(acc->last[i], !p.tool_calls.empty())}};
      choice["stop_reason"] = StopReason(acc->last[i]);
      out_choices.push_back(std::move(choice));
    }
    json body = {{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model},
                 {"choices", out_choices}, {"usage", UsageJson(j.usage())}};
    if (j.kv_transfer_params()) body["kv_transfer_params"] = KvTransferParamsJson(*j.kv_transfer_params());
    SendJson(out, body);
  };
  CollectJob(res, job, std::move(format));
}

}  // namespace ember::server
