// ember generate --jsonl FILE: many prompts through the engine at once (continuous batching), the
// offline counterpart of `ember serve`. Each input line is a JSON object with "prompt" (text or
// token ids) or "messages" (chat), plus any sampling fields of the completions API (max_tokens,
// temperature, top_p, top_k, seed, stop, ...). Prints one JSON result per line, in input order,
// and a throughput summary on stderr.
#include "tools/ember/generate_jsonl.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <unordered_map>

#include "core/logging.h"
#include "engine/stop_strings.h"
#include "server/protocol/requests.h"
#include "server/routes/chat_prompt.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/model_tokenizer.h"
#include "tools/ember/common.h"
#include "tools/ember/parallel_ranks.h"
#include "tools/ember/offline_engine.h"

namespace ember::tools {
namespace {

using json = nlohmann::ordered_json;

struct Job {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  std::vector<int32_t> output;
  std::string finish_reason;
  std::string error;
  int64_t cached_tokens = 0;
};

// Reads the lines into jobs; errors name the line.
// `tokenizer` may be null (a model without one): then only token-id prompts work.
Status ReadJobs(const std::string& path, const Tokenizer* tokenizer, const ChatTemplate* chat_template,
                int64_t vocab, std::vector<Job>* jobs) {
  std::ifstream in(path);
  if (!in) return IoError(fmt::format("cannot read {}", path));
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto where = [&](const std::string& what) { return fmt::format("{}:{}: {}", path, line_no, what); };
    const json body = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object()) return InvalidArgument(where("not a JSON object"));
    Job job;
    if (body.contains("messages")) {
      if (chat_template == nullptr || tokenizer == nullptr) {
        return InvalidArgument(where("\"messages\" needs a model with a tokenizer and a chat template"));
      }
      auto parsed = server::ParseChatCompletionRequest(body);
      if (auto* e = std::get_if<server::ApiError>(&parsed)) return InvalidArgument(where(e->message));
      auto& chat = std::get<server::ChatCompletionRequest>(parsed);
      // The messages alone with a generation prompt, rendered as the server renders them (content
      // parts as the template wants them).
      server::ServingModel model;
      model.tokenizer = tokenizer;
      model.chat_template = chat_template;
      server::ChatPrompt prompt;
      prompt.messages = chat.chat.messages;
      auto rendered = server::RenderChatPrompt(model, prompt, /*with_tools=*/false);
      if (auto* e = std::get_if<server::ApiError>(&rendered)) return InvalidArgument(where(e->message));
      job.prompt = server::TokenizeChatPrompt(model, std::get<std::string>(rendered));
      job.sampling = chat.common.sampling;
      if (!chat.common.max_tokens_given) job.sampling.max_tokens = 16;
    } else {
      auto parsed = server::ParseCompletionRequest(body);
      if (auto* e = std::get_if<server::ApiError>(&parsed)) return InvalidArgument(where(e->message));
      auto& completion = std::get<server::CompletionRequest>(parsed);
      if (completion.prompts.size() != 1) return InvalidArgument(where("give exactly one prompt per line"));
      const server::Prompt& p = completion.prompts.front();
      if (p.token_ids.empty() && tokenizer == nullptr) {
        return InvalidArgument(where("this model has no tokenizer: give \"prompt\" as token ids"));
      }
      job.prompt = p.token_ids.empty() ? tokenizer->Encode(p.text, true, true) : p.token_ids;
      job.sampling = completion.common.sampling;
    }
    if (job.sampling.n != 1) return InvalidArgument(where("n > 1 is not supported here; repeat the line"));
    if (Status s = job.sampling.Validate(vocab); !s.ok()) return InvalidArgument(where(s.message()));
    jobs->push_back(std::move(job));
  }
  return Status::Ok();
}

