// The request fields that ask for structured output: OpenAI's response_format (json_object,
// json_schema), vLLM's structured_outputs {json, regex, choice, grammar, json_object} and its older
// guided_json / guided_regex / guided_choice / guided_grammar. At most one may be given; each
// becomes a ConstraintSpec that the route compiles (an invalid schema is a 400 then).
#pragma once

#include <nlohmann/json.hpp>

#include "server/protocol/field_reader.h"
#include "server/protocol/requests.h"

namespace ember::server {

void ParseStructuredOutputs(const nlohmann::ordered_json& body, FieldReader& r, CommonRequest* c);

}  // namespace ember::server
