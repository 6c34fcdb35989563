// One scenario per constraint the seeds state (issue #7), table-driven: the workload, and the
// recommendation or refusal the rule table must produce for it, with the rule id.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "recipe/planner.h"

namespace ember::recipe {
namespace {

struct Scenario {
  const char* name;
  const char* hardware;
  std::function<void(RecipeRequest&)> setup;
  std::vector<std::pair<std::string, Value>> expect_settings;
  std::vector<std::string> expect_refused;  // rule ids; empty = the deployment must be accepted
  std::vector<std::string> expect_warned;
};

bool Has(const std::vector<Finding>& findings, const std::string& id) {
  return std::any_of(findings.begin(), findings.end(), [&](const Finding& f) { return f.rule_id == id; });
}

Value S(const char* s) { return Value::String(s); }
Value N(double n) { return Value::Number(n); }
Value B(bool b) { return Value::Bool(b); }

std::vector<std::string> ServeArgs(std::initializer_list<const char*> args) { return {args.begin(), args.end()}; }

const std::vector<Scenario>& Scenarios() {
  static const std::vector<Scenario> scenarios = {
      {"nvidia_nvfp4_8gpu_tp_is_gpu_count_plus_ep", "b200",
       [](RecipeRequest& r) { r.workload.goal = "throughput"; r.workload.concurrency = 32; },
       {{"checkpoint", S("nvfp4")}, {"parallelism", S("tp_ep")}, {"tp", N(8)}, {"ep", B(true)}}, {}, {}},
      {"nvidia_nvfp4_tp4_on_8_gpus_refused", "b200",
       [](RecipeRequest& r) {
         ASSERT_TRUE(ApplyServeCommand(ServeArgs({"serve", "meta-models/Muse-Spark-Open-816B-A42B-NVFP4",
                                                  "--tensor-parallel-size", "4", "--enable-expert-parallel",
                                                  "--max-model-len", "32768"}), &r).ok());
       },
       {{"tp", N(4)}}, {"nvidia.nvfp4_tp_equals_gpus"}, {"devices.idle"}},
      {"nvidia_dspark_on_by_default", "b200", [](RecipeRequest& r) { r.workload.concurrency = 8; },
       {{"speculative", B(true)}, {"num_speculative_tokens", N(7)}, {"draft_model", S("Inferact/Muse-Spark-Open-DSpark")}},
       {}, {}},
      {"amd_text_only_refuses_images", "mi355x", [](RecipeRequest& r) { r.workload.modalities = {"text", "image"}; },
       {}, {"platform.multimodal_nvidia_only"}, {}},
      {"multimodal_points_to_nvidia", "b200", [](RecipeRequest& r) { r.workload.modalities = {"text", "video"}; },
       {{"language_model_only", B(false)}}, {}, {"modality.video_audio_separate"}},
      {"amd_prefix_caching_off_chunked_prefill_on", "mi355x", [](RecipeRequest&) {},
       {{"prefix_caching", B(false)}, {"chunked_prefill", B(true)}}, {}, {}},
      {"amd_refuses_data_parallel", "mi355x",
       [](RecipeRequest& r) { r.fixed["parallelism"] = S("dp_attention_ep"); r.workload.concurrency = 64; }, {},
       {"platform.dp_disagg_nvidia_only"}, {}},
      {"amd_refuses_disaggregation", "mi350x", [](RecipeRequest& r) { r.fixed["parallelism"] = S("pd_disagg"); }, {},
       {"platform.dp_disagg_nvidia_only"}, {}},
      {"nvidia_allows_disaggregation", "b200", [](RecipeRequest& r) { r.fixed["parallelism"] = S("pd_disagg"); },
       {{"replicas", N(2)}, {"tp", N(4)}}, {}, {}},
      {"amd_latency_handful_plain_tp", "mi355x", [](RecipeRequest& r) { r.workload.concurrency = 4; },
       {{"parallelism", S("tp")}, {"ep", B(false)}, {"checkpoint", S("mxfp4")}}, {}, {}},
      {"amd_mxfp4_32_concurrent_tp_ep", "mi355x",
       [](RecipeRequest& r) { r.workload.concurrency = 32; r.workload.speculative = "off"; r.workload.goal = "throughput"; },
       {{"parallelism", S("tp_ep")}, {"ep", B(true)}}, {}, {}},
      {"amd_bf16_stays_plain_tp", "mi355x",
       [](RecipeRequest& r) { r.fixed["checkpoint"] = S("bf16"); r.workload.concurrency = 128; },
       {{"parallelism", S("tp")}, {"ep", B(false)}}, {}, {}},
      {"amd_bf16_under_ep_warned", "mi355x",
       [](RecipeRequest& r) { r.fixed["checkpoint"] = S("bf16"); r.fixed["parallelism"] = S("tp_ep"); }, {}, {},
       {"amd.ep_over_bf16"}},
      {"dspark_helps_at_low_concurrency", "mi355x", [](RecipeRequest& r) { r.workload.concurrency = 2; },
       {{"speculative", B(true)}, {"parallelism", S("tp")}}, {}, {}},
      {"dspark_ahead_through_64_with_ep", "mi355x", [](RecipeRequest& r) { r.workload.concurrency = 64; },
       {{"speculative", B(true)}, {"parallelism", S("tp_ep")}}, {}, {}},
      {"beyond_64_ep_without_draft", "mi355x", [](RecipeRequest& r) { r.workload.concurrency = 128; },
       {{"speculative", B(false)}, {"parallelism", S("tp_ep")}}, {}, {}},
      {"forced_dspark_beyond_64_warned", "b200",
       [](RecipeRequest& r) { r.workload.concurrency = 256; r.workload.speculative = "on"; },
       {{"speculative", B(true)}}, {}, {"spec.high_concurrency"}},
      {"adaptive_dspark_needs_triton_attention", "mi355x", [](RecipeRequest& r) { r.workload.concurrency = 4; },
       {{"attention_backend", S("triton")}, {"adaptive_verification", B(true)}}, {}, {}},
      {"adaptive_dspark_on_aiter_refused", "mi355x",
       [](RecipeRequest& r) {
         ASSERT_TRUE(ApplyServeCommand(
             ServeArgs({"serve", "amd/Muse-Spark-Open-816B-A42B-Quark-MXFP4", "-tp", "8", "--max-model-len", "32768",
                        "--max-num-seqs", "4", "--no-enable-prefix-caching", "--speculative-config",
                        R"({"method": "dspark", "model": "Inferact/Muse-Spark-Open-DSpark", "num_speculative_tokens": 7})",
                        "--attention-backend", "ROCM_AITER_FA"}), &r).ok());
       },
       {}, {"amd.aiter_no_adaptive_dspark"}, {}},
      {"amd_default_context_32768", "mi355x", [](RecipeRequest&) {}, {{"max_model_len", N(32768)}}, {}, {}},
      {"amd_one_million_context_config", "mi355x",
       [](RecipeRequest& r) { r.workload.context_len = 1048576; r.workload.concurrency = 32; },
       {{"max_model_len", N(1048576)}, {"parallelism", S("tp")}, {"max_num_seqs", N(8)}, {"checkpoint", S("mxfp4")}},
       {}, {}},
      {"amd_one_million_context_fp8_kv_accepted", "mi355x",
       [](RecipeRequest& r) { r.workload.context_len = 1048576; r.fixed["kv_cache_dtype"] = S("fp8"); },
       {{"kv_cache_dtype", S("fp8")}}, {}, {}},
      {"amd_one_million_context_bf16_refused", "mi355x",
       [](RecipeRequest& r) { r.workload.context_len = 1048576; r.fixed["checkpoint"] = S("bf16"); }, {},
       {"amd.long_context_checkpoint"}, {}},
      {"amd_one_million_context_16_seqs_refused", "mi355x",
       [](RecipeRequest& r) {
         ASSERT_TRUE(ApplyServeCommand(ServeArgs({"serve", "amd/Muse-Spark-Open-816B-A42B-Quark-MXFP4",
                                                  "--tensor-parallel-size", "8", "--max-model-len", "1048576",
                                                  "--max-num-seqs", "16"}), &r).ok());
       },
       {}, {"amd.long_context_8_seqs"}, {}},
      {"amd_one_million_context_with_ep_refused", "mi355x",
       [](RecipeRequest& r) { r.workload.context_len = 1048576; r.fixed["parallelism"] = S("tp_ep"); }, {},
       {"amd.long_context_plain_tp"}, {}},
      {"tpu_gated_and_project_reported", "tpu-v7", [](RecipeRequest&) {}, {{"parallelism", S("tp")}}, {},
       {"parallel.tpu_tp"}},
      {"bf16_does_not_fit_on_8_b200", "b200", [](RecipeRequest& r) { r.fixed["checkpoint"] = S("bf16"); }, {},
       {"memory.weights_fit"}, {}},
      {"grace_blackwell_fp8_kv_and_tp4_replicas", "gb200",
       [](RecipeRequest& r) { r.devices_per_node = 8; r.workload.goal = "throughput"; },
       {{"kv_cache_dtype", S("fp8")}, {"replicas", N(2)}, {"tp", N(4)}}, {}, {}},
  };
  return scenarios;
}

class SeedRuleTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(SeedRuleTest, RecommendsOrRefusesAsTheSourceSays) {
  const Scenario& s = GetParam();
  RecipeRequest request;
  request.hardware = s.hardware;
  s.setup(request);
  auto recipe = PlanRecipe(request);
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  for (const auto& [name, value] : s.expect_settings) {
    EXPECT_EQ(recipe->facts.at(name).ToString(), value.ToString()) << name;
  }
  for (const std::string& id : s.expect_refused) EXPECT_TRUE(Has(recipe->refusals, id)) << "not refused by " << id;
  if (s.expect_refused.empty()) {
    for (const Finding& f : recipe->refusals) ADD_FAILURE() << "unexpected refusal [" << f.rule_id << "] " << f.message;
  }
  for (const std::string& id : s.expect_warned) EXPECT_TRUE(Has(recipe->warnings, id)) << "no warning from " << id;
}

INSTANTIATE_TEST_SUITE_P(Seeds, SeedRuleTest, ::testing::ValuesIn(Scenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ember::recipe
