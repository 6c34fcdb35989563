// A TokenConstraint that allows everything, for tests where only a constraint's presence matters.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "engine/token_constraint.h"

namespace ember::test {

class AnyToken final : public TokenConstraint {
 public:
  std::unique_ptr<TokenMatcher> NewMatcher(std::span<const int32_t>) const override { return nullptr; }
  const std::string& kind() const override { return kind_; }
  int64_t vocab_size() const override { return 16; }

 private:
  std::string kind_ = "any";
};

}  // namespace ember::test
