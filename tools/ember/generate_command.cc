// ember generate: greedy generation from token ids or text, one request through the engine
// (LocalEngine: scheduler, prefix cache, runner, sampler), or many with --jsonl.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "engine/sampling_params.h"
#include "runner/local_engine.h"
#include "tokenizer/model_tokenizer.h"
#include "tools/ember/chat_session.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"
#include "tools/ember/parallel_ranks.h"
#include "tools/ember/generate_jsonl.h"
#include "tools/ember/offline_engine.h"

namespace ember::tools {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt_ids;
  std::string prompt;
  bool chat = false;
  int64_t max_tokens = 16;
  int threads = 0;
  bool json = false;
  bool ignore_eos = false;
  int top_logprobs = 0;
  std::string kv_cache_dtype = "auto";
  std::string jsonl;   // many prompts through the engine (generate_jsonl.cc)
  EngineFlags engine;  // engine options (--jsonl: as given; one prompt: one request at a time)
};

// {"token": id, "logprob": lp, "top": [[id, lp], ...]} for the chosen token of one step.
nlohmann::json StepLogprobs(int32_t chosen, const TokenLogprobs& lp) {
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < lp.top_ids.size(); ++i) top.push_back({lp.top_ids[i], lp.top_logprobs[i]});
  return {{"token", chosen}, {"logprob", lp.logprob}, {"top", top}};
}

// Greedy continuation of a `--chat` prompt: the model's chat template around one user turn.
int RunChatPrompt(GenerateOptions& options) {
  if (options.prompt.empty()) return Fail(InvalidArgument("--chat needs --prompt TEXT"));
  auto model = LoadModelWithLog(options.model, options.engine.quantization, options.engine.quantize_dense,
                                options.engine.expert_placement);
  if (!model.ok()) return Fail(model.status());
  options.engine.engine.model_path = options.model;  // a draft model's tokenizer is checked against it
  // The whole context unless --max-model-len says otherwise: the reply's length is not known yet.
  const EngineOptions engine_options =
      OneRequestAtATime(options.engine.engine, (*model)->info().max_position_embeddings, **model);
  auto engine = CreateEngine(std::move(*model), engine_options);
  if (!engine.ok()) return Fail(engine.status());
  auto session = ChatSession::Create(options.model, engine->get());
  if (!session.ok()) return Fail(session.status());
  auto reply = (*session)->Reply(options.prompt, options.max_tokens, [](const std::string& piece) {
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
  });
  if (!reply.ok()) return Fail(reply.status());
  std::fputs("\n", stdout);
  return 0;
}

