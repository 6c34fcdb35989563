// What CausalLM::Forward returns for one step: the logits of the rows the batch asked for and,
// when it asked, the hidden states after chosen layers. Flat arrays, reused across steps by the
// caller so that a steady-state step allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

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
};

}  // namespace ember
