// Building LocalEngines in the runner tests: one model file, options, and the small chunked
// engine the speculative-decoding tests run their workloads on (and the configs it must refuse).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/causal_lm.h"
#include "runner/local_engine.h"
#include "support/source_dir.h"

namespace ember::test {

inline const std::string kTinyMuseA = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";

// A model from the fetched-model cache (scripts/fetch_models.py; EMBER_MODEL_CACHE overrides it).
inline std::string CachedModel(const std::string& file) {
  const char* cache = std::getenv("EMBER_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  return (cache && *cache ? std::string(cache) : std::string(home ? home : "") + "/.cache/ember/models") + "/" + file;
}

// Null (after a test failure naming why) when the model or the engine cannot be built.
inline std::unique_ptr<LocalEngine> MakeEngine(const std::string& path, EngineOptions options) {
  auto model = LoadModel(path);
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return nullptr;
  options.model_path = path;  // a draft_model / dspark proposer resolves its files against it
  auto engine = LocalEngine::Create(std::move(*model), options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString() << " " << options.speculative_config;
  return engine.ok() ? std::move(*engine) : nullptr;
}

// f32 KV, 8-token blocks, and a 32-token step budget, so prompts span several steps (chunked
// prefill) and eight requests share steps.
inline EngineOptions SmallChunkedEngine() {
  EngineOptions o;
  o.kv_cache_dtype = "f32";
  o.max_model_len = 256;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 32;
  o.kv_cache_memory_bytes = 32 << 20;
  o.block_size = 8;
  return o;
}

// Each (speculative config, text) pair: the tiny Muse engine must refuse to start with it, and
// its error must contain the text.
inline void ExpectStartupErrors(const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [config, needle] : cases) {
    auto model = LoadModel(kTinyMuseA);
    ASSERT_TRUE(model.ok());
    EngineOptions o = SmallChunkedEngine();
    o.speculative_config = config;
    o.model_path = kTinyMuseA;
    auto engine = LocalEngine::Create(std::move(*model), o);
    ASSERT_FALSE(engine.ok()) << config;
    EXPECT_NE(engine.status().message().find(needle), std::string::npos) << config << " -> " << engine.status().message();
  }
}

}  // namespace ember::test
