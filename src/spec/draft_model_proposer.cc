#include "spec/draft_model_proposer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/host_memory.h"
#include "core/logging.h"
#include "spec/speculative_config.h"

namespace ember::spec {

namespace {

// Blocks one request of `max_model_len` tokens takes: every group keeps all of its blocks
// (DraftKvBlocks does not release a sliding window's old ones).
int64_t BlocksPerRequest(const kv::KvCacheConfig& config, int64_t max_model_len) {
  return (max_model_len + config.block_size - 1) / config.block_size * static_cast<int64_t>(config.groups.size());
}

Expected<kv::KvCacheConfig> PlanDraftKv(const CausalLM& drafter, const DraftModelProposerOptions& o,
                                        int64_t max_model_len) {
  const kv::KvDtype dtype = o.kv_dtype.value_or(drafter.DefaultKvDtype());
  EMBER_ASSIGN_OR_RETURN(kv::KvCacheConfig config, kv::PlanKvGroups(drafter.KvLayerSpecs(), o.block_size, dtype));
  int64_t budget = o.kv_cache_memory_bytes;
  if (budget == 0) {
    const int64_t one_request = BlocksPerRequest(config, max_model_len) * config.BytesPerBlock();
    budget = std::min(one_request * o.max_num_seqs, std::max(kDefaultDraftKvBudget, one_request)) +
             config.BytesPerBlock();  // the null block
    const int64_t available = AvailableMemoryBytes();
    if (available > 0) budget = std::min(budget, available / 2);
  }
  EMBER_ASSIGN_OR_RETURN(config.num_blocks, kv::NumBlocksForBudget(config, budget));
  return config;
}

Status CheckOptions(const DraftModelProposerOptions& o, const ModelInfo& drafter) {
  auto bad = [](std::string_view field, int64_t value, std::string_view allowed) {
    return InvalidArgument(fmt::format("draft_model: {} is {}: it must be {}", field, value, allowed));
  };
  if (o.num_speculative_tokens < 1 || o.num_speculative_tokens > kMaxSpeculativeTokens) {
    return bad("num_speculative_tokens", o.num_speculative_tokens, fmt::format("in [1, {}]", kMaxSpeculativeTokens));
  }
  if (o.max_num_seqs < 1) return bad("max_num_seqs", o.max_num_seqs, "at least 1");
  if (o.max_num_batched_tokens < 1) return bad("max_num_batched_tokens", o.max_num_batched_tokens, "at least 1");
  if (o.block_size < 1) return bad("block_size", o.block_size, "at least 1");
  if (o.kv_cache_memory_bytes < 0) return bad("kv_cache_memory_bytes", o.kv_cache_memory_bytes, "0 (auto) or more");
  if (o.max_model_len < 0 || o.max_model_len > drafter.max_position_embeddings) {
    return bad("max_model_len", o.max_model_len,
               fmt::format("0 (the drafter's) or at most the drafter's context length {}; use a drafter with a "
                           "longer context or lower --max-model-len",
                           drafter.max_position_embeddings));
  }
  return Status::Ok();
}

}  // namespace

int32_t GreedyToken(std::span<const float> logits) {
  int32_t best = 0;
  float best_value = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    // Strictly greater: a tie keeps the lower id.
    if (logits[i] > best_value) {
      best_value = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

float SoftmaxProbability(std::span<const float> logits, int32_t token) {
  EMBER_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size());
  float max_value = -std::numeric_limits<float>::infinity();
  for (float v : logits) max_value = std::max(max_value, v);
  if (!std::isfinite(max_value)) return 0.0f;
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max_value);
  return static_cast<float>(std::exp(static_cast<double>(logits[token]) - max_value) / sum);
}

Expected<std::unique_ptr<DraftModelProposer>> CreateDraftModelProposer(std::unique_ptr<CausalLM> drafter,
                                                                       const ModelInfo& target,
                                                                       const DraftModelProposerOptions& options) {
  if (drafter == nullptr) return InvalidArgument("draft_model: no drafter model was given");
  const ModelInfo& info = drafter->info();
  if (info.vocab_size != target.vocab_size) {
    return InvalidArgument(fmt::format(
        "draft_model: the drafter ({}) has vocab_size {} but the target ({}) has vocab_size {}; a drafter must use the "
        "target's tokenizer and vocabulary: pick a smaller model of the target's family",
        info.architecture, info.vocab_size, target.architecture, target.vocab_size));
  }
  EMBER_RETURN_IF_ERROR(CheckOptions(options, info));
  DraftModelProposerOptions o = options;
  if (o.max_model_len == 0) o.max_model_len = info.max_position_embeddings;
  EMBER_ASSIGN_OR_RETURN(kv::KvCacheConfig config, PlanDraftKv(*drafter, o, o.max_model_len));
  EMBER_ASSIGN_OR_RETURN(KvStore store, KvStore::Create(config));
  // The largest step: a catch-up forward of max_num_batched_tokens, or one draft token for each
  // of max_num_seqs requests; at most one logits row per request either way.
  StepLimits limits;
  limits.max_tokens = std::max(o.max_num_batched_tokens, o.max_num_seqs);
  limits.max_logit_rows = o.max_num_seqs;
  EMBER_RETURN_IF_ERROR(drafter->ReserveWorkspace(limits));
  EMBER_LOG_INFO("draft_model: {} drafting up to {} tokens; KV cache: {}", info.architecture,
                 o.num_speculative_tokens, kv::DescribeKvConfig(config));
  return std::unique_ptr<DraftModelProposer>(new DraftModelProposer(std::move(drafter), std::move(store), o));
}

DraftModelProposer::DraftModelProposer(std::unique_ptr<CausalLM> drafter, KvStore kv,
                                       const DraftModelProposerOptions& options)
    : drafter_(std::move(drafter)),
      kv_(std::move(kv)),
      blocks_(kv_.config().num_blocks, static_cast<int64_t>(kv_.config().groups.size()), kv_.config().block_size),
      options_(options) {}

void DraftModelProposer::Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) {
  EMBER_CHECK(inputs.size() == drafts.size());
  const size_t per_batch = static_cast<size_t>(options_.max_num_seqs);
  catch_up_excess_seconds_ = 0.0;
  for (size_t first = 0; first < inputs.size(); first += per_batch) {
    const size_t count = std::min(per_batch, inputs.size() - first);
    ProposeBatch(inputs.subspan(first, count), drafts.subspan(first, count));
  }
}

