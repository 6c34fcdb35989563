#include "recipe/planner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "formats/safetensors.h"
#include "recipe/report.h"
#include "runner/local_engine.h"
#include "support/source_dir.h"

namespace ember::recipe {
namespace {

std::filesystem::path ModelCache() {
  const char* cache = std::getenv("EMBER_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  return cache && *cache ? cache : std::string(home ? home : "/") + "/.cache/ember/models";
}

TEST(RulesTableTest, BuiltinRulesParseAndEachCitesASource) {
  const std::vector<Rule>& rules = BuiltinRules();
  ASSERT_GT(rules.size(), 30u);
  for (const Rule& r : rules) {
    EXPECT_FALSE(r.source.doc.empty()) << r.id;
    EXPECT_FALSE(r.source.quote.empty()) << r.id;
  }
  ASSERT_NE(FindRule("amd.long_context_config"), nullptr);
  const std::string explained = ExplainRule(*FindRule("amd.long_context_config"));
  EXPECT_NE(explained.find("1,048,576-token model limit"), std::string::npos);
  EXPECT_NE(explained.find("max_num_seqs = min(max_num_seqs, 8)"), std::string::npos);
}

TEST(RulesTableTest, RulesAreValidatedWhenLoaded) {
  auto parse = [](const std::string& rule) { return ParseRules(R"({"rules": [)" + rule + "]}"); };
  const std::string source = R"("source": {"doc": "d", "quote": "q"})";
  EXPECT_TRUE(parse(R"({"id": "a", "stage": "choose", "when": "vendor == 'amd'", "set": {"tp": "2"}, )" + source + "}").ok());
  // A typo in a fact, an unknown setting, a check rule that sets, a rule with no effect or source.
  EXPECT_FALSE(parse(R"({"id": "a", "stage": "choose", "when": "vendr == 'amd'", "set": {"tp": "2"}, )" + source + "}").ok());
  EXPECT_FALSE(parse(R"({"id": "a", "stage": "choose", "when": "true", "set": {"tpp": "2"}, )" + source + "}").ok());
  EXPECT_FALSE(parse(R"({"id": "a", "stage": "check", "when": "true", "set": {"tp": "2"}, )" + source + "}").ok());
  EXPECT_FALSE(parse(R"({"id": "a", "stage": "choose", "when": "true", )" + source + "}").ok());
  EXPECT_FALSE(parse(R"({"id": "a", "stage": "choose", "when": "true", "warn": "w"})").ok());
  // Derived memory facts exist only for check rules.
  EXPECT_FALSE(parse(R"({"id": "a", "stage": "choose", "when": "kv_sequences < 1", "warn": "w", )" + source + "}").ok());
  EXPECT_FALSE(parse(R"({"id": "a", "stage": "check", "when": "true", "warn": "{nope}", )" + source + "}").ok());
}

TEST(PlannerTest, JsonHasTheDocumentedShape) {
  RecipeRequest request;
  request.hardware = "b200";
  request.workload.goal = "throughput";
  request.workload.concurrency = 64;
  auto recipe = PlanRecipe(request);
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  const nlohmann::json j = RecipeToJson(*recipe);
  for (const char* key : {"ok", "model", "hardware", "workload", "checkpoint", "parallelism", "speculative", "kv_cache",
                          "scheduler", "weights", "kv", "command", "decisions", "warnings", "refusals", "rules_fired"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["parallelism"]["kind"], "tp_ep");
  EXPECT_EQ(j["parallelism"]["tp"], 8);
  // TP8 + EP8: each device holds an eighth of the experts and attention, all of the router.
  const auto& ck = j["weights"]["checkpoint_by_component"];
  const auto& dev = j["weights"]["per_device_by_component"];
  EXPECT_EQ(dev["experts"].get<int64_t>(), (ck["experts"].get<int64_t>() + 7) / 8);
  EXPECT_EQ(dev["attention"].get<int64_t>(), (ck["attention"].get<int64_t>() + 7) / 8);
  EXPECT_EQ(dev["router"], ck["router"]);
  EXPECT_EQ(dev["multimodal_towers"], 0);  // text only: --language-model-only
  EXPECT_EQ(j["kv"]["groups"].size(), 4u);
  EXPECT_EQ(j["kv"]["groups"][0]["kind"], "full");
  EXPECT_EQ(j["kv"]["groups"][0]["layers"], 16);
  EXPECT_EQ(j["decisions"]["parallelism"]["rule"], "parallel.nvidia_tp_ep");
  EXPECT_EQ(j["command"]["argv"][0], "ember");
  EXPECT_EQ(j["command"]["argv"][2], "meta-models/Muse-Spark-Open-816B-A42B-NVFP4");
  const auto& future = j["command"]["future_flags"];
  EXPECT_NE(std::find(future.begin(), future.end(), "--tensor-parallel-size"), future.end());
  EXPECT_NE(std::find(future.begin(), future.end(), "--enable-expert-parallel"), future.end());
  // Accepted flags and future flags never mix: the accepted part runs with today's ember serve.
  for (const auto& arg : j["command"]["argv"]) EXPECT_NE(arg.get<std::string>(), "--tensor-parallel-size");
  for (const auto& w : j["warnings"]) {
    EXPECT_TRUE(w.contains("rule") && w.contains("source") && w.contains("quote"));
  }
}

TEST(PlannerTest, KvPerTokenAtTp8MatchesInferactsMeasurement) {
  RecipeRequest request;
  request.hardware = "b200";
  request.fixed["kv_cache_dtype"] = Value::String("bf16");
  auto recipe = PlanRecipe(request);
  ASSERT_TRUE(recipe.ok());
  // §1.4: "31 KiB per token per rank" at TP8 if every layer kept every token.
  int64_t all_layers = 0;
  for (const KvGroupRow& g : recipe->memory.kv_groups) all_layers += g.layers * g.bytes_per_token / 16;
  EXPECT_EQ(all_layers, 62 * 2 * 2 * 64 * 2);  // 62 layers x K,V x 2 heads per rank x 64 x bf16
  EXPECT_EQ(all_layers, 31 * 1024);
}

TEST(PlannerTest, BadInputsAreClearErrors) {
  auto fail = [](std::function<void(RecipeRequest&)> edit, const char* expected) {
    RecipeRequest r;
    edit(r);
    auto recipe = PlanRecipe(r);
    ASSERT_FALSE(recipe.ok()) << expected;
    EXPECT_NE(recipe.status().message().find(expected), std::string::npos) << recipe.status().message();
  };
  fail([](RecipeRequest& r) { r.hardware = "a100"; }, "unknown hardware 'a100'");
  fail([](RecipeRequest& r) { r.workload.goal = "cheap"; }, "latency or throughput");
  fail([](RecipeRequest& r) { r.workload.modalities = {"smell"}; }, "unknown modality");
  fail([](RecipeRequest& r) { r.fixed["checkpoint"] = Value::String("int3"); }, "unknown checkpoint format");
  fail([](RecipeRequest& r) { r.model = "/nonexistent/model"; }, "is not muse-spark-open");
  fail([](RecipeRequest& r) { r.workload.context_len = 4 << 20; }, "exceeds the model's context length");
  fail([](RecipeRequest& r) { r.hardware = "b200"; r.devices_per_node = 3; r.fixed["parallelism"] = Value::String("pd_disagg"); },
       "not a whole number");
}

TEST(PlannerTest, UnknownParallelismIsRefusedByRule) {
  RecipeRequest r;
  r.hardware = "b200";
  r.fixed["parallelism"] = Value::String("dp");
  auto recipe = PlanRecipe(r);
  ASSERT_TRUE(recipe.ok());
  ASSERT_FALSE(recipe->ok());
  EXPECT_EQ(recipe->refusals.front().rule_id, "settings.parallelism_known");
}

TEST(PlannerTest, ConfigJsonFileAndItsDirectoryDescribeTheSameModel) {
  const std::string dir = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";
  auto from_dir = DescribeModel(dir);
  auto from_file = DescribeModel(dir + "/config.json");
  ASSERT_TRUE(from_dir.ok() && from_file.ok());
  EXPECT_EQ(from_file->path, dir);
  EXPECT_EQ(from_file->num_layers, 6);
  EXPECT_FALSE(from_file->has_dspark);  // the drafter is for the 816B shape only
  auto a = CensusFor(*from_dir, "bf16");
  auto b = CensusFor(*from_file, "bf16");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(TotalBytes(*a), TotalBytes(*b));
  // The census of the config against the checkpoint's own text tensors: equal but for the
  // residual gates, which muse_spark.md §1.2 lists as BF16 and this transformers-made file stores
  // as F32 (6 layers x 2 gates x 128 x 2 bytes).
  auto file = SafetensorsFile::Open(dir + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  int64_t text_bytes = 0;
  for (const SafetensorTensor& t : (*file)->tensors()) {
    if (t.name.rfind("model.language_model.", 0) == 0 || t.name == "lm_head.weight") text_bytes += t.NumBytes();
  }
  EXPECT_EQ(TotalBytes(*a) + 6 * 2 * 128 * 2, text_bytes);
}

TEST(ServeArgsTest, CheckParsesVllmStyleCommands) {
  auto parsed = ParseServeCommand({"ember", "serve", "m", "--tensor-parallel-size=8", "--enable-expert-parallel",
                                   "--kv-cache-dtype", "fp8_e4m3", "--no-enable-prefix-caching", "--port", "8000"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->model, "m");
  EXPECT_EQ(parsed->settings.at("parallelism").string, "tp_ep");
  EXPECT_EQ(parsed->settings.at("tp").number, 8);
  EXPECT_EQ(parsed->settings.at("kv_cache_dtype").string, "fp8");
  EXPECT_FALSE(parsed->settings.at("prefix_caching").boolean);
  EXPECT_EQ(parsed->settings.at("max_num_seqs").number, 256);  // ember serve's default
  auto unknown = ParseServeCommand({"serve", "m", "--frobnicate"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--frobnicate"), std::string::npos);
  EXPECT_FALSE(ParseServeCommand({"generate", "m"}).ok());
  EXPECT_FALSE(ParseServeCommand({"serve", "--max-model-len"}).ok());
}

TEST(ServeArgsTest, EmittedCommandRoundTripsThroughTheCheckParser) {
  RecipeRequest request;
  request.hardware = "mi355x";
  request.workload.concurrency = 48;
  auto recipe = PlanRecipe(request);
  ASSERT_TRUE(recipe.ok() && recipe->ok());
  std::vector<std::string> args(recipe->command.argv.begin(), recipe->command.argv.end());
  args.insert(args.end(), recipe->command.future_flags.begin(), recipe->command.future_flags.end());
  RecipeRequest check;
  check.hardware = "mi355x";
  check.workload.concurrency = 48;
  ASSERT_TRUE(ApplyServeCommand(args, &check).ok());
  auto checked = PlanRecipe(check);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_TRUE(checked->ok());
  for (const char* name : {"parallelism", "tp", "ep", "speculative", "attention_backend", "max_model_len",
                           "max_num_seqs", "prefix_caching", "checkpoint"}) {
    EXPECT_EQ(checked->facts.at(name).ToString(), recipe->facts.at(name).ToString()) << name;
  }
}

// The recipe's CPU prediction against what LocalEngine (ember serve's engine) allocates at startup.
void ExpectPredictionMatchesEngine(const std::string& model, int64_t context_len, int64_t concurrency) {
  RecipeRequest request;
  request.model = model;
  request.hardware = "cpu";
  request.device_memory_gb = 8;
  request.workload.concurrency = concurrency;
  request.workload.context_len = context_len;
  auto recipe = PlanRecipe(request);
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  ASSERT_TRUE(recipe->ok());
  EngineOptions options;
  options.max_model_len = recipe->facts.at("max_model_len").number;
  options.max_num_seqs = static_cast<int32_t>(recipe->facts.at("max_num_seqs").number);
  options.kv_cache_memory_bytes = recipe->memory.kv_budget_per_device;
  auto loaded = LoadModel(model);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto engine = LocalEngine::Create(std::move(*loaded), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const EnginePlan& plan = (*engine)->plan();
  const double predicted = static_cast<double>(recipe->memory.per_device_total + recipe->memory.kv_budget_per_device);
  const double actual = static_cast<double>(plan.weight_bytes + plan.kv_bytes);
  EXPECT_NEAR(predicted / actual, 1.0, 0.10) << model << ": predicted " << predicted << " bytes, engine " << actual;
  EXPECT_NEAR(static_cast<double>(recipe->memory.per_device_total) / plan.weight_bytes, 1.0, 0.10) << model;
  EXPECT_EQ(recipe->memory.kv.num_blocks, plan.kv.num_blocks) << model;
  EXPECT_EQ(recipe->memory.kv_sequences, plan.max_concurrency_at_max_len) << model;
}

TEST(PlannerTest, CpuPredictionMatchesTheEngineOnTinyMuse) {
  ExpectPredictionMatchesEngine(std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a", 256, 4);
}

TEST(PlannerTest, CpuPredictionMatchesTheEngineOnRealGgufModels) {
  int found = 0;
  for (const char* name : {"SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"}) {
    const auto path = ModelCache() / name;
    if (!std::filesystem::exists(path)) continue;
    ++found;
    ExpectPredictionMatchesEngine(path.string(), 2048, 4);
  }
  if (found == 0) GTEST_SKIP() << "SmolLM2 / Gemma 3 270M not fetched (scripts/fetch_models.py)";
}

}  // namespace
}  // namespace ember::recipe
