// ember serve MODEL: the OpenAI-compatible server (src/server) over a LocalEngine.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "server/expert_load_metrics.h"
#include "server/openai_server.h"
#include "server/output_parsers/output_parser.h"
#include "structured/compiler.h"
#include "tokenizer/model_tokenizer.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"
#include "tools/ember/parallel_ranks.h"
#include "tools/ember/engine_options.h"
#include "tools/ember/multimodal_options.h"
#include "tools/ember/shutdown_signals.h"

namespace ember::tools {
namespace {

struct ServeOptions {
  std::string model;
  server::ServerConfig server;
  EngineFlags flags;
  std::string generation_config = "auto";
  std::string tool_call_parser = "auto";
  std::string api_key_env;
  std::string chat_template;  // --chat-template: a file, or the template itself; empty: the model's
  std::string expert_load_metrics = "on";  // --expert-load-metrics on|off
  MultiModalFlags multimodal;
};

// vLLM's --chat-template: the path of a Jinja file, or the template given inline.
Expected<std::string> ChatTemplateOverride(const std::string& value) {
  std::error_code error;
  if (std::filesystem::is_regular_file(value, error)) {
    std::ifstream in(value, std::ios::binary);
    std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return InvalidArgument(fmt::format("cannot read --chat-template {}", value));
    return source;
  }
  if (value.find("{{") != std::string::npos || value.find("{%") != std::string::npos) return value;
  return NotFound(fmt::format("--chat-template {} is neither a file nor a Jinja template", value));
}

// The model's generation_config.json (model directories only) as default sampling parameters,
// as vLLM's --generation-config auto does; "vllm" ignores it.
Status ApplyGenerationConfig(const ServeOptions& o, SamplingParams* defaults) {
  if (o.generation_config == "vllm") return Status::Ok();
  std::filesystem::path path;
  if (o.generation_config == "auto") {
    if (!std::filesystem::is_directory(o.model)) return Status::Ok();
    path = std::filesystem::path(o.model) / "generation_config.json";
    if (!std::filesystem::exists(path)) return Status::Ok();
  } else {
    path = std::filesystem::path(o.generation_config);
    if (std::filesystem::is_directory(path)) path /= "generation_config.json";
  }
  std::ifstream in(path);
  const auto json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return InvalidArgument(fmt::format("{} is not a JSON object", path.string()));
  if (json.contains("temperature") && json["temperature"].is_number()) defaults->temperature = json["temperature"];
  if (json.contains("top_p") && json["top_p"].is_number()) defaults->top_p = json["top_p"];
  if (json.contains("top_k") && json["top_k"].is_number_integer()) defaults->top_k = json["top_k"];
  if (json.contains("min_p") && json["min_p"].is_number()) defaults->min_p = json["min_p"];
  if (json.contains("repetition_penalty") && json["repetition_penalty"].is_number()) {
    defaults->repetition_penalty = json["repetition_penalty"];
  }
  EMBER_LOG_INFO("default sampling from {}: temperature {}, top_p {}, top_k {}", path.string(),
                 defaults->temperature, defaults->top_p, defaults->top_k);
  return Status::Ok();
}

int RunServe(ServeOptions& o) {
  ShutdownSignals signals;  // before any thread starts
  if (Status s = o.flags.Finish(); !s.ok()) return Fail(s);
  RaiseDescriptorLimit(o.server.max_connections);
  if (o.server.api_key.empty() && !o.api_key_env.empty()) {
    if (const char* key = std::getenv(o.api_key_env.c_str())) o.server.api_key = key;
  }
  auto model = LoadModelWithLog(o.model, o.flags.quantization, o.flags.quantize_dense, o.flags.expert_placement);
  if (!model.ok()) return Fail(model.status());
  const std::string architecture = (*model)->info().architecture;
  const int64_t vocab = (*model)->info().vocab_size;
  // End-of-sequence ids the vocabulary can produce (tiny test models may name larger ones).
  std::vector<int64_t> eos;
  for (int64_t id : (*model)->info().eos_token_ids) {
    if (id >= 0 && id < vocab) eos.push_back(id);
  }
  auto tokenizer = LoadModelTokenizer(o.model);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  std::unique_ptr<ChatTemplate> chat_template;
  std::string template_source;
  auto source = o.chat_template.empty() ? LoadModelChatTemplateSource(o.model) : ChatTemplateOverride(o.chat_template);
  if (!o.chat_template.empty() && !source.ok()) return Fail(source.status());
  if (source.ok()) {
    template_source = *source;
    auto parsed = ChatTemplate::Parse(*source);
    if (!parsed.ok()) return Fail(parsed.status());
    chat_template = std::make_unique<ChatTemplate>(std::move(*parsed));
  } else {
    EMBER_LOG_WARN("{} has no chat template: /v1/chat/completions will answer 400", o.model);
  }

  o.flags.engine.model_path = o.model;
  auto mm_options = o.multimodal.Options();
  if (!mm_options.ok()) return Fail(mm_options.status());
  auto encoder = LoadMultiModalEncoder(o.model, o.multimodal, **tokenizer, Parallel() != nullptr,
                                       o.flags.quantization, o.flags.quantize_dense);
  if (!encoder.ok()) return Fail(encoder.status());
  o.flags.engine.multimodal_encoder = *encoder;
  if (*encoder) {
    auto cache_bytes = o.multimodal.EncoderCacheBytes();
    if (!cache_bytes.ok()) return Fail(cache_bytes.status());
    o.flags.engine.encoder_cache_bytes = *cache_bytes;
  }
  auto engine = CreateEngine(std::move(*model), o.flags.engine);
  if (!engine.ok()) return Fail(engine.status());
  for (const std::string& line : (*engine)->DescribePlan()) EMBER_LOG_INFO("{}", line);

  server::ServingContext context;
  context.config = o.server;
  if (context.config.served_model_name.empty()) {
    context.config.served_model_name = std::filesystem::path(o.model).filename().string();
  }
  context.config.max_model_len = (*engine)->plan().scheduler.max_model_len;
  context.config.enable_prefix_caching = o.flags.engine.enable_prefix_caching;
  if (Status s = ApplyGenerationConfig(o, &context.config.default_sampling); !s.ok()) return Fail(s);
  context.model.path = o.model;
  context.model.tokenizer = tokenizer->get();
  context.model.chat_template = chat_template.get();
  const std::string parser = o.tool_call_parser != "auto" ? o.tool_call_parser
                                                           : server::DefaultOutputParser(architecture, template_source);
  context.model.output_parser = server::MakeOutputParser(parser);
  if (!context.model.output_parser) {
    return Fail(InvalidArgument(fmt::format("unknown --tool-call-parser '{}'", parser)));
  }
  context.config.language_model_only = o.multimodal.language_model_only;
  if (*encoder) {
    std::vector<Modality> accepted;
    for (Modality m : {Modality::kImage, Modality::kVideo, Modality::kAudio}) {
      if ((*encoder)->Accepts(m)) accepted.push_back(m);
    }
    auto processor = server::MultiModalProcessor::Create(o.model, **tokenizer, accepted, *mm_options);
    if (!processor.ok()) return Fail(processor.status());
    context.model.multimodal = std::move(*processor);  // null: no modality's placeholder is in the tokenizer
    if (context.model.multimodal) {
      const server::MediaAccess& access = mm_options->access;
      EMBER_LOG_INFO("media sources: data: URLs; file:// {}; http(s) {}",
                     access.allowed_local_media_path.empty() ? "refused" : "under " + access.allowed_local_media_path,
                     access.remote.enabled()
                         ? fmt::format("from {} ({} s per item)", fmt::join(access.remote.allowed_domains, ", "),
                                       access.remote.timeout_seconds)
                         : std::string("refused"));
    }
  }
  context.model.eos_token_id = eos.empty() ? -1 : static_cast<int32_t>(eos.front());
  for (size_t i = 1; i < eos.size(); ++i) context.model.extra_stop_token_ids.push_back(static_cast<int32_t>(eos[i]));
  context.model.vocab_size = vocab;
  // Structured outputs: the vocabulary's bytes, indexed once; grammars compile per request.
  const auto vocab_start = std::chrono::steady_clock::now();
  structured::ConstraintCompiler constraints(structured::TokenBytes(**tokenizer, vocab),
                                             std::vector<int32_t>(eos.begin(), eos.end()));
  EMBER_LOG_INFO("structured outputs: {} tokens indexed in {:.2f} s", vocab,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - vocab_start).count());
  context.model.constraints = &constraints;
  context.model.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch()).count();
  server::ServerMetrics metrics(context.config.served_model_name);
  metrics.kv_group_usage.Resize((*engine)->plan().kv.groups.size());
  metrics.expert_load->set_enabled(o.expert_load_metrics == "on");
  metrics.expert_load->set_placement(o.flags.expert_placement);
  context.metrics = &metrics;
  server::AsyncEngine async_engine(&(*engine)->client(), &metrics);
  context.engine = &async_engine;
  if (parallel::ParallelContext* ranks = Parallel()) {
    // A rank that stops answering inside a step (--rank-timeout): requests in flight end with the
    // message naming it, /health turns 503, and a second later the job ends.
    ranks->OnRankFault([&async_engine](const std::string& message) {
      async_engine.Fail("parallel rank failure: " + message);
      std::this_thread::sleep_for(std::chrono::seconds(1));  // the connections write the errors
    });
  }

