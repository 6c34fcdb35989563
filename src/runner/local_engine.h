// Everything one process needs to run a model on this machine: the model, the KV memory sized
// from a budget, the model runner, the engine core and the in-process EngineClient in front of
// it, built from vLLM-style options. Every tool that runs a model (serve, generate, chat,
// perplexity, bench) starts here, so there is one way to run a model and one memory plan log.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/data_parallel_client.h"
#include "engine/engine_client.h"
#include "engine/engine_core.h"
#include "engine/executor.h"
#include "model/causal_lm.h"
#include "model/kv_store.h"
#include "runner/model_runner.h"
#include "runner/multimodal/encoder.h"

namespace ember {

struct EngineOptions {
  int64_t max_model_len = 0;           // 0: the model's max_position_embeddings
  int32_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 0;  // 0: 2048 with chunked prefill, else max_model_len
  bool enable_prefix_caching = true;
  bool enable_chunked_prefill = true;
  std::string kv_cache_dtype = "auto"; // auto = the model's choice (f16 for GGUF as llama.cpp, bf16 for Muse Spark)
  int64_t kv_cache_memory_bytes = 0;   // 0: 4 GiB, less if max_num_seqs full-length sequences need less, at most half the free memory
  int64_t block_size = 16;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  uint64_t seed = 0;
  int64_t long_prefill_token_threshold = 0;
  // A step of several requests holds at most this many prompt tokens (SchedulerConfig).
  int64_t shared_step_prefill_tokens = 512;
  // Of such a step's prompt tokens, the share long prompts take while a short one waits (SchedulerConfig).
  double long_prefill_share = 0.5;
  // --speculative-config (vLLM's JSON, spec/speculative_config.h); empty: no speculation.
  std::string speculative_config;
  // The target model's path, for a draft model's tokenizer check.
  std::string model_path;
  // --kv-transfer-config (vLLM's JSON, disagg/kv_transfer_config.h): prefill/decode disaggregation
  // roles over UCX; empty: none.
  std::string kv_transfer_config;
  // The model's towers for image, video and audio inputs (runner/multimodal); null: text only.
  std::shared_ptr<const MultiModalEncoder> multimodal_encoder;
  // The encoder cache's budget: encoder outputs kept by content hash for reuse.
  int64_t encoder_cache_bytes = int64_t{256} << 20;
};

// The memory plan, for the startup log and `ember recipe`.
struct EnginePlan {
  kv::KvCacheConfig kv;
  SchedulerConfig scheduler;
  int64_t weight_bytes = 0;
  int64_t repacked_weight_bytes = 0;  // load-time kernel-layout copies (WeightBytes::repacked)
  int64_t kv_bytes = 0;
  int64_t workspace_bytes = 0;             // the model's step workspace for max_num_batched_tokens
  int64_t tokens_per_full_group = 0;       // KV capacity in tokens of a full-attention group
  int64_t max_concurrency_at_max_len = 0;  // full-length sequences that fit at once
  std::string speculation;                 // how speculative decoding runs, "" when off
  std::string kv_transfer;                 // the disaggregation role and address, "" when off
  std::string multimodal;                  // the modalities the towers take and the encoder cache, "" when none
};

// How a multi-process engine (src/parallel) joins in. Every rank builds the same LocalEngine over
// its shard of the model; rank 0's core drives the wrapped executor, the other ranks' runners are
// driven by their worker loops and their cores stay idle.
struct ParallelHooks {
  // The KV block count every rank can hold (the minimum over the ranks), from this rank's plan:
  // rank 0's KV manager hands out block ids that every rank's cache must have.
  std::function<Expected<int64_t>(int64_t num_blocks)> agree_num_blocks;
  // The core's executor around the runner (rank 0 broadcasts each step before running it).
  std::function<std::unique_ptr<Executor>(ModelRunner& runner)> wrap_executor;
  // Ranks of the job on this host: the default KV budget's share of the free memory is split
  // among them.
  int ranks_on_host = 1;
  // Data parallelism (DEP): the number of data-parallel ranks. Rank 0 builds a core per rank and
  // a DataParallelEngineClient over them, driving the executor make_data_parallel_executor
  // makes around its runner; the other ranks' runners are driven by their worker loops.
  int data_parallel_size = 1;
  std::function<std::unique_ptr<DataParallelExecutor>(ModelRunner& runner)> make_data_parallel_executor;
};

class LocalEngine {
 public:
  static Expected<std::unique_ptr<LocalEngine>> Create(std::unique_ptr<CausalLM> model, const EngineOptions& options,
                                                       const ParallelHooks& hooks = {});

  CausalLM& model() { return *model_; }
  // The front door every frontend uses; only its Step() may drive the core.
  EngineClient& client() { return *client_; }
  // For tests that inspect the scheduler and the KV manager between steps (data-parallel rank
  // 0's under DEP).
  EngineCore& core() { return *core_; }
  const EnginePlan& plan() const { return plan_; }
  // The EOS ids of the model that lie inside its vocabulary (the ones that can be sampled).
  const std::vector<int32_t>& eos_token_ids() const { return eos_token_ids_; }
  ModelRunner& runner() { return *runner_; }
  // Human-readable lines: weights, KV groups, blocks and tokens, max concurrency.
  std::vector<std::string> DescribePlan() const;

 private:
  LocalEngine() = default;

 public:
  ~LocalEngine();

 private:
  std::unique_ptr<CausalLM> model_;
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Executor> executor_;  // ParallelHooks::wrap_executor's, around runner_
  std::unique_ptr<EngineCore> core_;
  // DEP on rank 0: the other data-parallel ranks' cores and the executor that steps them all.
  std::vector<std::unique_ptr<EngineCore>> data_parallel_cores_;
  std::unique_ptr<DataParallelExecutor> data_parallel_executor_;
  std::unique_ptr<EngineClient> client_;
  std::unique_ptr<KvConnector> kv_connector_;  // --kv-transfer-config's; outlives nothing it serves
  std::shared_ptr<const MultiModalEncoder> multimodal_encoder_;  // read by runner_
  EnginePlan plan_;
  std::vector<int32_t> eos_token_ids_;
};

}  // namespace ember
