// Everything one process needs to serve a model on this machine: the model, the KV memory sized
// from a budget, the model runner and the engine core, built from vLLM-style options. `ember
// serve` and `ember generate --jsonl` both start here, so both log the same memory plan.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "model/causal_lm.h"
#include "model/kv_store.h"
#include "runner/model_runner.h"

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
};

class LocalEngine {
 public:
  static Expected<std::unique_ptr<LocalEngine>> Create(std::unique_ptr<CausalLM> model, const EngineOptions& options);

  CausalLM& model() { return *model_; }
  EngineCore& core() { return *core_; }
  const EnginePlan& plan() const { return plan_; }
  ModelRunner& runner() { return *runner_; }
  // Human-readable lines: weights, KV groups, blocks and tokens, max concurrency.
  std::vector<std::string> DescribePlan() const;

 private:
  LocalEngine() = default;
  std::unique_ptr<CausalLM> model_;
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<EngineCore> core_;
  EnginePlan plan_;
};

}  // namespace ember
