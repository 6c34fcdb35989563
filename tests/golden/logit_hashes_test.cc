// Bit-for-bit guard for refactors of the model layer: the logits of every prompt position of
// the Muse Spark golden models (bf16, and with NVFP4 / MXFP4 / FP8 experts converted at load),
// SmolLM2 and Gemma 3, through every kernel variant the host runs, hashed and compared with
// tests/golden/logit_hashes.json. The hashes were recorded before the execution-layer rework
// (issue #14) began; a change that moves one bit of one logit fails here.
//
// Results are the same on any x86-64 host that runs a variant: no approximate instructions
// (rcp/rsqrt) are used, and chunk boundaries do not depend on the thread count.
// EMBER_RECORD_LOGIT_HASHES=1 rewrites the file (only for a change meant to move the bits, with
// the reason in its commit message).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/isa.h"
#include "model/causal_lm.h"
#include "quant/block_scaled.h"
#include "support/model_cache.h"
#include "support/single_sequence.h"
#include "support/source_dir.h"

namespace ember {
namespace {

const std::string kHashFile = std::string(EMBER_SOURCE_DIR) + "/tests/golden/logit_hashes.json";

struct Case {
  std::string name;
  std::string path;
  std::optional<quant::WeightFormat> quantization;
};

std::vector<Case> Cases() {
  const std::string muse = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/";
  return {
      {"muse_tiny_a", muse + "tiny_a", std::nullopt},
      {"muse_tiny_b", muse + "tiny_b", std::nullopt},
      {"muse_tiny_a_nvfp4", muse + "tiny_a", quant::WeightFormat::kNvfp4},
      {"muse_tiny_a_mxfp4", muse + "tiny_a", quant::WeightFormat::kMxfp4},
      {"muse_tiny_a_fp8", muse + "tiny_a", quant::WeightFormat::kFp8E4m3},
      {"smollm2", test::ModelCacheDir() + "/SmolLM2-135M-Instruct.Q4_1.gguf", std::nullopt},
      {"gemma3", test::ModelCacheDir() + "/gemma-3-270m-q4_k_m.gguf", std::nullopt},
  };
}

// Every kernel family set to one variant, as EMBER_ISA does at startup.
void SelectEverywhere(std::string_view name) {
  const Status selected = SelectIsa(name);
  ASSERT_TRUE(selected.ok()) << selected.ToString();
}

// A fixed prompt inside every vocabulary, run as two steps (13 then 7 tokens) so the second
// attends over cached KV; logits of all 20 positions, in f32 KV.
Expected<std::string> LogitHash(const Case& c) {
  LoadOptions options;
  options.quantization = c.quantization;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<CausalLM> model, LoadModel(c.path, options));
  const int64_t vocab = model->info().vocab_size;
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < 20; ++i) prompt.push_back(static_cast<int32_t>((1 + i * 7919) % vocab));
  EMBER_ASSIGN_OR_RETURN(test::SingleSequence sequence, test::SingleSequence::Create(model.get(), 20, kv::KvDtype::kF32));
  std::vector<float> logits, all;
  EMBER_RETURN_IF_ERROR(sequence.Append(prompt.data(), 13, /*all_logits=*/true, &logits));
  all = logits;
  EMBER_RETURN_IF_ERROR(sequence.Append(prompt.data() + 13, 7, /*all_logits=*/true, &logits));
  all.insert(all.end(), logits.begin(), logits.end());
  if (static_cast<int64_t>(all.size()) != 20 * vocab) return Internal("wrong number of logits");
  return fmt::format("{:016x}", XXH3_64bits(all.data(), all.size() * sizeof(float)));
}

TEST(LogitHashesTest, EveryModelAndVariantMatchesTheRecordedBits) {
  nlohmann::json recorded = nlohmann::json::object();
  if (std::ifstream in(kHashFile); in.good()) recorded = nlohmann::json::parse(in);
  const bool record = std::getenv("EMBER_RECORD_LOGIT_HASHES") != nullptr;
  const std::string active(IsaName(ActiveIsa()));
  int checked = 0;
  for (const Case& c : Cases()) {
    if (!std::ifstream(c.path).good() && !std::ifstream(c.path + "/config.json").good()) {
      std::printf("[ skipped ] %s: %s not fetched (scripts/fetch_models.py)\n", c.name.c_str(), c.path.c_str());
      continue;
    }
    for (const Isa isa : AvailableIsas()) {
      const std::string key = c.name + "/" + std::string(IsaName(isa));
      SelectEverywhere(IsaName(isa));
      const Expected<std::string> hash = LogitHash(c);
      ASSERT_TRUE(hash.ok()) << key << ": " << hash.status().ToString();
      if (record) {
        recorded[key] = *hash;
      } else {
        ASSERT_TRUE(recorded.contains(key)) << key << " has no recorded hash (EMBER_RECORD_LOGIT_HASHES=1)";
        EXPECT_EQ(*hash, recorded[key].get<std::string>()) << key << ": the logits moved";
      }
      ++checked;
    }
  }
  SelectEverywhere(active);
  if (record) std::ofstream(kHashFile) << recorded.dump(2) << "\n";
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace ember
