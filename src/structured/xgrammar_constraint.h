// TokenConstraint and TokenMatcher over an xgrammar CompiledGrammar (internal to src/structured).
#pragma once

#include <memory>
#include <string>

#include <xgrammar/xgrammar.h>

#include "engine/token_constraint.h"

namespace ember::structured {

std::shared_ptr<const TokenConstraint> MakeXgrammarConstraint(xgrammar::CompiledGrammar compiled, std::string kind,
                                                              int64_t vocab_size);

}  // namespace ember::structured
