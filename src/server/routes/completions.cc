// POST /v1/completions: text (or token-id) prompts in, completions out, streamed or not.
#include <fmt/format.h>

#include "server/http_util.h"
#include "server/protocol/kv_transfer_params.h"
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

void HandleCompletions(ServingContext& context, const HttpRequest& req, HttpResponse& res) {
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

  struct Collected {
    std::vector<CompletionLogprobs> logprobs;
    std::vector<int64_t> offsets;
    std::vector<json> finish, stop_reason;
    std::vector<std::string> text;
    std::string error;
  };
  auto acc = std::make_shared<Collected>();
  const size_t n = job->num_choices();
  acc->logprobs.resize(n);
  acc->offsets.assign(n, 0);
  acc->finish.resize(n);
  acc->stop_reason.resize(n);
  acc->text.resize(n);
  CollectFormat format;
  format.on_delta = [acc](const ChoiceDelta& d) {
    acc->text[d.choice] += d.delta.text;
    acc->logprobs[d.choice].Add(d.delta.logprobs, &acc->offsets[d.choice]);
    if (d.delta.finished) {
      acc->finish[d.choice] = d.delta.finish_reason;
      acc->stop_reason[d.choice] = StopReason(d.delta);
      if (d.delta.finish_reason == "error" && acc->error.empty()) acc->error = d.delta.error;
    }
  };
  format.on_done = [=, engine = context.engine, echo = request.echo](const GenerationJob& j, HttpResponse& out) {
    if (!acc->error.empty()) return SendError(out, GenerationError(*engine, acc->error));
    json out_choices = json::array();
    for (size_t i = 0; i < j.num_choices(); ++i) {
      const std::string text = (echo ? prompt_texts[prompt_of_choice[i]] : "") + acc->text[i];
      out_choices.push_back({{"index", i}, {"text", text},
                             {"logprobs", want_logprobs ? acc->logprobs[i].ToJson() : json()},
                             {"finish_reason", acc->finish[i]}, {"stop_reason", acc->stop_reason[i]}});
    }
    json body = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                 {"choices", out_choices}, {"usage", UsageJson(j.usage())}};
    if (j.kv_transfer_params()) body["kv_transfer_params"] = KvTransferParamsJson(*j.kv_transfer_params());
    SendJson(out, body);
  };
  CollectJob(res, job, std::move(format));
}

}  // namespace ember::server
