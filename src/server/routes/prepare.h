// Admission checks shared by the generation routes: the model name, the per-request caps and the
// queue (prompts x n), prompt lengths against the context, the default max_tokens, and the
// fan-out of n choices per prompt.
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "server/generation.h"
#include "server/protocol/requests.h"
#include "server/serving_context.h"

namespace ember::server {

// What an API request adds to the engine, prompts x n, or a 400 when it is more than one request
// may ask for (n out of [1, --max-n], more than --max-prompts-per-request prompts, or more engine
// requests than --max-waiting-requests, which no wait would make room for).
std::variant<int64_t, ApiError> AdmissionCost(const ServerConfig& config, size_t num_prompts, int32_t n);

// 404 for another model's name, 400 for a request over a cap (AdmissionCost), 503 while the engine
// is down or when the request's cost does not fit in the queue now.
std::variant<Admission::Slot, ApiError> Admit(ServingContext& context, const std::string& model, size_t num_prompts,
                                              int32_t n);

// One ChoiceSpec per (prompt, choice); errors name the offending field.
std::variant<std::vector<ChoiceSpec>, ApiError> MakeChoices(const ServingContext& context, const CommonRequest& request,
                                                            const std::vector<std::vector<int32_t>>& prompts);

}  // namespace ember::server