// Cuts `text` at the job's first stop string (offline, the whole text is known at once).
std::string StopAtStrings(const std::string& text, Job* job) {
  if (job->sampling.stop.empty()) return text;
  StopStringMatcher matcher(job->sampling.stop, job->sampling.include_stop_str_in_output);
  StopStringMatcher::Output cut = matcher.Feed(text);
  if (!cut.stop_index) return cut.text + matcher.Flush();
  job->finish_reason = "stop";
  return cut.text;
}

}  // namespace

int RunGenerateJsonl(const std::string& model_path, const std::string& jsonl_path, EngineFlags& flags) {
  if (Status s = flags.Finish(); !s.ok()) return Fail(s);
  auto model = LoadModelWithLog(model_path, flags.quantization, flags.quantize_dense, flags.expert_placement);
  if (!model.ok()) return Fail(model.status());
  std::unique_ptr<Tokenizer> tokenizer;
  if (auto loaded = LoadModelTokenizer(model_path); loaded.ok()) tokenizer = std::move(*loaded);
  std::unique_ptr<ChatTemplate> chat_template;
  if (auto source = LoadModelChatTemplateSource(model_path); source.ok()) {
    if (auto parsed = ChatTemplate::Parse(*source); parsed.ok()) {
      chat_template = std::make_unique<ChatTemplate>(std::move(*parsed));
    }
  }
  std::vector<Job> jobs;
  if (Status s = ReadJobs(jsonl_path, tokenizer.get(), chat_template.get(), (*model)->info().vocab_size, &jobs); !s.ok()) {
    return Fail(s);
  }
  flags.engine.model_path = model_path;
  auto engine = CreateEngine(std::move(*model), flags.engine);
  if (!engine.ok()) return Fail(engine.status());
  for (const std::string& line : (*engine)->DescribePlan()) EMBER_LOG_INFO("{}", line);
  EngineClient& client = (*engine)->client();

  const auto start = std::chrono::steady_clock::now();
  int64_t prompt_tokens = 0;
  std::unordered_map<RequestIndex, size_t> job_of;
  for (size_t i = 0; i < jobs.size(); ++i) {
    RequestInput input;
    input.external_id = fmt::format("line-{}", i);
    input.prompt_token_ids = jobs[i].prompt;
    input.sampling = jobs[i].sampling;
    AddModelStops((*engine)->eos_token_ids(), &input);
    prompt_tokens += static_cast<int64_t>(jobs[i].prompt.size());
    job_of[client.Submit(std::move(input))] = i;
  }
  int64_t output_tokens = 0;
  RunUntilDone(client, [&](RequestOutput& out) {
    Job& job = jobs[job_of.at(out.req)];
    job.output.insert(job.output.end(), out.new_token_ids.begin(), out.new_token_ids.end());
    output_tokens += static_cast<int64_t>(out.new_token_ids.size());
    if (out.finished) {
      job.finish_reason = std::string(FinishReasonName(out.finish_reason));
      job.error = out.error;
      job.cached_tokens = out.num_cached_tokens;
    }
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& job = jobs[i];
    json out = {{"index", i}};
    std::vector<int32_t> shown = job.output;
    if (tokenizer) {
      if (job.finish_reason == "stop" && !shown.empty() && tokenizer->IsSpecial(shown.back())) shown.pop_back();
      out["text"] = StopAtStrings(tokenizer->Decode(shown, /*skip_special=*/true), &job);
    }
    out.update(json{{"token_ids", job.output}, {"finish_reason", job.finish_reason},
                     {"prompt_tokens", job.prompt.size()}, {"completion_tokens", job.output.size()},
                     {"cached_tokens", job.cached_tokens}});
    if (!job.error.empty()) out["error"] = job.error;
    std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  }
  EMBER_LOG_INFO("{} requests, {} prompt + {} generated tokens in {:.2f} s: {:.1f} output tok/s, {:.1f} total tok/s, "
                 "{} steps",
                 jobs.size(), prompt_tokens, output_tokens, seconds, output_tokens / seconds,
                 (prompt_tokens + output_tokens) / seconds, (*engine)->runner().num_steps());
  return 0;
}

}  // namespace ember::tools