  server::OpenAiServer http(&context);
  auto port = http.Bind();
  if (!port.ok()) return Fail(port.status());
  async_engine.Start();
  http.set_ready(true);
  signals.Watch(o.server.shutdown_timeout_s, [&] {
    http.Stop();
    if (Parallel() != nullptr) {
      // Under mpirun a signal usually means the job is ending: mpirun stops every rank when one
      // dies. A step that cannot finish (a peer is gone) would leave the requests in flight
      // without an answer until mpirun kills this rank, so they get an error now instead.
      for (int i = 0; i < 10 && async_engine.num_in_flight() > 0; ++i) {
        if (async_engine.CurrentStepSeconds() > 0.5) {
          async_engine.Fail("the server is stopping and its engine step cannot finish: another rank of this "
                            "multi-process (tensor, pipeline or data-parallel) job stopped (mpirun's message names it)");
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
  EMBER_LOG_INFO("serving '{}' (output parser: {}) on http://{}:{}{}", context.config.served_model_name, parser,
                 o.server.host, *port, o.server.api_key.empty() ? "" : " (API key required)");
  std::fflush(stderr);
  const Status served = http.Serve();
  signals.Stop();
  async_engine.Stop();
  EMBER_LOG_INFO("server stopped");
  return served.ok() ? 0 : Fail(served);
}

}  // namespace

void RegisterServeCommand(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (vLLM-style options)");
  cmd->add_option("model", o->model, "Model: a .gguf file or a Hugging Face-style directory")->required();
  cmd->add_option("--host", o->server.host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->server.port, "Port (0 picks a free one)")->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", o->server.served_model_name, "The name clients use (default: the file name)");
  cmd->add_option("--api-key", o->server.api_key, "Require 'Authorization: Bearer KEY' on every /v1 route");
  cmd->add_option("--api-key-env", o->api_key_env, "Read the API key from this environment variable");
  cmd->add_option("--allowed-origins", o->server.allowed_origins,
                  "Web origins (scheme://host[:port], comma-separated, or *) whose pages may call the server; "
                  "requests with any other Origin header get 403 (curl and SDKs send none)")
      ->delimiter(',');
  cmd->add_option("--max-waiting-requests", o->server.max_waiting_requests,
                  "Engine requests in flight (each API request counts prompts x n) beyond which new API requests "
                  "get 503 at once")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-prompts-per-request", o->server.max_prompts_per_request,
                  "Prompts one /v1/completions request may carry; more get 400")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-request-body", o->server.max_request_body_bytes, "Largest request body in bytes");
  cmd->add_option("--max-connections", o->server.max_connections,
                  "Connections open at once; past it a new one gets 503 and is closed")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--header-timeout", o->server.header_timeout_s,
                  "Seconds a connection may wait for and send a request's header (idle keep-alive included)")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  cmd->add_option("--body-timeout", o->server.body_timeout_s, "Seconds a request's body may take to arrive")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", o->server.shutdown_timeout_s,
                  "On SIGTERM/SIGINT, seconds requests in flight may finish before they are aborted")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--http-threads", o->server.handler_threads,
                  "Threads that run route handlers (parsing, chat templates, tokenizing); connections need none")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--max-n", o->server.max_n, "Largest n (choices per request)")->check(CLI::Range(1, 1024));
  cmd->add_option("--default-max-tokens", o->server.default_max_tokens,
                  "max_tokens of a chat completion that sets none (completions: 16), cut to the context left")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--generation-config", o->generation_config,
                  "auto (the model's generation_config.json), vllm (built-in defaults) or a path");
  // "auto, hermes, muse_spark or plain": the names come from the parsers' registrations.
  std::string parsers = "auto";
  const std::vector<std::string> names = server::OutputParserNames();
  for (size_t i = 0; i < names.size(); ++i) parsers += (i + 1 == names.size() ? " or " : ", ") + names[i];
  cmd->add_option("--tool-call-parser", o->tool_call_parser, parsers);
  cmd->add_option("--chat-template", o->chat_template,
                  "Chat template to use instead of the model's: a Jinja file, or the template inline (as vLLM's)");
  // On by default: 15,872 series for Muse Spark's 62 x 256 experts is well within what Prometheus
  // handles, and measuring the load is what a placement needs (server/expert_load_metrics.h).
  cmd->add_option("--expert-load-metrics", o->expert_load_metrics,
                  "MoE models: per-layer, per-expert token counters and imbalance gauges on /metrics (on, off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  AddEngineOptions(cmd, &o->flags);
  AddMultiModalOptions(cmd, &o->multimodal);
  cmd->callback([o] { SetExitCode(RunServe(*o)); });
}

}  // namespace ember::tools