void DraftModelProposer::OnReleased(RequestId req, std::span<const int32_t> tokens, int64_t num_prompt_tokens,
                                    bool completed) {
  Drop(req);
}

void DraftModelProposer::Drop(RequestId req) {
  auto it = states_.find(req);
  if (it == states_.end()) return;
  blocks_.Free(it->second.blocks);
  states_.erase(it);
}

bool DraftModelProposer::Prepare(const ProposalInput& input, int32_t num_to_draft, RequestState& state) {
  const int64_t n = static_cast<int64_t>(input.tokens.size());
  const auto [computed_end, tokens_end] = std::mismatch(state.computed.begin(), state.computed.end(),
                                                        input.tokens.begin(), input.tokens.end());
  // The last token is always recomputed: its logits give the first draft token.
  const int64_t keep = std::min<int64_t>(computed_end - state.computed.begin(), n - 1);
  state.computed.resize(keep);
  // Room for the whole call up front (the last draft token is never computed), so the draft
  // loop cannot run out of blocks halfway.
  return blocks_.Grow(state.blocks, n + num_to_draft - 1);
}

void DraftModelProposer::ProposeBatch(std::span<const ProposalInput> inputs, std::span<Draft> drafts) {
  actives_.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ProposalInput& in = inputs[i];
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    // Positions up to n + k - 2 are computed, so n + k - 1 must fit in max_model_len.
    const int64_t k = std::min<int64_t>({in.max_tokens, options_.num_speculative_tokens, options_.max_model_len - n + 1});
    if (n < 1 || k < 1) continue;
    // The same request twice in one call would share one cache; draft it once.
    const bool repeated = std::any_of(actives_.begin(), actives_.end(),
                                      [&](const Active& a) { return inputs[a.input].req == in.req; });
    if (repeated) continue;
    auto [it, inserted] = states_.try_emplace(in.req);
    if (!Prepare(in, static_cast<int32_t>(k), it->second)) {
      if (inserted) states_.erase(it);  // a new request that found the pool empty holds nothing
      continue;
    }
    drafts[i].tokens.reserve(k);
    drafts[i].confidences.reserve(k);
    actives_.push_back({i, in.req, &it->second, in.tokens, static_cast<int32_t>(k)});
  }

  auto fail = [&](const Status& status) {
    EMBER_LOG_WARN("draft_model: the drafter's forward failed, no drafts this step: {}", status.ToString());
    for (const Active& a : actives_) {
      drafts[a.input].Clear();
      Drop(a.req);  // its K/V may be half written
    }
    actives_.clear();
  };

  // Catch-up: every request's tokens the drafter has not computed, in as few forwards as the
  // step limit allows; a request's last token yields its first draft.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point catch_up_start = Clock::now();
  while (true) {
    scheduled_.clear();
    int64_t budget = options_.max_num_batched_tokens;
    for (Active& a : actives_) {
      const int64_t done = static_cast<int64_t>(a.state->computed.size());
      const int64_t pending = static_cast<int64_t>(a.tokens.size()) - done;
      if (pending <= 0 || budget == 0) continue;
      const int64_t take = std::min(pending, budget);
      budget -= take;
      scheduled_.push_back({&a, a.tokens.subspan(done, take), take == pending});
    }
    if (scheduled_.empty()) break;
    if (Status s = RunForward(scheduled_); !s.ok()) return fail(s);
    for (const Scheduled& s : scheduled_) {
      if (s.wants_logits) AppendDraftToken(*s.active, drafts[s.active->input]);
    }
  }

  const Clock::time_point drafting_start = Clock::now();
  int32_t drafting_forwards = 0;
  // Drafting: each forward feeds every request still drafting its newest draft token.
  for (int32_t step = 1;; ++step, ++drafting_forwards) {
    scheduled_.clear();
    for (Active& a : actives_) {
      if (a.num_to_draft <= step) continue;
      const std::vector<int32_t>& tokens = drafts[a.input].tokens;
      scheduled_.push_back({&a, std::span<const int32_t>(&tokens[step - 1], 1), true});
    }
    if (scheduled_.empty()) break;
    if (Status s = RunForward(scheduled_); !s.ok()) return fail(s);
    for (const Scheduled& s : scheduled_) AppendDraftToken(*s.active, drafts[s.active->input]);
  }
  // A drafter that is up to date catches up 1 + accepted tokens per request, in one forward that
  // costs about what a drafting forward does; the rest of the catch-up is a one-off (a prompt, the
  // steps it did not draft in) that planning must not read as the price of every step.
  const Clock::time_point end = Clock::now();
  const double catch_up = std::chrono::duration<double>(drafting_start - catch_up_start).count();
  if (drafting_forwards > 0) {
    const double per_forward = std::chrono::duration<double>(end - drafting_start).count() / drafting_forwards;
    draft_forward_seconds_ = draft_forward_seconds_ == 0.0 ? per_forward : 0.8 * draft_forward_seconds_ + 0.2 * per_forward;
  }
  if (draft_forward_seconds_ > 0.0) catch_up_excess_seconds_ += std::max(0.0, catch_up - draft_forward_seconds_);
}