int RunGenerate(GenerateOptions& options) {
  options.engine.threads = options.threads;
  options.engine.engine.kv_cache_dtype = options.kv_cache_dtype;
  if (Status s = options.engine.Finish(); !s.ok()) return Fail(s);
  if (options.chat) return RunChatPrompt(options);
  // Text prompts go through the model's own tokenizer; ids are passed through as given.
  std::unique_ptr<Tokenizer> tokenizer;
  Expected<std::vector<int32_t>> prompt = std::vector<int32_t>{};
  if (!options.prompt.empty()) {
    auto loaded = LoadModelTokenizer(options.model);
    if (!loaded.ok()) return Fail(loaded.status());
    tokenizer = std::move(*loaded);
    prompt = tokenizer->Encode(options.prompt, /*add_special=*/true, /*parse_special=*/true);
  } else {
    prompt = ParseTokenIds(options.prompt_ids);
  }
  if (!prompt.ok()) return Fail(prompt.status());
  if (prompt->empty()) return Fail(InvalidArgument("the prompt is empty: give --prompt TEXT or --prompt-ids 1,2,3"));
  auto model = LoadModelWithLog(options.model, options.engine.quantization, options.engine.quantize_dense,
                                options.engine.expert_placement);
  if (!model.ok()) return Fail(model.status());
  options.engine.engine.model_path = options.model;  // a draft model's tokenizer is checked against it
  const int64_t prompt_tokens = static_cast<int64_t>(prompt->size());
  const EngineOptions engine_options = OneRequestAtATime(options.engine.engine, prompt_tokens + options.max_tokens, **model);
  auto engine = CreateEngine(std::move(*model), engine_options);
  if (!engine.ok()) return Fail(engine.status());

  RequestInput input;
  input.external_id = "generate";
  input.prompt_token_ids = *prompt;
  input.sampling.temperature = 0.0f;
  input.sampling.max_tokens = static_cast<int32_t>(options.max_tokens);
  input.sampling.ignore_eos = options.ignore_eos;
  if (options.top_logprobs > 0) input.sampling.logprobs = options.top_logprobs;
  AddModelStops((*engine)->eos_token_ids(), &input);
  std::vector<int32_t> generated;
  nlohmann::json logprobs = nlohmann::json::array();
  std::string error;
  const auto start = std::chrono::steady_clock::now();
  auto prefill_end = start;
  EngineClient& client = (*engine)->client();
  client.Submit(std::move(input));
  RunUntilDone(client, [&](RequestOutput& out) {
    // The first token comes out of the step that finishes the prompt.
    if (generated.empty() && !out.new_token_ids.empty()) prefill_end = std::chrono::steady_clock::now();
    for (size_t i = 0; i < out.new_token_ids.size(); ++i) {
      generated.push_back(out.new_token_ids[i]);
      if (i < out.new_logprobs.size()) logprobs.push_back(StepLogprobs(out.new_token_ids[i], out.new_logprobs[i]));
    }
    if (out.finish_reason == FinishReason::kError) error = out.error;
  });
  if (!error.empty()) return Fail(InvalidArgument(error));
  const auto end = std::chrono::steady_clock::now();
  const double prefill_s = std::chrono::duration<double>(prefill_end - start).count();
  const double decode_s = std::chrono::duration<double>(end - prefill_end).count();
  // Decode rate counts the tokens produced after the first (which comes from the prefill).
  const double decode_tps = generated.size() > 1 ? (generated.size() - 1) / decode_s : 0.0;
  std::string text;
  if (tokenizer) text = tokenizer->Decode(generated, /*skip_special=*/true);
  if (options.json) {
    nlohmann::json out;
    out["token_ids"] = generated;
    if (tokenizer) out["text"] = text;
    out["prompt_tokens"] = prompt->size();
    out["tokens_per_second"] = decode_tps;
    out["prefill_tokens_per_second"] = prompt->size() / prefill_s;
    if (options.top_logprobs > 0) out["logprobs"] = logprobs;
    std::printf("%s\n", out.dump().c_str());
  } else if (tokenizer) {
    std::printf("%s%s\n", options.prompt.c_str(), text.c_str());
  } else {
    std::string ids;
    for (int32_t id : generated) ids += fmt::format("{}{}", ids.empty() ? "" : ",", id);
    std::printf("%s\n", ids.c_str());
    EMBER_LOG_INFO("prompt {} tokens in {:.3f} s ({:.1f} tok/s); generated {} tokens, decode {:.2f} tok/s",
                   prompt->size(), prefill_s, prompt->size() / prefill_s, generated.size(), decode_tps);
  }
  return 0;
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Greedy generation from prompt token ids");
  cmd->add_option("--model", options->model, "Model directory (config.json + *.safetensors) or a .gguf file")->required();
  CLI::Option* ids = cmd->add_option("--prompt-ids", options->prompt_ids, "Comma-separated prompt token ids, e.g. 1,2,3");
  CLI::Option* text = cmd->add_option("--prompt", options->prompt, "Prompt text (tokenized with the model's tokenizer)");
  ids->excludes(text);
  cmd->add_flag("--chat", options->chat, "Wrap --prompt as a user turn in the model's chat template and stop at the "
                                         "end of the assistant's turn");
  text->excludes(ids);
  cmd->add_option("--max-tokens", options->max_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--threads", options->threads, "Worker threads (default: all cores)");
  cmd->add_flag("--json", options->json, "Print {token_ids, prompt_tokens, tokens_per_second} as JSON");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past end-of-sequence tokens");
  cmd->add_option("--top-logprobs", options->top_logprobs, "With --json: the top K log-probabilities per step")
      ->check(CLI::Range(0, SamplingParams::kMaxLogprobs));
  cmd->add_option("--kv-cache-dtype", options->kv_cache_dtype, kKvCacheDtypeHelp);
  cmd->add_option("--jsonl", options->jsonl,
                  "Run every line of this JSONL file ({\"prompt\": ...} or {\"messages\": [...]}, plus sampling "
                  "fields) through the engine with continuous batching; prints one JSON result per line")
      ->excludes(ids)
      ->excludes(text);
  AddEngineOptions(cmd, &options->engine, /*with_threads_and_dtype=*/false);
  cmd->callback([options] {
    if (!options->jsonl.empty()) {
      options->engine.threads = options->threads;
      options->engine.engine.kv_cache_dtype = options->kv_cache_dtype;
      return SetExitCode(RunGenerateJsonl(options->model, options->jsonl, options->engine));
    }
    SetExitCode(RunGenerate(*options));
  });
}

}  // namespace ember::tools
