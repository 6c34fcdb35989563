#include "spec/dspark/dspark_proposer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "core/logging.h"

namespace ember::spec::dspark {

Expected<std::unique_ptr<DSparkProposer>> DSparkProposer::Create(std::unique_ptr<DSparkDrafter> drafter,
                                                                 const DSparkTargetInfo& target,
                                                                 TargetFinalNorm final_norm,
                                                                 const DSparkProposerOptions& options) {
  if (drafter == nullptr) return InvalidArgument("dspark: no drafter was given");
  const DSparkConfig& c = drafter->config();
  EMBER_RETURN_IF_ERROR(CheckFitsTarget(c, target));
  if (options.num_speculative_tokens < 1 || options.num_speculative_tokens > c.block_size) {
    return InvalidArgument(fmt::format("dspark: num_speculative_tokens is {}: it must be in [1, {}], the drafter's "
                                       "block_size (a block of the anchor and block_size - 1 mask tokens drafts "
                                       "block_size tokens)",
                                       options.num_speculative_tokens, c.block_size));
  }
  if (options.max_num_seqs < 1 || options.max_context_rows < 1) {
    return InvalidArgument("dspark: max_num_seqs and max_context_rows must be at least 1");
  }
  if (!(options.confidence_threshold >= 0.0f && options.confidence_threshold <= 1.0f)) {
    return InvalidArgument(
        fmt::format("dspark: the confidence threshold is {}: it must be in [0, 1]", options.confidence_threshold));
  }
  const bool taps_last = std::find(c.target_layer_ids.begin(), c.target_layer_ids.end(), target.num_layers - 1) !=
                         c.target_layer_ids.end();
  if (taps_last) {
    // Checked now so a target that cannot norm its last tap fails at startup, not mid-serving.
    std::vector<float> row(target.hidden_size, 1.0f);
    const Status normed = final_norm ? final_norm(row.data(), 1, row.data()) : Unimplemented("no final norm given");
    if (!normed.ok()) {
      return InvalidArgument(fmt::format("dspark: the drafter taps the target's last layer ({}), which is the "
                                         "final-normed hidden state, but the target's final norm is unavailable: {}",
                                         target.num_layers - 1, normed.message()));
    }
  } else {
    final_norm = nullptr;
  }
  const int64_t window = c.context_window();
  const int64_t context_size = window > 0 ? window : 4096;  // a long context grows the workspace once, with a warning
  EMBER_RETURN_IF_ERROR(drafter->workspace().Reserve(
      drafter->WorkspaceBytes(options.max_context_rows, options.max_num_seqs, context_size)));
  EMBER_LOG_INFO("dspark: {} layers, block {}, taps [{}] of the target's {} layers, context window {}, Markov {} "
                 "(rank {}), confidence head {}; drafting up to {} tokens{}",
                 c.num_layers, c.block_size, fmt::join(c.target_layer_ids, ", "), target.num_layers,
                 window > 0 ? std::to_string(window) : std::string("full"),
                 c.markov_head_type == MarkovHeadType::kGated ? "gated" : c.markov_rank > 0 ? "vanilla" : "none",
                 c.markov_rank, c.enable_confidence_head ? "on" : "off", options.num_speculative_tokens,
                 options.confidence_threshold > 0 ? fmt::format(", confidence threshold {}", options.confidence_threshold)
                                                  : std::string());
  const int64_t waiting_rows = options.max_num_seqs * kWaitingRowsPerSeq;
  EMBER_LOG_INFO("dspark: the target's hidden states wait unprojected until their request drafts: up to {} rows "
                 "({:.1f} MiB) in all",
                 waiting_rows,
                 static_cast<double>(waiting_rows * drafter->feature_width() * static_cast<int64_t>(sizeof(float))) /
                     (1 << 20));
  return std::unique_ptr<DSparkProposer>(new DSparkProposer(std::move(drafter), target, std::move(final_norm), options));
}

DSparkProposer::DSparkProposer(std::unique_ptr<DSparkDrafter> drafter, const DSparkTargetInfo& target,
                               TargetFinalNorm final_norm, const DSparkProposerOptions& options)
    : drafter_(std::move(drafter)),
      target_(target),
      final_norm_(std::move(final_norm)),
      options_(options),
      markov_(*drafter_) {
  if (options_.context_cache_positions > 0) {
    const DSparkConfig& c = drafter_->config();
    const int64_t bytes_per_position = 2 * c.num_layers * c.kv_width() * static_cast<int64_t>(sizeof(float));
    cache_ = std::make_unique<DSparkContextCache>(c.num_layers, c.kv_width(), options_.context_cache_block_size,
                                                  options_.context_cache_positions * bytes_per_position);
    EMBER_LOG_INFO("dspark: prefix cache of the drafter's context: up to {} blocks of {} positions ({:.1f} MiB), as "
                   "many positions as the target's KV cache", cache_->capacity_blocks(), cache_->block_size(),
                   cache_->capacity_blocks() * cache_->bytes_per_block() / 1048576.0);
  }
}

const DSparkContext* DSparkProposer::context(RequestId req) {
  auto it = requests_.find(req);
  if (it == requests_.end()) return nullptr;
  ProjectOne(it->second);
  return &it->second.context;
}

void DSparkProposer::ObserveTargetHiddenStates(RequestId req, const TargetHiddenStates& states) {
  const DSparkConfig& c = drafter_->config();
  const size_t taps = c.target_layer_ids.size();
  EMBER_CHECK(states.layers.size() == taps && states.hidden_size == c.target_hidden_size,
              "dspark: hidden states of {} layers x {} for a drafter of {} taps x {}", states.layers.size(),
              states.hidden_size, taps, c.target_hidden_size);
  if (states.num_rows <= 0) return;
  auto it = requests_.find(req);
  if (it == requests_.end()) it = requests_.emplace(req, NewRequestState()).first;
  RequestState& state = it->second;
  DSparkContext& context = state.context;
  // Rows that do not continue the pending ones (a recompute, a gap): project those first, so the
  // context's own rules (truncate, restore, restart) apply as if nothing had waited.
  if (state.pending_rows > 0 && states.first_position != state.next_position()) ProjectOne(state);
  if (state.pending_rows == 0) {
    if (states.first_position < context.end()) context.TruncateTo(states.first_position);
    if (states.first_position > context.end()) RestoreFromCache(state, states);
  }
  if (cache_) {
    // Hashes chain over the whole prefix, so they extend from position 0 even for a context that
    // restarted after a gap (ExtendBlockHashes hashes only the blocks not hashed yet). The tokens
    // are valid during this call only, so the hashes are taken now, the blocks stored once the
    // rows are projected.
    const int64_t known = std::min<int64_t>(static_cast<int64_t>(states.tokens.size()),
                                            states.first_position + states.num_rows);
    kv::ExtendBlockHashes(states.tokens.first(known), cache_->block_size(), states.block_keys, state.hashes);
  }

  // The rows wait as features (the taps concatenated) until the request drafts or enough wait.
  const int64_t hidden = c.target_hidden_size;
  const int64_t width = drafter_->feature_width();
  const int64_t first_row = state.pending_rows;
  state.pending.resize((first_row + states.num_rows) * width);
  for (size_t t = 0; t < taps; ++t) {
    const bool last = c.target_layer_ids[t] == target_.num_layers - 1;
    for (int64_t i = 0; i < states.num_rows; ++i) {
      const std::span<const float> row = states.Row(t, i);
      float* out = state.pending.data() + (first_row + i) * width + static_cast<int64_t>(t) * hidden;
      if (last) {
        const Status normed = final_norm_(row.data(), 1, out);
        EMBER_CHECK(normed.ok(), "dspark: the target's final norm: {}", normed.message());
      } else {
        std::copy(row.begin(), row.end(), out);
      }
    }
  }
  state.pending_rows += states.num_rows;
  state.last_report_rows = states.num_rows;
  waiting_rows_ += states.num_rows;
}

void DSparkProposer::FinishObservations() {
  const int64_t budget = max_waiting_rows();
  if (waiting_rows_ < budget) return;
  // The requests with the most rows waiting first: the fewest projected for the memory freed.
  to_project_.clear();
  for (auto& [req, state] : requests_) {
    if (state.pending_rows > 0) to_project_.push_back(&state);
  }
  std::sort(to_project_.begin(), to_project_.end(), [](const RequestState* a, const RequestState* b) {
    return a->pending_rows > b->pending_rows;
  });
  size_t count = 0;
  for (int64_t left = waiting_rows_; count < to_project_.size() && left >= budget; ++count) {
    left -= to_project_[count]->pending_rows;
  }
  to_project_.resize(count);
  Project(to_project_);
}

DSparkProposer::RequestState DSparkProposer::NewRequestState() {
  RequestState state(drafter_->NewContext());
  if (!spare_pending_.empty()) {
    state.pending = std::move(spare_pending_.back());
    spare_pending_.pop_back();
  }
  // Room for what may wait, so steps append without reallocating (a longer report still grows it).
  state.pending.reserve(kWaitingRowsPerSeq * drafter_->feature_width());
  return state;
}

void DSparkProposer::Project(std::span<RequestState* const> states) {
  int64_t total = 0;
  for (const RequestState* s : states) total += s->pending_rows;
  if (total == 0) return;
  const DSparkConfig& c = drafter_->config();
  const int64_t width = drafter_->feature_width();
  const int64_t kvw = c.kv_width();
  // Gathered into one batch of rows: one matmul per weight for all of them (rows are
  // independent, so each is bitwise what it would be alone).
  features_.resize(total * width);
  positions_.resize(total);
  int64_t row = 0;
  for (const RequestState* s : states) {
    std::copy_n(s->pending.data(), s->pending_rows * width, features_.data() + row * width);
    for (int64_t i = 0; i < s->pending_rows; ++i) positions_[row + i] = s->context.end() + i;
    row += s->pending_rows;
  }
  size_t next = 0;        // the request being appended
  int64_t next_done = 0;  // its rows appended so far
  for (int64_t first = 0; first < total; first += options_.max_context_rows) {
    const int64_t rows = std::min(options_.max_context_rows, total - first);
    k_.resize(c.num_layers * rows * kvw);
    v_.resize(c.num_layers * rows * kvw);
    drafter_->ProjectContext(features_.data() + first * width, rows, positions_.data() + first, k_.data(), v_.data());
    for (int64_t r = 0; r < rows;) {
      while (states[next]->pending_rows == 0) ++next;
      RequestState& state = *states[next];
      const int64_t count = std::min(state.pending_rows - next_done, rows - r);
      state.context.Append(k_.data() + r * kvw, v_.data() + r * kvw, count, rows * kvw);
      r += count;
      next_done += count;
      if (next_done == state.pending_rows) {
        waiting_rows_ -= state.pending_rows;
        state.pending_rows = 0;
        state.pending.clear();
        if (cache_) state.next_block_to_store = cache_->Store(state.hashes, state.next_block_to_store, state.context);
        ++next;
        next_done = 0;
      }
    }
  }
}

void DSparkProposer::RestoreFromCache(RequestState& state, const TargetHiddenStates& states) {
  // Positions the target did not compute: a prompt prefix it took from its prefix cache.
  DSparkContext& context = state.context;
  const int64_t position = states.first_position;
  if (cache_ && context.size() == 0 && position % cache_->block_size() == 0 &&
      static_cast<int64_t>(states.tokens.size()) >= position) {
    kv::ExtendBlockHashes(states.tokens.first(position), cache_->block_size(), states.block_keys, state.hashes);
    if (cache_->Restore(state.hashes, position, context)) {
      state.next_block_to_store = position / cache_->block_size();
      return;
    }
  } else {
    context.RestartAt(position);
  }
  // Without those rows the context restarts after the gap, and the request drafts from what
  // follows it: a windowed drafter as well as ever once the gap has left its window, one with
  // full-attention layers with a little less acceptance (dspark_proposer.h).
  if (drafter_->config().context_window() < 0 && !noted_prefix_gap_) {
    noted_prefix_gap_ = true;
    EMBER_LOG_INFO("dspark: a request's hidden states start at position {} (a prefix-cache hit) and the drafter's "
                   "own prefix cache lacks the positions before it{}: it drafts from the positions after them, "
                   "without the prefix (logged once)",
                   position,
                   cache_ ? " (blocks of requests that finished without drafting are not cached)"
                          : " (its prefix cache is off: it follows --enable-prefix-caching)");
  }
}

void DSparkProposer::Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) {
  EMBER_CHECK(inputs.size() == drafts.size());
  const size_t per_batch = static_cast<size_t>(options_.max_num_seqs);
  catch_up_seconds_ = 0.0;
  for (size_t first = 0; first < inputs.size(); first += per_batch) {
    const size_t count = std::min(per_batch, inputs.size() - first);
    ProposeBatch(inputs.subspan(first, count), drafts.subspan(first, count));
  }
}

