#include "router/body_rewrite.h"

#include <gtest/gtest.h>

namespace ember::router {
namespace {

TEST(PrefillBodyTest, AsksForOneTokenAndTheKvHandle) {
  const Json original = Json::parse(R"({"model": "m", "prompt": "hi", "max_tokens": 50, "stream": true,
      "stream_options": {"include_usage": true}, "n": 3, "temperature": 0.5, "stop": ["x"]})");
  const Json body = PrefillBody(original, /*chat=*/false);
  EXPECT_EQ(body["max_tokens"], 1);
  EXPECT_EQ(body["stream"], false);
  EXPECT_EQ(body["n"], 1);
  EXPECT_FALSE(body.contains("stream_options"));
  EXPECT_FALSE(body.contains("max_completion_tokens"));  // completions have none
  EXPECT_EQ(body["kv_transfer_params"], Json::parse(R"({"do_remote_decode": true, "do_remote_prefill": false})"));
  // Everything else is the client's.
  EXPECT_EQ(body["prompt"], "hi");
  EXPECT_EQ(body["temperature"], 0.5);
  EXPECT_EQ(body["stop"], Json::parse(R"(["x"])"));
  EXPECT_EQ(body["model"], "m");
  // The original is untouched.
  EXPECT_EQ(original["max_tokens"], 50);
}

TEST(PrefillBodyTest, ChatAlsoCapsMaxCompletionTokensAndDropsContradictions) {
  const Json original =
      Json::parse(R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 9, "min_tokens": 4,
                      "best_of": 2, "n": 2, "kv_transfer_params": {"evil": 1}})");
  const Json body = PrefillBody(original, /*chat=*/true);
  EXPECT_EQ(body["max_tokens"], 1);
  EXPECT_EQ(body["max_completion_tokens"], 1);
  EXPECT_FALSE(body.contains("min_tokens"));
  EXPECT_FALSE(body.contains("best_of"));
  EXPECT_EQ(body["n"], 1);
  EXPECT_EQ(body["kv_transfer_params"], Json::parse(R"({"do_remote_decode": true, "do_remote_prefill": false})"));
  EXPECT_EQ(body["messages"], original["messages"]);
}

TEST(DecodeBodyTest, IsTheOriginalWithTheKvHandle) {
  const Json original = Json::parse(R"({"prompt": "hi", "max_tokens": 50, "stream": true, "n": 2})");
  const Json kv = Json::parse(R"({"remote_block_ids": [1, 2], "remote_engine_id": "e", "num_bytes": 4096})");
  Json body = DecodeBody(original, kv);
  EXPECT_EQ(body["kv_transfer_params"], kv);
  body.erase("kv_transfer_params");
  EXPECT_EQ(body, original);
  EXPECT_EQ(body.dump(), original.dump());  // the client's field order too
}

TEST(FallbackBodyTest, DropsAClientsKvTransferParams) {
  const Json original = Json::parse(R"({"prompt": "hi", "kv_transfer_params": {"do_remote_prefill": true}})");
  EXPECT_EQ(FallbackBody(original), Json::parse(R"({"prompt": "hi"})"));
}

TEST(KvTransferParamsTest, ReadsTheObjectAndItsBytes) {
  EXPECT_EQ(KvTransferParams(Json::parse(R"({"choices": [], "kv_transfer_params": {"num_bytes": 123}})")),
            Json::parse(R"({"num_bytes": 123})"));
  EXPECT_TRUE(KvTransferParams(Json::parse(R"({"choices": []})")).is_null());
  EXPECT_TRUE(KvTransferParams(Json::parse(R"({"kv_transfer_params": null})")).is_null());
  EXPECT_TRUE(KvTransferParams(Json::parse(R"({"kv_transfer_params": "x"})")).is_null());
  EXPECT_TRUE(KvTransferParams(Json::parse("[1]")).is_null());
  EXPECT_EQ(KvTransferBytes(Json::parse(R"({"num_bytes": 123})")), 123u);
  EXPECT_EQ(KvTransferBytes(Json::parse(R"({"num_bytes": -5})")), 0u);
  EXPECT_EQ(KvTransferBytes(Json::parse(R"({"num_bytes": "7"})")), 0u);
  EXPECT_EQ(KvTransferBytes(Json::parse(R"({})")), 0u);
}

}  // namespace
}  // namespace ember::router
