// What CausalLM::Forward returns for one step: the logits of the rows the batch asked for and,
// when it asked, the hidden states after chosen layers. Flat arrays, reused across steps by the
// caller so that a steady-state step allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/expert_load.h"

namespace ember {

struct ForwardOutput {
  // [logits_indices.size(), vocab_size]: row i is the logits of batch row logits_indices[i].
  // Several rows may belong to one request (each verified draft position of a speculative step).
  std::vector<float> logits;
  // [hidden_state_layers.size(), num_tokens, hidden_size]: block i is the residual stream every
  // token of the batch leaves decoder layer hidden_state_layers[i] with (transformers'
  // output_hidden_states[layer + 1] for every layer but the last, whose entry there is normed).
  std::vector<float> hidden_states;
  // Scratch of a vocab-parallel head (tensor parallelism): the ranks' logit blocks as gathered,
  // before they are interleaved into `logits`. Kept here, not in the step workspace, because it
  // is as large as the logits (which the workspace does not hold either).
  std::vector<float> gathered_logits;
  // Mixture-of-experts models: the tokens routed to each expert of each MoE layer this rank runs,
  // added up over every Forward given this output. Forward shapes it on first use and only ever
  // adds (the increments are a few per token and layer, no locks: the step owns the output), so a
  // caller that reuses its output has counts since it last called Zero(): the runner keeps one
  // output for its whole life and reads the engine's counts from it. Dense models leave it empty.
  exec::ExpertLoad expert_load;
};

}  // namespace ember
