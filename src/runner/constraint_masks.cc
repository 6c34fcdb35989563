#include "runner/constraint_masks.h"

#include <limits>
#include <utility>

#include "core/check.h"
#include "core/logging.h"

namespace ember {

void ApplyTokenBitmask(std::span<const uint32_t> bitmask, std::span<float> logits) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t vocab = logits.size();
  for (size_t w = 0; w < bitmask.size() && w * 32 < vocab; ++w) {
    const uint32_t word = bitmask[w];
    if (word == 0xffffffffu) continue;  // the common case inside free text: nothing to mask
    const size_t end = std::min(vocab, w * 32 + 32);
    for (size_t t = w * 32; t < end; ++t) {
      if (((word >> (t - w * 32)) & 1u) == 0) logits[t] = kMasked;
    }
  }
}

ConstraintMasks::ConstraintMasks(int64_t vocab_size, std::vector<int32_t> eos_token_ids)
    : vocab_size_(vocab_size), eos_token_ids_(std::move(eos_token_ids)) {}

ConstraintMasks::~ConstraintMasks() {
  if (!helper_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  helper_.join();
}

void ConstraintMasks::HelperLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return busy_ || stopping_; });
    if (stopping_) return;
    // pending_ is not touched by the engine thread while busy_ is set.
    lock.unlock();
    std::exception_ptr failure;
    try {
      for (State* s : pending_) s->matcher->FillNextTokenBitmask(s->bitmask);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    failure_ = failure;
    busy_ = false;
    wake_.notify_all();
  }
}

void ConstraintMasks::Wait() {
  if (!helper_.joinable()) return;
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait(lock, [&] { return !busy_; });
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));  // a grammar engine bug, not the user's
}

ConstraintMasks::State* ConstraintMasks::Find(const RunnerRequest& r) {
  if (r.sampling.constraint == nullptr) return nullptr;
  auto it = matchers_.find(r.req);
  if (it != matchers_.end()) return &it->second;
  const TokenConstraint& c = *r.sampling.constraint;
  EMBER_CHECK(c.vocab_size() == vocab_size_, "a {} constraint compiled for {} tokens, the model has {}", c.kind(),
              c.vocab_size(), vocab_size_);
  // The grammar lets through, once complete, exactly the tokens that end this request (its EOS
  // and stop_token_ids), so that a whole output stops there. With none (ignore_eos and no stop
  // ids), the model's EOS ids.
  std::vector<int32_t> stops;
  if (r.eos_token_id >= 0 && !r.sampling.ignore_eos) stops.push_back(r.eos_token_id);
  stops.insert(stops.end(), r.sampling.stop_token_ids.begin(), r.sampling.stop_token_ids.end());
  if (stops.empty()) stops = eos_token_ids_;
  State s;
  s.matcher = c.NewMatcher(stops);
  s.bitmask.assign(static_cast<size_t>((vocab_size_ + 31) / 32), 0);
  // A request resumed after preemption already has output: replay it.
  for (int32_t t : r.output_token_ids()) {
    if (!s.matcher->AcceptToken(t)) {
      s.broken = true;
      break;
    }
  }
  return &matchers_.emplace(r.req, std::move(s)).first->second;
}

void ConstraintMasks::Start(std::span<RunnerRequest* const> requests) {
  Wait();
  pending_.clear();
  for (RunnerRequest* r : requests) {
    State* s = r == nullptr ? nullptr : Find(*r);
    if (s == nullptr) continue;
    s->masked_this_step = !s->broken && !s->matcher->IsTerminated();
    if (s->masked_this_step) pending_.push_back(s);
  }
  if (pending_.empty()) return;
  if (!helper_.joinable()) helper_ = std::thread([this] { HelperLoop(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = true;
  }
  wake_.notify_all();
}

void ConstraintMasks::Apply(std::span<RunnerRequest* const> requests, std::span<const int64_t> row_of_request,
                            std::span<float> logits) {
  Wait();
  if (pending_.empty()) return;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i] == nullptr || row_of_request[i] < 0) continue;
    auto it = matchers_.find(requests[i]->req);
    if (it == matchers_.end() || !it->second.masked_this_step) continue;
    ApplyTokenBitmask(it->second.bitmask,
                      logits.subspan(static_cast<size_t>(row_of_request[i] * vocab_size_), static_cast<size_t>(vocab_size_)));
  }
  pending_.clear();
}

void ConstraintMasks::Accept(const RunnerRequest& r, std::span<const int32_t> tokens) {
  auto it = matchers_.find(r.req);
  if (it == matchers_.end()) return;
  State& s = it->second;
  s.masked_this_step = false;
  for (int32_t t : tokens) {
    if (s.broken || s.matcher->IsTerminated()) return;
    if (!s.matcher->AcceptToken(t)) {
      // Only when the mask left nothing to sample (min_tokens masking the stop token the grammar
      // needs): the sampler then falls back to argmax. Say so rather than fail the step.
      EMBER_LOG_WARN("request {}: token {} is outside its {} grammar; the rest of its output is unconstrained",
                     r.req, t, r.sampling.constraint->kind());
      s.broken = true;
    }
  }
}

void ConstraintMasks::Drop(RequestIndex req) { matchers_.erase(req); }

}  // namespace ember