Status DraftModelProposer::RunForward(std::span<Scheduled> scheduled) {
  const int64_t block_size = kv_.config().block_size;
  const size_t num_groups = kv_.config().groups.size();
  ForwardBatch& b = batch_;
  b.token_ids.clear();
  b.positions.clear();
  b.query_start_loc.assign(1, 0);
  b.seq_lens.clear();
  b.logits_indices.clear();
  b.groups.resize(num_groups);
  int32_t widest = 0;
  for (const Scheduled& s : scheduled) widest = std::max<int32_t>(widest, s.active->state->blocks.front().size());
  for (KvGroupTable& table : b.groups) {
    table.max_blocks_per_req = widest;
    table.block_table.assign(scheduled.size() * widest, kv::kNullBlock);
    table.slot_mapping.clear();
  }
  for (size_t r = 0; r < scheduled.size(); ++r) {
    Scheduled& s = scheduled[r];
    const RequestState& state = *s.active->state;
    const int64_t first = static_cast<int64_t>(state.computed.size());
    const int64_t count = static_cast<int64_t>(s.tokens.size());
    for (int64_t i = 0; i < count; ++i) {
      b.token_ids.push_back(s.tokens[i]);
      b.positions.push_back(static_cast<int32_t>(first + i));
    }
    b.query_start_loc.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.seq_lens.push_back(static_cast<int32_t>(first + count));
    for (size_t g = 0; g < num_groups; ++g) {
      KvGroupTable& table = b.groups[g];
      const std::vector<kv::BlockId>& blocks = state.blocks[g];
      EMBER_CHECK(static_cast<int64_t>(blocks.size()) * block_size >= first + count);
      std::copy(blocks.begin(), blocks.end(), table.block_table.begin() + r * widest);
      for (int64_t p = first; p < first + count; ++p) {
        table.slot_mapping.push_back(int64_t{blocks[p / block_size]} * block_size + p % block_size);
      }
    }
    s.active->logits_row = -1;
    if (s.wants_logits) {
      s.active->logits_row = static_cast<int32_t>(b.logits_indices.size());
      b.logits_indices.push_back(static_cast<int32_t>(b.token_ids.size() - 1));
    }
  }
  EMBER_RETURN_IF_ERROR(drafter_->Forward(b, kv_, &output_));
  for (Scheduled& s : scheduled) {
    std::vector<int32_t>& computed = s.active->state->computed;
    computed.insert(computed.end(), s.tokens.begin(), s.tokens.end());
  }
  return Status::Ok();
}

void DraftModelProposer::AppendDraftToken(Active& active, Draft& draft) const {
  EMBER_CHECK(active.logits_row >= 0);
  const int64_t vocab = drafter_->info().vocab_size;
  const std::span<const float> logits(output_.logits.data() + active.logits_row * vocab, vocab);
  const int32_t token = GreedyToken(logits);
  draft.tokens.push_back(token);
  draft.confidences.push_back(SoftmaxProbability(logits, token));
}

}  // namespace ember::spec
