#include "runner/local_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/host_memory.h"
#include "core/huge_pages.h"
#include "core/logging.h"
#include "disagg/kv_transfer_config.h"
#include "disagg/ucx_kv_connector.h"
#include "runner/step_cost.h"
#include "spec/draft_model_loader.h"
#include "spec/dspark/dspark_loader.h"
#include "spec/ngram_proposer.h"
#include "spec/speculative_config.h"
#include "spec/suffix_proposer.h"

namespace ember {

namespace {

// `ranks_on_host` engines of one multi-process job share this host's free memory.
Expected<kv::KvCacheConfig> PlanKv(const CausalLM& model, const EngineOptions& o, int64_t max_model_len,
                                   int ranks_on_host) {
  kv::KvDtype dtype = model.DefaultKvDtype();
  if (o.kv_cache_dtype != "auto") {
    EMBER_ASSIGN_OR_RETURN(dtype, kv::ParseKvDtype(o.kv_cache_dtype));
  }
  EMBER_ASSIGN_OR_RETURN(kv::KvCacheConfig config, kv::PlanKvGroups(model.KvLayerSpecs(), o.block_size, dtype));
  const int64_t per_sequence = kv::KvBytesPerSequence(config, max_model_len);
  int64_t budget = o.kv_cache_memory_bytes;
  if (budget == 0) {
    // No more than the configured concurrency can use; otherwise 4 GiB (vLLM's CPU default), or
    // one full-length sequence if that needs more; never more than half of what is free.
    constexpr int64_t kDefaultBudget = int64_t{4} << 30;
    const int64_t one_sequence = per_sequence + 2 * config.BytesPerBlock();
    budget = std::min(per_sequence * o.max_num_seqs + 2 * config.BytesPerBlock(),
                      std::max(kDefaultBudget, one_sequence));
    const int64_t available = AvailableMemoryBytes();
    if (available > 0) budget = std::min(budget, available / 2 / std::max(ranks_on_host, 1));
  }
  EMBER_ASSIGN_OR_RETURN(config.num_blocks, kv::NumBlocksForBudget(config, budget));
  if ((config.num_blocks - 1) * config.BytesPerBlock() < per_sequence) {
    return ResourceExhausted(fmt::format(
        "the KV cache ({} blocks, {:.1f} MiB) cannot hold one sequence of max_model_len {} tokens ({:.1f} MiB): raise "
        "--kv-cache-memory, lower --max-model-len, or use --kv-cache-dtype fp8",
        config.num_blocks, config.num_blocks * config.BytesPerBlock() / 1048576.0, max_model_len,
        per_sequence / 1048576.0));
  }
  return config;
}

Expected<std::unique_ptr<spec::Proposer>> MakeProposer(const spec::SpeculativeConfig& config, const CausalLM& target,
                                                       const EngineOptions& o, const SchedulerConfig& s,
                                                       const KvStore& kv) {
  switch (config.method) {
    case spec::Method::kNgram: return std::unique_ptr<spec::Proposer>(new spec::NgramProposer(config));
    case spec::Method::kSuffix: return std::unique_ptr<spec::Proposer>(new spec::SuffixProposer(config));
    case spec::Method::kDraftModel: {
      spec::DraftModelProposerOptions d;
      d.num_speculative_tokens = config.num_speculative_tokens;
      d.max_num_seqs = s.max_num_seqs;
      d.max_model_len = s.max_model_len;
      d.block_size = o.block_size;
      EMBER_ASSIGN_OR_RETURN(auto proposer, spec::LoadDraftModelProposer(config.model, o.model_path, target.info(), d));
      return std::unique_ptr<spec::Proposer>(std::move(proposer));
    }
    case spec::Method::kDSpark: {
      spec::dspark::DSparkProposerOptions d;
      d.num_speculative_tokens = config.num_speculative_tokens;
      d.max_num_seqs = s.max_num_seqs;
      d.confidence_threshold = config.draft_confidence_threshold;
      d.sample_drafts = config.draft_sample_method == spec::DraftSampleMethod::kProbabilistic;
      d.draft_vocab_size = config.draft_vocab_size;
      d.quantize_q8_0 = config.quantization == "q8_0";
      d.context_cache_block_size = kv.config().block_size;
      d.context_cache_positions = o.enable_prefix_caching ? kv.num_slots() : 0;
      EMBER_ASSIGN_OR_RETURN(auto proposer, spec::dspark::LoadDSparkProposer(config.model, target, d));
      return std::unique_ptr<spec::Proposer>(std::move(proposer));
    }
  }
  return InvalidArgument("unknown speculative method");
}

// Wires --speculative-config into the scheduler config and the runner: the proposer, and for
// adaptive speculation the step cost measured on this machine.
Status SetUpSpeculation(const EngineOptions& o, CausalLM& model, KvStore& kv, ModelRunner& runner, SchedulerConfig& s,
                        std::string* description) {
  EMBER_ASSIGN_OR_RETURN(spec::SpeculativeConfig config, spec::ParseSpeculativeConfig(o.speculative_config));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<spec::Proposer> proposer, MakeProposer(config, model, o, s, kv));
  s.propose_cost_per_position = proposer->cost_grows_with_draft_length();
  s.proposer_catches_up = proposer->catches_up();
  runner.set_proposer(std::move(proposer));
  s.num_speculative_tokens = config.num_speculative_tokens;
  s.adaptive_speculation = config.adaptive;
  *description = fmt::format("speculative decoding: {}, up to {} draft tokens per request per step, {}",
                             spec::MethodName(config.method), config.num_speculative_tokens,
                             config.adaptive ? "adaptive" : "fixed width");
  if (config.adaptive) {
    const int64_t widest = std::min<int64_t>(s.max_num_batched_tokens,
                                             int64_t{s.max_num_seqs} * (1 + config.num_speculative_tokens));
    EMBER_ASSIGN_OR_RETURN(s.step_cost, MeasureStepCost(model, kv, {.max_tokens = std::min<int64_t>(widest, 256)}));
    *description += fmt::format("; step cost measured: {}", s.step_cost.Describe());
  }
  return s.Validate();
}

// Disaggregation moves a request's KV out of and into one process's KV store.
Status CheckKvTransferFits(const EngineOptions& o, const ParallelHooks& hooks) {
  if (hooks.wrap_executor || hooks.data_parallel_size > 1) {
    return InvalidArgument("--kv-transfer-config runs single-process instances: leave out --tensor-parallel-size, "
                           "--pipeline-parallel-size and --data-parallel-size (or run them without disaggregation)");
  }
  if (!o.speculative_config.empty()) {
    EMBER_ASSIGN_OR_RETURN(const spec::SpeculativeConfig config, spec::ParseSpeculativeConfig(o.speculative_config));
    if (config.method == spec::Method::kDraftModel || config.method == spec::Method::kDSpark) {
      return InvalidArgument(fmt::format(
          "--speculative-config method {} keeps a drafter state per request that a pulled prompt does not bring "
          "along: with --kv-transfer-config use ngram or suffix speculation",
          spec::MethodName(config.method)));
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<LocalEngine>> LocalEngine::Create(std::unique_ptr<CausalLM> model, const EngineOptions& o,
                                                           const ParallelHooks& hooks) {
  std::unique_ptr<LocalEngine> engine(new LocalEngine());
  if (hooks.data_parallel_size > 1) {
    if (model->info().num_experts == 0) {
      return InvalidArgument(fmt::format("--data-parallel-size runs attention data-parallel with expert parallelism "
                                         "(DEP), but {} has no routed experts: run replicas as separate servers",
                                         model->info().architecture));
    }
    if (!o.speculative_config.empty()) {
      return InvalidArgument("speculative decoding is not supported with --data-parallel-size > 1");
    }
  }
  if (o.multimodal_encoder != nullptr && (hooks.wrap_executor || hooks.data_parallel_size > 1)) {
    return InvalidArgument("image, video and audio towers run in single-process engines only: add "
                           "--language-model-only to serve the text model over several ranks");
  }
  const int64_t model_max = model->info().max_position_embeddings;
  int64_t max_model_len = o.max_model_len > 0 ? o.max_model_len : model_max;
  if (model_max > 0 && max_model_len > model_max) {
    return InvalidArgument(fmt::format("--max-model-len {} exceeds the model's context length {}", max_model_len,
                                       model_max));
  }
  EMBER_ASSIGN_OR_RETURN(kv::KvCacheConfig kv_config, PlanKv(*model, o, max_model_len, hooks.ranks_on_host));
  if (hooks.agree_num_blocks) {
    EMBER_ASSIGN_OR_RETURN(kv_config.num_blocks, hooks.agree_num_blocks(kv_config.num_blocks));
  }
  EMBER_ASSIGN_OR_RETURN(KvStore store, KvStore::Create(kv_config));

  SchedulerConfig s;
  s.max_num_seqs = o.max_num_seqs;
  s.max_model_len = max_model_len;
  s.vocab_size = model->info().vocab_size;
  s.enable_chunked_prefill = o.enable_chunked_prefill;
  s.max_num_batched_tokens = o.max_num_batched_tokens > 0 ? o.max_num_batched_tokens
                             : o.enable_chunked_prefill   ? std::max<int64_t>(2048, o.max_num_seqs)
                                                          : std::max<int64_t>(max_model_len, o.max_num_seqs);
  s.policy = o.policy;
  s.seed = o.seed;
  s.long_prefill_token_threshold = o.long_prefill_token_threshold;
  s.shared_step_prefill_tokens = o.shared_step_prefill_tokens;
  s.long_prefill_share = o.long_prefill_share;
  std::optional<disagg::KvTransferConfig> kv_transfer;
  if (!o.kv_transfer_config.empty()) {
    EMBER_ASSIGN_OR_RETURN(kv_transfer, disagg::ParseKvTransferConfig(o.kv_transfer_config));
    EMBER_RETURN_IF_ERROR(CheckKvTransferFits(o, hooks));
    s.kv_producer = kv_transfer->is_producer();
    s.kv_consumer = kv_transfer->is_consumer();
  }
  EMBER_RETURN_IF_ERROR(s.Validate());

  // The step workspace for the largest step the scheduler can form (every token's logits at
  // most), so steady-state steps allocate nothing.
  const Status reserved =
      model->ReserveWorkspace({.max_tokens = s.max_num_batched_tokens, .max_logit_rows = s.max_num_batched_tokens});
  if (!reserved.ok()) {
    return ResourceExhausted(fmt::format("{} for steps of max_num_batched_tokens {}; lower --max-num-batched-tokens "
                                         "(or turn chunked prefill on, which bounds it)",
                                         reserved.message(), s.max_num_batched_tokens));
  }
  engine->plan_.workspace_bytes = model->workspace().capacity();
  engine->plan_.kv = kv_config;
  engine->plan_.scheduler = s;
  engine->plan_.weight_bytes = model->weight_bytes().total;
  engine->plan_.repacked_weight_bytes = model->weight_bytes().repacked;
  engine->plan_.kv_bytes = store.bytes();
  engine->plan_.tokens_per_full_group = (kv_config.num_blocks - 1) * kv_config.block_size;
  const int64_t per_sequence = kv::KvBytesPerSequence(kv_config, max_model_len);
  engine->plan_.max_concurrency_at_max_len = (kv_config.num_blocks - 1) * kv_config.BytesPerBlock() / per_sequence;

  // EOS ids the vocabulary cannot produce (e.g. tiny test models cut from a large tokenizer's
  // config) can never be sampled, so they need no masking.
  std::vector<int32_t> eos;
  for (int64_t id : model->info().eos_token_ids) {
    if (id >= 0 && id < model->info().vocab_size) eos.push_back(static_cast<int32_t>(id));
  }
  engine->model_ = std::move(model);
  engine->kv_ = std::make_unique<KvStore>(std::move(store));
  engine->eos_token_ids_ = eos;
  engine->runner_ = std::make_unique<ModelRunner>(engine->model_.get(), engine->kv_.get(), std::move(eos));
  if (o.multimodal_encoder != nullptr) {
    engine->multimodal_encoder_ = o.multimodal_encoder;
    engine->runner_->set_multimodal_encoder(engine->multimodal_encoder_.get(), o.encoder_cache_bytes);
    std::string modalities;
    for (Modality m : {Modality::kImage, Modality::kVideo, Modality::kAudio}) {
      if (o.multimodal_encoder->Accepts(m)) modalities += fmt::format("{}{}", modalities.empty() ? "" : ", ", ModalityName(m));
    }
    engine->plan_.multimodal = fmt::format("multimodal inputs: {}; encoder cache {} MiB", modalities,
                                           o.encoder_cache_bytes >> 20);
  }
  if (!o.speculative_config.empty()) {
    EMBER_RETURN_IF_ERROR(SetUpSpeculation(o, *engine->model_, *engine->kv_, *engine->runner_, s,
                                           &engine->plan_.speculation));
    engine->plan_.scheduler = s;
  }
  EngineCoreConfig core;
  core.scheduler = s;
  core.kv = kv_config;
  core.kv_options.enable_prefix_caching = o.enable_prefix_caching;
  Executor* executor = engine->runner_.get();
  if (hooks.wrap_executor) {
    engine->executor_ = hooks.wrap_executor(*engine->runner_);
    executor = engine->executor_.get();
  }
  EMBER_ASSIGN_OR_RETURN(engine->core_, EngineCore::Create(core, executor));
  if (hooks.make_data_parallel_executor) {
    // DEP's driver: a scheduler and KV manager per data-parallel rank (every rank's cache holds
    // the agreed block count), stepped together.
    std::vector<EngineCore*> cores = {engine->core_.get()};
    for (int d = 1; d < hooks.data_parallel_size; ++d) {
      EMBER_ASSIGN_OR_RETURN(auto rank_core, EngineCore::Create(core, executor));
      cores.push_back(rank_core.get());
      engine->data_parallel_cores_.push_back(std::move(rank_core));
    }
    engine->data_parallel_executor_ = hooks.make_data_parallel_executor(*engine->runner_);
    engine->client_ =
        std::make_unique<DataParallelEngineClient>(std::move(cores), engine->data_parallel_executor_.get());
    return engine;
  }
  auto client = std::make_unique<InProcessEngineClient>(engine->core_.get());
  if (kv_transfer) {
    EMBER_ASSIGN_OR_RETURN(auto connector, disagg::UcxKvConnector::Create(*kv_transfer, kv_config));
    InProcessEngineClient* loop = client.get();
    connector->SetWake([loop] { loop->Wake(); });
    engine->plan_.kv_transfer =
        kv_transfer->is_producer()
            ? fmt::format("KV transfer: {} (UCX), engine id {}, consumers pull from {}:{}; held KV is freed after {} s",
                          disagg::KvRoleName(kv_transfer->role), connector->engine_id(), connector->host(),
                          connector->port(), kv_transfer->hold_timeout_s)
            : fmt::format("KV transfer: {} (UCX), engine id {}; a pull not done in {} s computes the prompt here",
                          disagg::KvRoleName(kv_transfer->role), connector->engine_id(), kv_transfer->pull_timeout_s);
    engine->core_->set_kv_connector(connector.get());
    engine->kv_connector_ = std::move(connector);
  }
  engine->client_ = std::move(client);
  return engine;
}

LocalEngine::~LocalEngine() {
  // The connector's thread reads and writes the KV store: stop it before the store goes.
  if (core_ != nullptr) core_->set_kv_connector(nullptr);
  kv_connector_.reset();
}

std::vector<std::string> LocalEngine::DescribePlan() const {
  const EnginePlan& p = plan_;
  std::vector<std::string> lines = {
      fmt::format("memory: weights {:.1f} MiB{}, KV cache {:.1f} MiB, step workspace {:.1f} MiB",
                  p.weight_bytes / 1048576.0,
                  p.repacked_weight_bytes > 0
                      ? fmt::format(" (+{:.1f} MiB repacked for the packed GEMMs)", p.repacked_weight_bytes / 1048576.0)
                      : std::string(),
                  p.kv_bytes / 1048576.0, p.workspace_bytes / 1048576.0),
      fmt::format("KV cache: {}", kv::DescribeKvConfig(p.kv)),
      fmt::format("KV capacity: {} tokens per full-attention group; {} sequences of max_model_len {} at once",
                  p.tokens_per_full_group, p.max_concurrency_at_max_len, p.scheduler.max_model_len),
      fmt::format("scheduler: max_num_seqs {}, max_num_batched_tokens {}, chunked prefill {}{}",
                  p.scheduler.max_num_seqs, p.scheduler.max_num_batched_tokens,
                  p.scheduler.enable_chunked_prefill ? "on" : "off",
                  p.scheduler.enable_chunked_prefill && p.scheduler.shared_step_prefill_tokens > 0
                      ? fmt::format(", at most {} prompt tokens in a step shared by several requests{}",
                                    p.scheduler.shared_step_prefill_tokens,
                                    p.scheduler.long_prefill_share < 1
                                        ? fmt::format(" (long prompts {:.0f}% of them while a short one waits)",
                                                      100 * p.scheduler.long_prefill_share)
                                        : std::string())
                      : std::string()),
  };
  if (const std::string thp = TransparentHugePageMode(); thp != "always" && thp != "madvise") {
    // The weights and the KV pool are advised MADV_HUGEPAGE (core/huge_pages.h); without THP they
    // stream through 4 KiB pages.
    lines.push_back(fmt::format(
        "transparent huge pages are {}: the weights and KV cache use 4 KiB pages, which made decode "
        "and prefill ~10% slower where measured (bench/results/huge_pages); as root, `echo madvise > "
        "/sys/kernel/mm/transparent_hugepage/enabled` turns them on",
        thp.empty() ? "unavailable" : "off (" + thp + ")"));
  }
  if (!p.speculation.empty()) lines.push_back(p.speculation);
  if (!p.kv_transfer.empty()) lines.push_back(p.kv_transfer);
  if (!p.multimodal.empty()) lines.push_back(p.multimodal);
  return lines;
}

}  // namespace ember
