// What every route handler needs: the server's configuration, the model's tokenizer and chat
// format, the engine and the metrics. Built once at startup by `ember serve`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "server/admission.h"
#include "server/async_engine.h"
#include "server/metrics.h"
#include "server/multimodal/mm_processor.h"
#include "server/output_parsers/output_parser.h"
#include "structured/compiler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ember::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;                  // empty = no authentication
  std::vector<std::string> allowed_origins;  // web origins allowed to call (CORS); "*" any; none by default
  std::string served_model_name;
  int64_t max_model_len = 4096;
  int64_t max_waiting_requests = 1024;  // engine requests (prompts x n) in progress at most; past it, 503
  int64_t max_prompts_per_request = 128;  // prompts of one completions call at most; past it, 400
  size_t max_request_body_bytes = 8u << 20;
  int32_t max_n = 16;                   // choices per request at most
  // max_tokens of a chat request that names none (a completions request gets OpenAI's 16); either
  // is cut to what the context has left. Filling the context instead let one request run minutes.
  int32_t default_max_tokens = 1024;
  // The HTTP front end (http/server.h): connections open at most (503 past it), the time a
  // request's header (counted from the wait for it, idle keep-alive included) and its body may
  // take, the shutdown's wait for requests in flight, and the threads: I/O (every connection and
  // stream) and route handlers (parsing, templates, tokenizing).
  size_t max_connections = 8192;
  double header_timeout_s = 30;
  double body_timeout_s = 30;
  double shutdown_timeout_s = 30;
  int io_threads = 1;
  int handler_threads = 2;
  bool enable_prefix_caching = true;    // lets n > 1 share the prompt's blocks
  bool language_model_only = false;     // --language-model-only: the towers were not loaded
  SamplingParams default_sampling;      // the model's generation config; requests override
};

struct ServingModel {
  std::string path;
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // null: /v1/chat/completions answers 400
  std::unique_ptr<OutputParser> output_parser;  // tool calls and reasoning in chat replies
  int32_t eos_token_id = -1;
  std::vector<int32_t> extra_stop_token_ids;    // end-of-turn tokens besides EOS
  int64_t vocab_size = 0;
  // Compiles structured-output constraints over this model's vocabulary (cached); null: such
  // requests answer 400.
  structured::ConstraintCompiler* constraints = nullptr;
  int64_t created_unix = 0;                     // for /v1/models
  // Image, video and audio parts of chat requests (null: the model takes text only, or the towers
  // were not loaded: --language-model-only).
  std::unique_ptr<MultiModalProcessor> multimodal;
};

struct ServingContext {
  ServerConfig config;
  ServingModel model;
  AsyncEngine* engine = nullptr;
  ServerMetrics* metrics = nullptr;
  Admission admission;  // engine requests in progress, at most config.max_waiting_requests
};

}  // namespace ember::server
