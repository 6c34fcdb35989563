#include "structured/xgrammar_constraint.h"

#include <dlpack/dlpack.h>

#include <optional>
#include <vector>

#include "core/check.h"

namespace ember::structured {
namespace {

class XgrammarMatcher final : public TokenMatcher {
 public:
  XgrammarMatcher(const xgrammar::CompiledGrammar& compiled, std::vector<int> stops, int64_t vocab_size)
      : matcher_(compiled, stops.empty() ? std::nullopt : std::optional<std::vector<int>>(std::move(stops))),
        vocab_size_(vocab_size) {}

  void FillNextTokenBitmask(std::span<uint32_t> bitmask) override {
    const int64_t words = xgrammar::GetBitmaskSize(static_cast<int>(vocab_size_));
    EMBER_CHECK(static_cast<int64_t>(bitmask.size()) == words, "bitmask of {} words for {} tokens", bitmask.size(),
                vocab_size_);
    int64_t shape[1] = {words};
    DLTensor t{};
    t.data = bitmask.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = xgrammar::GetBitmaskDLType();
    t.shape = shape;
    t.strides = nullptr;
    t.byte_offset = 0;
    matcher_.FillNextTokenBitmask(&t);
  }
  bool AcceptToken(int32_t token) override { return matcher_.AcceptToken(token); }
  bool IsTerminated() const override { return matcher_.IsTerminated(); }

 private:
  xgrammar::GrammarMatcher matcher_;
  int64_t vocab_size_;
};

class XgrammarConstraint final : public TokenConstraint {
 public:
  XgrammarConstraint(xgrammar::CompiledGrammar compiled, std::string kind, int64_t vocab_size)
      : compiled_(std::move(compiled)), kind_(std::move(kind)), vocab_size_(vocab_size) {}

  std::unique_ptr<TokenMatcher> NewMatcher(std::span<const int32_t> stop_token_ids) const override {
    std::vector<int> stops(stop_token_ids.begin(), stop_token_ids.end());
    return std::make_unique<XgrammarMatcher>(compiled_, std::move(stops), vocab_size_);
  }
  const std::string& kind() const override { return kind_; }
  int64_t vocab_size() const override { return vocab_size_; }

 private:
  xgrammar::CompiledGrammar compiled_;
  std::string kind_;
  int64_t vocab_size_;
};

}  // namespace

std::shared_ptr<const TokenConstraint> MakeXgrammarConstraint(xgrammar::CompiledGrammar compiled, std::string kind,
                                                              int64_t vocab_size) {
  return std::make_shared<XgrammarConstraint>(std::move(compiled), std::move(kind), vocab_size);
}

}  // namespace ember::structured