void DSparkProposer::ProposeBatch(std::span<const ProposalInput> inputs, std::span<Draft> drafts) {
  const DSparkConfig& c = drafter_->config();
  // The waiting rows of every request drafted for, in one projection.
  to_project_.clear();
  for (const ProposalInput& in : inputs) {
    auto it = requests_.find(in.req);
    if (it != requests_.end() && it->second.pending_rows > 0) to_project_.push_back(&it->second);
  }
  std::sort(to_project_.begin(), to_project_.end());
  to_project_.erase(std::unique(to_project_.begin(), to_project_.end()), to_project_.end());
  int64_t rows = 0, catch_up_rows = 0;
  const int64_t steady_rows = int64_t{options_.num_speculative_tokens} + 1;
  for (const RequestState* s : to_project_) {
    rows += s->pending_rows;
    catch_up_rows += s->pending_rows - std::min({s->pending_rows, s->last_report_rows, steady_rows});
  }
  const auto project_start = std::chrono::steady_clock::now();
  Project(to_project_);
  if (catch_up_rows > 0) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - project_start).count();
    catch_up_seconds_ += seconds * static_cast<double>(catch_up_rows) / static_cast<double>(rows);
  }
  blocks_.clear();
  block_input_.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ProposalInput& in = inputs[i];
    const int32_t k = std::min(in.max_tokens, options_.num_speculative_tokens);
    if (in.tokens.empty() || k < 1) continue;
    auto it = requests_.find(in.req);
    const int64_t anchor_position = static_cast<int64_t>(in.tokens.size()) - 1;
    const int32_t anchor = in.tokens.back();
    // The block needs the target's hidden states of every position before the anchor.
    if (it == requests_.end() || !it->second.context.CanDraftAt(anchor_position)) continue;
    if (anchor < 0 || anchor >= c.vocab_size) continue;
    // The same request twice in one call shares one context; draft it once.
    const bool repeated = std::any_of(block_input_.begin(), block_input_.end(),
                                      [&](size_t b) { return inputs[b].req == in.req; });
    if (repeated) continue;
    blocks_.push_back({&it->second.context, anchor, anchor_position, k});
    block_input_.push_back(i);
  }
  if (blocks_.empty()) return;
  drafter_->ForwardBlocks(blocks_);
  if (block_drafts_.size() < blocks_.size()) block_drafts_.resize(blocks_.size());
  markov_blocks_.clear();
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const ProposalInput& in = inputs[block_input_[b]];
    DraftSampling sampling;
    if (options_.sample_drafts && in.temperature > 0.0f) {
      sampling = {.temperature = in.temperature, .seed = in.seed, .first_index = blocks_[b].anchor_position + 1};
    }
    markov_blocks_.push_back({b, blocks_[b].anchor_token, blocks_[b].num_logits, {}, sampling, &block_drafts_[b]});
  }
  markov_.DraftBlocks(markov_blocks_, options_.confidence_threshold, /*keep_logits=*/false);
  for (size_t b = 0; b < blocks_.size(); ++b) {
    Draft& d = drafts[block_input_[b]];
    d.tokens = block_drafts_[b].tokens;
    d.confidences = block_drafts_[b].confidences;
    d.probabilities = block_drafts_[b].probabilities;
  }
}

void DSparkProposer::OnReleased(RequestId req, std::span<const int32_t> tokens, int64_t num_prompt_tokens,
                                bool completed) {
  (void)tokens, (void)num_prompt_tokens;
  auto it = requests_.find(req);
  if (it == requests_.end()) return;
  // A finished request's last rows go to the prefix cache too (a next turn of the conversation
  // starts with them) if it was drafting until about its end; a preempted or aborted one's are
  // dropped, and so are those of a request that was not drafting (kRecentRows).
  if (completed && cache_ && it->second.pending_rows <= kRecentRows) ProjectOne(it->second);
  waiting_rows_ -= it->second.pending_rows;
  std::vector<float>& pending = it->second.pending;
  const size_t largest = static_cast<size_t>(kWaitingRowsPerSeq * drafter_->feature_width());
  if (static_cast<int64_t>(spare_pending_.size()) < options_.max_num_seqs && pending.capacity() <= largest) {
    pending.clear();
    spare_pending_.push_back(std::move(pending));
  }
  requests_.erase(it);
}

}  // namespace ember::spec::dspark
