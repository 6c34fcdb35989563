// The request fields that ask for structured output: OpenAI's response_format (json_object,
// json_schema), vLLM's structured_outputs {json, regex, choice, grammar, json_object} and its older
// guided_json / guided_regex / guided_choice / guided_grammar. At most one may be given; each
// becomes a ConstraintSpec that the route compiles (an invalid schema is a 400 then). They are rows
// of the generation requests' field table (request_fields.h), read in this order.
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

#include "server/protocol/request_fields.h"
#include "server/protocol/requests.h"

namespace ember::server {

const std::vector<Field<CommonRequest>>& StructuredOutputFields();

}  // namespace ember::server
