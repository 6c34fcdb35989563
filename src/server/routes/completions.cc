// POST /v1/completions: text (or token-id) prompts in, completions out, streamed or not.
#include <fmt/format.h>

#include "server/http_util.h"
#include "server/routes/prepare.h"
#include "server/routes/routes.h"
#include "server/routes/streaming.h"

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;

// OpenAI's legacy completions logprobs: parallel arrays plus text offsets.
struct CompletionLogprobs {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       text_offset = json::array();
  void Add(const std::vector<LogprobEntry>& entries, int64_t* offset) {
    for (const LogprobEntry& e : entries) {
      tokens.push_back(e.token);
      token_logprobs.push_back(e.logprob);
      json top = json::object();
      for (const auto& [text, lp] : e.top) top[text] = lp;
      top_logprobs.push_back(top);
      text_offset.push_back(*offset);
      *offset += static_cast<int64_t>(e.token.size());
    }
  }
  json ToJson() const {
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
            {"text_offset", text_offset}};
  }
};

}  // namespace

void HandleCompletions(ServingContext& context, const httplib::Request& req, httplib::Response& res) {
  auto body = ParseJsonBody(req);
  if (auto* e = std::get_if<ApiError>(&body)) return SendError(res, *e);
  auto parsed = ParseCompletionRequest(std::get<json>(body), context.config.default_sampling);
  if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(res, *e);
  CompletionRequest& request = std::get<CompletionRequest>(parsed);
  auto admitted = Admit(context, request.common.model, request.prompts.size(), request.common.sampling.n);
  if (auto* e = std::get_if<ApiError>(&admitted)) return SendError(res, *e);

  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> prompt_texts;
  for (const Prompt& p : request.prompts) {
    if (!p.token_ids.empty()) {
      prompts.push_back(p.token_ids);
      prompt_texts.push_back(context.model.tokenizer->Decode(p.token_ids, /*skip_special=*/false));
    } else {
      // Like vLLM and llama.cpp's server: the tokenizer's BOS is added, special-token text is parsed.
      prompts.push_back(context.model.tokenizer->Encode(p.text, /*add_special=*/true, /*parse_special=*/true));
      prompt_texts.push_back(p.text);
    }
  }
  auto choices = MakeChoices(context, request.common, prompts);
  if (auto* e = std::get_if<ApiError>(&choices)) return SendError(res, *e);
  std::vector<ChoiceSpec>& specs = std::get<std::vector<ChoiceSpec>>(choices);
  std::vector<int> prompt_of_choice;
  for (const ChoiceSpec& c : specs) prompt_of_choice.push_back(c.prompt_index);

  const std::string id = NewRequestId("cmpl-");
  const int64_t created = UnixNow();
  const std::string model = context.config.served_model_name;
  const bool want_logprobs = request.common.sampling.logprobs.has_value();
  auto job = std::make_shared<GenerationJob>(&context, std::move(specs), id,
                                             std::move(std::get<Admission::Slot>(admitted)));
  job->Start();

  if (request.common.stream) {
    auto offsets = std::make_shared<std::vector<int64_t>>(job->num_choices(), 0);
    auto echoed = std::make_shared<std::vector<bool>>(job->num_choices(), false);
    StreamFormat format;
    format.on_delta = [=](const ChoiceDelta& d) {
      std::vector<json> out;
      std::string text = d.delta.text;
      if (request.echo && !(*echoed)[d.choice]) {
        text = prompt_texts[prompt_of_choice[d.choice]] + text;
        (*echoed)[d.choice] = true;
      }
      if (text.empty() && !d.delta.finished && d.delta.logprobs.empty()) return out;
      json choice = {{"index", d.choice}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
      if (want_logprobs) {
        CompletionLogprobs lp;
        lp.Add(d.delta.logprobs, &(*offsets)[d.choice]);
        choice["logprobs"] = lp.ToJson();
      }
      if (d.delta.finished) {
        choice["finish_reason"] = d.delta.finish_reason;
        choice["stop_reason"] = StopReason(d.delta);
      }
      json chunk = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                    {"choices", json::array({choice})}};
      if (request.common.include_usage) chunk["usage"] = nullptr;
      out.push_back(std::move(chunk));
      return out;
    };
    format.on_done = [=](const GenerationJob& j) {
      std::vector<json> out;
      if (request.common.include_usage) {
        out.push_back({{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                       {"choices", json::array()}, {"usage", UsageJson(j.usage())}});
      }
      return out;
    };
    return StreamJob(res, job, std::move(format));
  }

  std::vector<CompletionLogprobs> logprobs(job->num_choices());
  std::vector<int64_t> offsets(job->num_choices(), 0);
  std::vector<json> finish(job->num_choices()), stop_reason(job->num_choices());
  std::vector<std::string> text_acc(job->num_choices());
  std::string error;
  CollectJob(*job, [&](const ChoiceDelta& d) {
    text_acc[d.choice] += d.delta.text;
    logprobs[d.choice].Add(d.delta.logprobs, &offsets[d.choice]);
    if (d.delta.finished) {
      finish[d.choice] = d.delta.finish_reason;
      stop_reason[d.choice] = StopReason(d.delta);
      if (d.delta.finish_reason == "error" && error.empty()) error = d.delta.error;
    }
  });
  if (!error.empty()) return SendError(res, BadRequest(error));
  json out_choices = json::array();
  for (size_t i = 0; i < job->num_choices(); ++i) {
    const std::string text = (request.echo ? prompt_texts[prompt_of_choice[i]] : "") + text_acc[i];
    out_choices.push_back({{"index", i}, {"text", text}, {"logprobs", want_logprobs ? logprobs[i].ToJson() : json()},
                           {"finish_reason", finish[i]}, {"stop_reason", stop_reason[i]}});
  }
  SendJson(res, {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                 {"choices", out_choices}, {"usage", UsageJson(job->usage())}});
}

}  // namespace ember::server
