#include "runner/step_forward.h"

#include <algorithm>

#include "core/logging.h"

namespace ember {
namespace {

// The first request of each of up to `parts` consecutive groups, balanced by scheduled tokens
// (each group non-empty), then the end.
std::vector<size_t> SplitByTokens(const std::vector<int32_t>& tokens, size_t parts) {
  int64_t total = 0;
  for (int32_t t : tokens) total += t;
  std::vector<size_t> bounds = {0};
  int64_t seen = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    seen += tokens[i];
    const size_t groups_left = parts - bounds.size();
    const size_t requests_left = tokens.size() - (i + 1);
    // Close a group once it holds its share, keeping a request for every group still to come.
    if (groups_left > 0 && requests_left >= groups_left &&
        seen * static_cast<int64_t>(parts) >= total * static_cast<int64_t>(bounds.size())) {
      bounds.push_back(i + 1);
    }
  }
  bounds.push_back(tokens.size());
  return bounds;
}

}  // namespace

Expected<int> StepForward::Run(CausalLM& model, KvStore& kv, const std::vector<const RunnerRequest*>& inputs,
                               const SchedulerOutput& output, const BuiltBatch& built, ForwardOutput* out) {
  const int stages = model.pipeline_stages();
  bool split = stages > 1 && inputs.size() > 1 && built.batch.hidden_state_layers.empty();
  for (const BuiltBatch::PromptRows& rows : built.prompt_rows_of_request) split = split && rows.count == 0;
  const int64_t rows = static_cast<int64_t>(built.batch.logits_indices.size());
  if (!split) {
    EMBER_RETURN_IF_ERROR(model.Forward(built.batch, kv, out));
    if (model.logits_arrive_later()) EMBER_RETURN_IF_ERROR(model.ReceiveLogits(rows, out));
    if (model.sends_logits()) EMBER_RETURN_IF_ERROR(model.SendLogits(*out));
    return 1;
  }
  const std::vector<size_t> bounds =
      SplitByTokens(output.num_scheduled_tokens, std::min<size_t>(static_cast<size_t>(stages), inputs.size()));
  const size_t parts = bounds.size() - 1;
  EMBER_LOG_DEBUG("step of {} requests, {} tokens: {} pipeline micro-batches", inputs.size(), built.batch.num_tokens(),
                  parts);
  parts_.resize(parts);
  if (outs_.size() < parts) outs_.resize(parts);
  for (size_t p = 0; p < parts; ++p) {
    const size_t first = bounds[p], last = bounds[p + 1];
    const std::vector<const RunnerRequest*> group(inputs.begin() + first, inputs.begin() + last);
    const std::vector<int32_t> tokens(output.num_scheduled_tokens.begin() + first,
                                      output.num_scheduled_tokens.begin() + last);
    std::vector<std::vector<int32_t>> spec;
    if (!output.scheduled_spec_tokens.empty()) {
      spec.assign(output.scheduled_spec_tokens.begin() + first, output.scheduled_spec_tokens.begin() + last);
    }
    parts_[p] = BuildForwardBatch(group, tokens, spec, kv.config().block_size);
    EMBER_RETURN_IF_ERROR(model.Forward(parts_[p].batch, kv, &outs_[p]));
    // The micro-batch's expert load joins the step's output, which holds the running counts.
    out->expert_load.Add(outs_[p].expert_load);
    outs_[p].expert_load.Zero();
  }
  if (model.logits_arrive_later()) {
    EMBER_RETURN_IF_ERROR(model.ReceiveLogits(rows, out));
  } else if (model.sends_logits() || !outs_[0].logits.empty()) {
    // The last stage: the micro-batches' logits, in request order, are the step's rows.
    out->logits.clear();
    for (size_t p = 0; p < parts; ++p) out->logits.insert(out->logits.end(), outs_[p].logits.begin(), outs_[p].logits.end());
    if (model.sends_logits()) EMBER_RETURN_IF_ERROR(model.SendLogits(*out));
  }
  return static_cast<int>(parts);
}

}  // namespace ember
