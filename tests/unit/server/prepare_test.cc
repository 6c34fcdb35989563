#include "server/routes/prepare.h"

#include <gtest/gtest.h>

namespace ember::server {
namespace {

ApiError Refused(const std::variant<int64_t, ApiError>& cost) {
  EXPECT_TRUE(std::holds_alternative<ApiError>(cost));
  return std::holds_alternative<ApiError>(cost) ? std::get<ApiError>(cost) : ApiError{};
}

TEST(AdmissionCostTest, PromptsTimesN) {
  ServerConfig config;
  config.max_waiting_requests = 64;
  config.max_prompts_per_request = 16;
  config.max_n = 8;
  EXPECT_EQ(std::get<int64_t>(AdmissionCost(config, 1, 1)), 1);
  EXPECT_EQ(std::get<int64_t>(AdmissionCost(config, 16, 4)), 64);  // exactly the whole queue
  EXPECT_EQ(std::get<int64_t>(AdmissionCost(config, 3, 8)), 24);
}

TEST(AdmissionCostTest, OverACapIsA400NamingTheField) {
  ServerConfig config;
  config.max_waiting_requests = 64;
  config.max_prompts_per_request = 16;
  config.max_n = 8;
  const ApiError too_many = Refused(AdmissionCost(config, 17, 1));
  EXPECT_EQ(too_many.http_status, 400);
  EXPECT_EQ(too_many.param, "prompt");
  EXPECT_NE(too_many.message.find("--max-prompts-per-request"), std::string::npos) << too_many.message;
  EXPECT_EQ(Refused(AdmissionCost(config, 1, 0)).param, "n");
  EXPECT_EQ(Refused(AdmissionCost(config, 1, 9)).param, "n");
  // Within each cap but more than the queue ever holds: waiting would not help, so 400, not 503.
  const ApiError whole_queue = Refused(AdmissionCost(config, 16, 5));
  EXPECT_EQ(whole_queue.http_status, 400);
  EXPECT_EQ(whole_queue.param, "prompt");
  EXPECT_NE(whole_queue.message.find("80 engine requests"), std::string::npos) << whole_queue.message;
  config.max_waiting_requests = 4;
  EXPECT_EQ(Refused(AdmissionCost(config, 1, 5)).param, "n");
}

// Without max_tokens a request gets a bounded default (chat: --default-max-tokens, completions:
// 16), cut to what the context has left; a max_tokens the client asked for is never cut.
TEST(MakeChoicesTest, DefaultMaxTokensAreBoundedAndFitTheContext) {
  ServingContext context;
  context.config.max_model_len = 100;
  context.config.default_max_tokens = 30;
  context.model.vocab_size = 50;
  CommonRequest request;
  request.sampling.max_tokens = context.config.default_max_tokens;  // what the chat route passes
  const std::vector<int32_t> short_prompt(10, 1), long_prompt(90, 1);
  auto max_tokens = [&](const std::vector<int32_t>& prompt) {
    auto choices = MakeChoices(context, request, {prompt});
    if (auto* e = std::get_if<ApiError>(&choices)) ADD_FAILURE() << e->message;
    return std::get<std::vector<ChoiceSpec>>(choices).at(0).sampling.max_tokens;
  };
  EXPECT_EQ(max_tokens(short_prompt), 30);
  EXPECT_EQ(max_tokens(long_prompt), 10);
  request.max_tokens_given = true;
  request.sampling.max_tokens = 60;
  EXPECT_EQ(max_tokens(short_prompt), 60);
  EXPECT_EQ(std::get<ApiError>(MakeChoices(context, request, {long_prompt})).param, "max_tokens");
}

}  // namespace
}  // namespace ember::server
