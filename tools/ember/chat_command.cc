// ember chat: an interactive conversation on stdin/stdout (line-oriented, so it works under
// tmux send-keys or a pipe). Each line is a user turn; "/reset" clears the history, "/exit" or
// end of input quits. Replies run through the engine, whose prefix cache keeps the KV of the
// earlier turns.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "core/thread_pool.h"
#include "tools/ember/chat_session.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"
#include "tools/ember/offline_engine.h"

namespace ember::tools {
namespace {

struct ChatOptions {
  std::string model;
  std::optional<std::string> quantization;  // unset: the checkpoint's stored formats
  bool quantize_dense = false;
  int64_t max_tokens = 256;
  int64_t max_model_len = 0;  // 0: the model's context
  int threads = 0;
  std::string kv_cache_dtype = "auto";
};

int RunChat(const ChatOptions& o) {
  if (o.threads > 0) ThreadPool::SetGlobalThreads(o.threads);
  auto model = LoadModelWithLog(o.model, o.quantization, o.quantize_dense);
  if (!model.ok()) return Fail(model.status());
  EngineOptions options;
  options.kv_cache_dtype = o.kv_cache_dtype;
  options.max_model_len = o.max_model_len;
  // The conversation grows turn by turn: by default it may fill the model's whole context.
  options = OneRequestAtATime(options, (*model)->info().max_position_embeddings, **model);
  auto engine = LocalEngine::Create(std::move(*model), options);
  if (!engine.ok()) return Fail(engine.status());
  auto session = ChatSession::Create(o.model, engine->get());
  if (!session.ok()) return Fail(session.status());
  std::fprintf(stderr, "ember chat: type a message and press Enter; /reset clears the history, /exit quits.\n");
  std::string line;
  while (true) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line.empty()) continue;
    if (line == "/reset") {
      (*session)->Reset();
      continue;
    }
    auto reply = (*session)->Reply(line, o.max_tokens, [](const std::string& piece) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    });
    std::fputs("\n", stdout);
    if (!reply.ok()) std::fprintf(stderr, "ember: error: %s\n", reply.status().message().c_str());
  }
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace

void RegisterChatCommand(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "Interactive chat with a model that carries a chat template");
  cmd->add_option("--model", o->model, "Model directory or .gguf file")->required();
  cmd->add_option("--max-tokens", o->max_tokens, "Longest reply in tokens")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-model-len", o->max_model_len,
                  "Longest conversation in tokens, replies included (default: the model's context)");
  cmd->add_option("--threads", o->threads, "Worker threads (default: all cores)");
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, kKvCacheDtypeHelp);
  cmd->add_option("--quantization", o->quantization, kQuantizationHelp);
  cmd->add_flag("--quantize-dense", o->quantize_dense, kQuantizeDenseHelp);
  cmd->callback([o] { SetExitCode(RunChat(*o)); });
}

}  // namespace ember::tools
