// /metrics for expert load: exact series from a client's counts, the per-rank series of a
// placement, nothing for a dense model, and nothing when switched off.
#include "server/expert_load_metrics.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace ember::server {
namespace {

// An EngineClient whose only job is to hand out expert load.
class CountingClient final : public EngineClient {
 public:
  exec::ExpertLoad load;
  mutable int reads = 0;
  RequestIndex Submit(RequestInput) override { return 0; }
  void Abort(RequestIndex) override {}
  std::vector<RequestOutput> Step() override { return {}; }
  void WaitForWork(std::chrono::milliseconds) override {}
  bool HasUnfinished() override { return false; }
  SchedulerStats Stats() const override { return {}; }
  void SetStepObserver(StepObserver*) override {}
  void ReadExpertLoad(exec::ExpertLoad* out) const override {
    ++reads;
    out->CopyFrom(load);
  }
};

exec::ExpertLoad TwoLayers() {
  exec::ExpertLoad load;
  load.num_experts = 4;
  load.top_k = 2;
  load.layers = {1, 3};
  load.tokens = {6, 0, 1, 1,   // layer 1: max 6 over mean 2
                 2, 2, 2, 2};  // layer 3: even
  return load;
}

TEST(ExpertLoadMetricsTest, RendersEveryExpertAndTheImbalanceOfEachLayer) {
  ServerMetrics m("tiny");
  CountingClient client;
  client.load = TwoLayers();
  m.expert_load->Refresh(client);
  const std::string text = m.Render();
  const std::string expected =
      "# HELP ember:expert_tokens_total Tokens the router sent to each expert of each MoE layer (top_k per token).\n"
      "# TYPE ember:expert_tokens_total counter\n"
      "ember:expert_tokens_total{model_name=\"tiny\",layer=\"1\",expert=\"0\"} 6\n"
      "ember:expert_tokens_total{model_name=\"tiny\",layer=\"1\",expert=\"1\"} 0\n"
      "ember:expert_tokens_total{model_name=\"tiny\",layer=\"1\",expert=\"2\"} 1\n"
      "ember:expert_tokens_total{model_name=\"tiny\",layer=\"1\",expert=\"3\"} 1\n"
      "ember:expert_tokens_total{model_name=\"tiny\",layer=\"3\",expert=\"0\"} 2\n"
      "ember:expert_tokens_total{model_name=\"tiny\",layer=\"3\",expert=\"1\"} 2\n"
      "ember:expert_tokens_total{model_name=\"tiny\",layer=\"3\",expert=\"2\"} 2\n"
      "ember:expert_tokens_total{model_name=\"tiny\",layer=\"3\",expert=\"3\"} 2\n"
      "# HELP ember:expert_load_imbalance Per MoE layer, the most-loaded expert's tokens over the mean expert's since "
      "start (1 = even, 0 = none yet).\n"
      "# TYPE ember:expert_load_imbalance gauge\n"
      "ember:expert_load_imbalance{model_name=\"tiny\",layer=\"1\"} 3\n"
      "ember:expert_load_imbalance{model_name=\"tiny\",layer=\"3\"} 1\n";
  EXPECT_NE(text.find(expected), std::string::npos) << text;
  EXPECT_EQ(text.find("expert_parallel"), std::string::npos);  // no placement: no per-rank series
}

TEST(ExpertLoadMetricsTest, PlacementAddsTokensPerRank) {
  ServerMetrics m("tiny");
  CountingClient client;
  client.load = TwoLayers();
  std::vector<std::vector<int32_t>> layers(2);
  layers[1] = {0, 1, 1, 0};  // layer 1: the hot expert 0 beside a cold one
  auto placement = exec::ExpertPlacement::Create(4, 2, {0, 0, 1, 1}, layers);
  ASSERT_TRUE(placement.ok());
  m.expert_load->set_placement(std::make_shared<const exec::ExpertPlacement>(*placement));
  m.expert_load->Refresh(client);
  const std::string text = m.Render();
  for (const char* line : {"ember:expert_parallel_rank_tokens_total{model_name=\"tiny\",layer=\"1\",rank=\"0\"} 7\n",
                           "ember:expert_parallel_rank_tokens_total{model_name=\"tiny\",layer=\"1\",rank=\"1\"} 1\n",
                           "ember:expert_parallel_rank_tokens_total{model_name=\"tiny\",layer=\"3\",rank=\"0\"} 4\n",
                           "ember:expert_parallel_rank_tokens_total{model_name=\"tiny\",layer=\"3\",rank=\"1\"} 4\n",
                           "ember:expert_parallel_imbalance{model_name=\"tiny\",layer=\"1\"} 1.75\n",
                           "ember:expert_parallel_imbalance{model_name=\"tiny\",layer=\"3\"} 1\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
}

TEST(ExpertLoadMetricsTest, NothingForDenseModelsOrWhenOff) {
  ServerMetrics m("dense");
  CountingClient client;  // an empty load: a dense model
  m.expert_load->Refresh(client);
  EXPECT_EQ(m.Render().find("expert"), std::string::npos);
  client.load = TwoLayers();
  m.expert_load->set_enabled(false);
  m.expert_load->Refresh(client);
  EXPECT_EQ(client.reads, 1);  // off: the engine thread copies nothing
  EXPECT_EQ(m.Render().find("expert"), std::string::npos);
}

}  // namespace
}  // namespace ember::server
