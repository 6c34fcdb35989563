// ember perplexity: perplexity of a model over a token-id file, computed the way llama.cpp's
// llama-perplexity does so the two are comparable: the ids are cut into chunks of --ctx tokens,
// each chunk is evaluated from an empty cache (its first token replaced by BOS when the model
// adds one), and only the second half of each chunk is scored, so every scored token has at
// least ctx/2 tokens of context. Each chunk is one request through the engine with
// prompt_logprobs: the runner scores every prompt position with the sampler's log-softmax (float
// exps within 2 ulps summed in double, each logprob rounded to float), so over the same logits
// the result agrees with an all-double log-softmax to about 1e-8 relative.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/thread_pool.h"
#include "runner/local_engine.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"
#include "tools/ember/offline_engine.h"

namespace ember::tools {
namespace {

struct PerplexityOptions {
  std::string model;
  std::optional<std::string> quantization;  // unset: the checkpoint's stored formats
  bool quantize_dense = false;
  std::string ids_file;
  int64_t ctx = 512;
  int64_t max_chunks = 0;
  bool bos_first = false;
  int threads = 0;
  bool json = false;
  std::string kv_cache_dtype = "auto";
};

Expected<std::vector<int32_t>> ReadIds(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open --ids-file {}", path));
  std::stringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  for (char& c : content) if (c == '\n' || c == ' ' || c == '\t' || c == '\r') c = ',';
  std::string compact;
  for (char c : content) if (!(c == ',' && (compact.empty() || compact.back() == ','))) compact += c;
  if (!compact.empty() && compact.back() == ',') compact.pop_back();
  return ParseTokenIds(compact);
}

int RunPerplexity(const PerplexityOptions& o) {
  if (o.threads > 0) ThreadPool::SetGlobalThreads(o.threads);
  auto ids = ReadIds(o.ids_file);
  if (!ids.ok()) return Fail(ids.status());
  if (o.ctx < 4) return Fail(InvalidArgument("--ctx must be at least 4"));
  auto model = LoadModelWithLog(o.model, o.quantization, o.quantize_dense);
  if (!model.ok()) return Fail(model.status());
  const ModelInfo& info = (*model)->info();
  const int32_t bos = info.bos_token_id >= 0 ? static_cast<int32_t>(info.bos_token_id) : -1;
  int64_t chunks = static_cast<int64_t>(ids->size()) / o.ctx;
  if (o.max_chunks > 0) chunks = std::min(chunks, o.max_chunks);
  if (chunks == 0) return Fail(InvalidArgument(fmt::format("need at least --ctx = {} ids, got {}", o.ctx, ids->size())));
  // A chunk is a prompt of ctx tokens, and the engine keeps room for one generated token.
  if (info.max_position_embeddings > 0 && o.ctx >= info.max_position_embeddings) {
    return Fail(InvalidArgument(fmt::format("--ctx {} must be below the model's context length {}", o.ctx,
                                            info.max_position_embeddings)));
  }
  EngineOptions options;
  options.kv_cache_dtype = o.kv_cache_dtype;
  options.enable_prefix_caching = false;  // every chunk from an empty cache
  options = OneRequestAtATime(options, o.ctx + 1, **model);
  auto engine = LocalEngine::Create(std::move(*model), options);
  if (!engine.ok()) return Fail(engine.status());
  EngineClient& client = (*engine)->client();
  double nll = 0;
  int64_t scored = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < chunks; ++c) {
    RequestInput input;
    input.external_id = fmt::format("chunk-{}", c);
    input.prompt_token_ids.assign(ids->begin() + c * o.ctx, ids->begin() + (c + 1) * o.ctx);
    if (o.bos_first && bos >= 0) input.prompt_token_ids[0] = bos;
    input.sampling.temperature = 0.0f;
    input.sampling.max_tokens = 1;
    input.sampling.prompt_logprobs = 0;  // the logprob of each actual next token, no alternatives
    std::vector<TokenLogprobs> logprobs;
    std::string error;
    client.Submit(std::move(input));
    RunUntilDone(client, [&](RequestOutput& out) {
      logprobs.insert(logprobs.end(), std::make_move_iterator(out.prompt_logprobs.begin()),
                      std::make_move_iterator(out.prompt_logprobs.end()));
      if (out.finish_reason == FinishReason::kError) error = out.error;
    });
    if (!error.empty()) return Fail(InvalidArgument(error));
    if (static_cast<int64_t>(logprobs.size()) != o.ctx - 1) {
      return Fail(Internal(fmt::format("{} prompt logprobs for a chunk of {} tokens", logprobs.size(), o.ctx)));
    }
    // Entry i is the logprob of token i + 1 given tokens 0..i: score rows ctx/2 .. ctx-2.
    for (int64_t i = o.ctx / 2; i < o.ctx - 1; ++i) {
      nll -= logprobs[i].logprob;
      ++scored;
    }
    if (!o.json) std::fprintf(stderr, "[%lld/%lld] ppl so far %.4f\n", static_cast<long long>(c + 1),
                              static_cast<long long>(chunks), std::exp(nll / scored));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double ppl = std::exp(nll / scored);
  if (o.json) {
    nlohmann::json out = {{"perplexity", ppl}, {"scored_tokens", scored}, {"chunks", chunks}, {"ctx", o.ctx},
                          {"seconds", seconds}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("perplexity %.4f over %lld scored tokens (%lld chunks of %lld), %.1f s\n", ppl,
                static_cast<long long>(scored), static_cast<long long>(chunks), static_cast<long long>(o.ctx), seconds);
  }
  return 0;
}

}  // namespace

void RegisterPerplexityCommand(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity over a file of token ids (llama.cpp's method)");
  cmd->add_option("--model", o->model, "Model directory or .gguf file")->required();
  cmd->add_option("--ids-file", o->ids_file, "Token ids separated by commas, spaces or newlines")->required();
  cmd->add_option("--ctx", o->ctx, "Chunk length; the second half of each chunk is scored");
  cmd->add_option("--chunks", o->max_chunks, "Evaluate at most this many chunks (0 = all)");
  cmd->add_flag("--bos-first", o->bos_first, "Replace each chunk's first token with BOS (as llama.cpp does for "
                                             "models that add BOS)");
  cmd->add_option("--threads", o->threads, "Worker threads (default: all cores)");
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, kKvCacheDtypeHelp);
  cmd->add_option("--quantization", o->quantization, kQuantizationHelp);
  cmd->add_flag("--quantize-dense", o->quantize_dense, kQuantizeDenseHelp);
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { SetExitCode(RunPerplexity(*o)); });
}

}  // namespace ember::tools
