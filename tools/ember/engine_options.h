// The engine's command-line options, with vLLM's names, shared by `ember serve` and
// `ember generate --jsonl`.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

#include "exec/expert_placement.h"

#include "parallel/parallel_context.h"
#include "runner/local_engine.h"

namespace ember::tools {

struct EngineFlags {
  EngineOptions engine;
  std::string kv_cache_memory;  // "4GiB", "512MiB", "1073741824"
  std::string scheduling_policy = "fcfs";
  int threads = 0;
  std::optional<std::string> quantization;  // --quantization; unset: the checkpoint's stored formats
  bool quantize_dense = false;
  parallel::ParallelConfig parallel;  // --tensor-parallel-size, ... (tools/ember/parallel_ranks.h)
  std::string expert_placement_file;  // --expert-placement
  std::shared_ptr<const exec::ExpertPlacement> expert_placement;  // read from it by Finish()

  // Parses the text options into `engine`; errors say which flag is wrong. With several ranks
  // asked for, also starts them (StartParallel: outside mpirun this process becomes mpirun).
  Status Finish();
};

// `with_threads_and_dtype` false leaves out --threads and --kv-cache-dtype for commands that
// already have them (ember generate).
void AddEngineOptions(CLI::App* cmd, EngineFlags* flags, bool with_threads_and_dtype = true);

// "4GiB" -> 4294967296; plain numbers are bytes; K/M/G/T with or without "iB"/"B" are powers of 1024.
Expected<int64_t> ParseByteSize(const std::string& text);

}  // namespace ember::tools
