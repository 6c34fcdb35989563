// Admission checks shared by the generation routes: the model name, overload, prompt lengths
// against the context, the default max_tokens, and the fan-out of n choices per prompt.
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "server/generation.h"
#include "server/protocol/requests.h"
#include "server/serving_context.h"

namespace ember::server {

// 404 for another model's name, 503 while the engine is down or the queue is full.
std::variant<Admission::Slot, ApiError> Admit(ServingContext& context, const std::string& model);

// One ChoiceSpec per (prompt, choice); errors name the offending field.
std::variant<std::vector<ChoiceSpec>, ApiError> MakeChoices(const ServingContext& context, const CommonRequest& request,
                                                            const std::vector<std::vector<int32_t>>& prompts);

}  // namespace ember::server
