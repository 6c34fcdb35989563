#include "tools/ember/engine_options.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

#include "core/thread_pool.h"
#include "tools/ember/common.h"
#include "tools/ember/parallel_ranks.h"

namespace ember::tools {

Expected<int64_t> ParseByteSize(const std::string& text) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    pos = 0;
  }
  std::string unit = text.substr(pos);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 1;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else pos = 0;
  if (pos == 0 || !(value > 0) || !std::isfinite(value)) {
    return InvalidArgument(fmt::format("'{}' is not a size: use bytes or a number with K, M, G or T (e.g. 4GiB)", text));
  }
  return static_cast<int64_t>(value * scale);
}

Status EngineFlags::Finish() {
  if (!kv_cache_memory.empty()) {
    EMBER_ASSIGN_OR_RETURN(engine.kv_cache_memory_bytes, ParseByteSize(kv_cache_memory));
  }
  if (scheduling_policy == "fcfs") engine.policy = SchedulingPolicy::kFcfs;
  else if (scheduling_policy == "priority") engine.policy = SchedulingPolicy::kPriority;
  else return InvalidArgument(fmt::format("--scheduling-policy must be fcfs or priority, got '{}'", scheduling_policy));
  EMBER_ASSIGN_OR_RETURN(expert_placement, ReadExpertPlacementFlag(expert_placement_file));
  EMBER_RETURN_IF_ERROR(StartParallel(parallel, &threads));
  if (threads > 0) ThreadPool::SetGlobalThreads(threads);
  return Status::Ok();
}

void AddEngineOptions(CLI::App* cmd, EngineFlags* f, bool with_threads_and_dtype) {
  EngineOptions& e = f->engine;
  cmd->add_option("--max-model-len", e.max_model_len, "Context length: prompt + output tokens (default: the model's)");
  cmd->add_option("--max-num-seqs", e.max_num_seqs, "Requests computed together at most")->check(CLI::Range(1, 65536));
  cmd->add_option("--max-num-batched-tokens", e.max_num_batched_tokens,
                  "Tokens computed per step at most (default 2048 with chunked prefill)");
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", e.enable_prefix_caching,
                "Reuse the KV of shared prompt prefixes (default on)");
  cmd->add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", e.enable_chunked_prefill,
                "Split long prompts across steps (default on)");
  if (with_threads_and_dtype) {
    cmd->add_option("--kv-cache-dtype", e.kv_cache_dtype, "auto, f32, f16, bf16 or fp8 (e4m3 with per-head scales)");
    cmd->add_option("--threads", f->threads, "Worker threads (default: all cores)");
  }
  cmd->add_option("--quantization", f->quantization, kQuantizationHelp);
  cmd->add_flag("--quantize-dense", f->quantize_dense, kQuantizeDenseHelp);
  cmd->add_option("--kv-cache-memory", f->kv_cache_memory,
                  "KV cache size, e.g. 8GiB (default: 4 GiB, or less when --max-num-seqs full-length sequences need "
                  "less; at most half the free memory)");
  cmd->add_option("--block-size", e.block_size, "Tokens per KV block")->check(CLI::Range(1, 1024));
  cmd->add_option("--scheduling-policy", f->scheduling_policy, "fcfs or priority (lower priority value first)");
  cmd->add_option("--seed", e.seed, "Seed for requests that bring none");
  cmd->add_option("--long-prefill-token-threshold", e.long_prefill_token_threshold,
                  "With chunked prefill: prompt tokens of one request per step at most (0 = no cap)");
  cmd->add_option("--shared-step-prefill-tokens", e.shared_step_prefill_tokens,
                  "With chunked prefill: prompt tokens of a step that holds several requests at most, so a burst "
                  "of prompts gets first tokens chunk by chunk and decodes keep their pace (default 512; 0 = up to "
                  "--max-num-batched-tokens)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--long-prefill-share", e.long_prefill_share,
                  "Of such a step's prompt tokens, the share prompts longer than half of them may take while a "
                  "shorter prompt waits, which then goes first (default 0.5; 1 = arrival order only)")
      ->check(CLI::Range(0.01, 1.0));
  AddParallelOptions(cmd, &f->parallel);
  AddExpertPlacementOption(cmd, &f->expert_placement_file);
  cmd->add_option("--speculative-config", e.speculative_config,
                  "Speculative decoding as JSON, vLLM's shape: '{\"method\":\"ngram\",\"num_speculative_tokens\":5,"
                  "\"prompt_lookup_max\":4,\"prompt_lookup_min\":2}', method suffix, or draft_model with "
                  "\"model\":PATH; \"adaptive\":false verifies every draft token");
  cmd->add_option("--kv-transfer-config", e.kv_transfer_config,
                  "Prefill/decode disaggregation as JSON, vLLM's shape: '{\"kv_connector\":\"UcxConnector\","
                  "\"kv_role\":\"kv_producer\",\"kv_ip\":\"127.0.0.1\",\"kv_port\":14579}' (kv_consumer, kv_both; "
                  "kv_connector_extra_config: hold_timeout_s, pull_timeout_s, connect_timeout_s); `ember router` "
                  "runs the two phases in front");
}

}  // namespace ember::tools
