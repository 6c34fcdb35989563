// ember generate: greedy generation from token ids on a Hugging Face-style model directory.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "model/sequence.h"
#include "tokenizer/model_tokenizer.h"
#include "tools/ember/chat_session.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"
#include "tools/ember/generate_jsonl.h"

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
  EngineFlags engine;  // engine options for --jsonl
};

// log-softmax of one row, in double for accuracy over large vocabularies.
std::vector<double> LogSoftmax(const float* logits, int64_t n) {
  double max_logit = logits[0];
  for (int64_t i = 1; i < n; ++i) max_logit = std::max<double>(max_logit, logits[i]);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += std::exp(logits[i] - max_logit);
  const double log_total = std::log(total) + max_logit;
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = logits[i] - log_total;
  return out;
}

// {"token": id, "logprob": lp, "top": [[id, lp], ...]} for the chosen token of one step.
nlohmann::json StepLogprobs(const float* logits, int64_t vocab, int32_t chosen, int k) {
  const std::vector<double> lp = LogSoftmax(logits, vocab);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
  nlohmann::json top = nlohmann::json::array();
  for (int i = 0; i < k; ++i) top.push_back({order[i], lp[order[i]]});
  return {{"token", chosen}, {"logprob", lp[chosen]}, {"top", top}};
}

int32_t Argmax(const float* logits, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) if (logits[i] > logits[best]) best = i;
  return static_cast<int32_t>(best);
}

int RunGenerate(const GenerateOptions& options) {
  if (options.threads > 0) ThreadPool::SetGlobalThreads(options.threads);
  // Text prompts go through the model's own tokenizer; ids are passed through as given.
  std::unique_ptr<Tokenizer> tokenizer;
  Expected<std::vector<int32_t>> prompt = std::vector<int32_t>{};
  if (options.chat) {
    if (options.prompt.empty()) return Fail(InvalidArgument("--chat needs --prompt TEXT"));
    auto model = LoadModelWithLog(options.model, options.engine.quantization, options.engine.quantize_dense);
    if (!model.ok()) return Fail(model.status());
    auto kv_dtype = ResolveKvDtype(options.kv_cache_dtype, **model);
    if (!kv_dtype.ok()) return Fail(kv_dtype.status());
    auto session = ChatSession::Create(options.model, model->get(), *kv_dtype);
    if (!session.ok()) return Fail(session.status());
    auto reply = (*session)->Reply(options.prompt, options.max_tokens, [](const std::string& piece) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    });
    if (!reply.ok()) return Fail(reply.status());
    std::fputs("\n", stdout);
    return 0;
  }
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
  auto model = LoadModelWithLog(options.model, options.engine.quantization, options.engine.quantize_dense);
  if (!model.ok()) return Fail(model.status());
  CausalLM& lm = **model;

  auto kv_dtype = ResolveKvDtype(options.kv_cache_dtype, lm);
  if (!kv_dtype.ok()) return Fail(kv_dtype.status());
  const int64_t prompt_tokens = static_cast<int64_t>(prompt->size());
  auto sequence = Sequence::Create(&lm, prompt_tokens + options.max_tokens, *kv_dtype);
  if (!sequence.ok()) return Fail(sequence.status());
  std::vector<float> logits;
  std::vector<int32_t> generated;
  nlohmann::json logprobs = nlohmann::json::array();
  const auto start = std::chrono::steady_clock::now();
  Status status = sequence->Append(prompt->data(), prompt_tokens, false, &logits);
  if (!status.ok()) return Fail(status);
  const auto prefill_end = std::chrono::steady_clock::now();
  const int64_t vocab = lm.info().vocab_size;
  while (static_cast<int64_t>(generated.size()) < options.max_tokens) {
    const int32_t next = Argmax(logits.data(), vocab);
    generated.push_back(next);
    if (options.top_logprobs > 0) {
      logprobs.push_back(StepLogprobs(logits.data(), vocab, next, std::min<int>(options.top_logprobs, vocab)));
    }
    const auto& eos = lm.info().eos_token_ids;
    if (!options.ignore_eos && std::find(eos.begin(), eos.end(), next) != eos.end()) break;
    if (static_cast<int64_t>(generated.size()) == options.max_tokens) break;
    status = sequence->Append(&next, 1, false, &logits);
    if (!status.ok()) return Fail(status);
  }
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
      ->check(CLI::Range(0, 100));
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
