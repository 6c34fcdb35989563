// The latent mixture-of-experts sub-layer (Muse Spark's sparse MLP, reference/muse_spark.md §1.3)
// as four named steps, so that expert parallelism has a place to put its all-to-alls:
//
//   Route     router logits * logit_scale, sigmoid scores, top-k by score + selection bias,
//             weights = chosen scores renormalised to routed_scaling_factor
//   Dispatch  latent projection [count, H] -> [count, Hm] and its norm, then every routed row
//             gathered expert after expert and sent to the rank owning that expert
//   Experts   gate_up and down as grouped matmuls over the active experts, SwiGLU between, then
//             the post-expert norm
//   Combine   expert outputs sent back, each token's weighted outputs summed in expert-index order
//             into its own row, then post_expert_proj [count, Hm] -> [count, H]
//
// Dispatch and Combine exchange rows through the Communicator with AllToAllV; over one process
// (LocalCommunicator) the exchange is a copy and the block computes what the inlined MoE did, bit
// for bit (tests/golden/logit_hashes_test.cc). Under tensor parallelism (MoeOptions) nothing is
// exchanged and Experts all-reduces the expert outputs instead.
//
// Under expert parallelism each rank holds whole experts (MoeOptions::expert_owner). Dispatch
// sends each routed row to its expert's rank (the ranks first all-gather how many rows each sends
// to each expert, so every receiver knows its layout), the receiver regroups the rows per expert,
// and Combine returns the outputs to their senders, which add each token's weighted outputs in
// expert-index order as one process does. Every row is computed by the same kernels as in one
// process and nothing is summed across ranks, so the outputs are bitwise one process's whatever
// the placement, the batch and the other ranks' tokens (tests/mpi/moe_expert_parallel_mpi_test.cc).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/workspace.h"
#include "exec/communicator.h"
#include "model/expert_weights.h"
#include "model/linear.h"

namespace ember {

// One layer's MoE weights. Gains are stored ready to multiply (1 + gamma).
struct MoeWeights {
  Linear router;                        // [E, H]
  std::vector<float> router_bias;       // [E], selection only
  Linear pre_expert_proj;               // [Hm, H]
  std::vector<float> pre_expert_gain;   // [Hm]
  ExpertWeights experts_gate_up;        // [E, 2I, Hm]: bf16/f32 or block-scaled (NVFP4, MXFP4, FP8)
  ExpertWeights experts_down;           // [E, Hm, I]
  std::vector<float> post_expert_gain;  // [Hm]
  Linear post_expert_proj;              // [H, Hm]

  bool empty() const { return experts_gate_up.empty(); }
};

struct MoeOptions {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  double routed_scaling_factor = 1.0;  // the chosen weights sum to this
  float router_logit_scale = 1.0f;     // multiplies the router logits before the sigmoid
  float latent_norm_eps = 1e-6f;       // pre-expert norm (zero-centred gain, then weightless norm)
  float post_expert_norm_eps = 1e-6f;  // post-expert norm (gain before the weightless norm)
  // Tensor parallelism over the communicator's ranks: every rank routes every token with whole
  // router and latent projections and holds a block of each expert's FFN features
  // (model/tensor_parallel.h), so rows stay where they are and the down projection's partial
  // outputs are summed (one AllReduceSum per layer) before the post-expert norm.
  bool tensor_parallel = false;
  // Expert parallelism over the communicator's ranks: expert_owner[e] is the rank holding expert e
  // whole, local_expert[e] its index in this rank's ExpertWeights (-1 where another rank holds
  // it). Empty without expert parallelism.
  std::vector<int32_t> expert_owner;
  std::vector<int32_t> local_expert;
  // With expert parallelism, whether every rank runs the same tokens (tensor-parallel attention:
  // TEP). Then each rank sends only its block of the tokens through the experts and the blocks'
  // outputs are all-gathered; otherwise (data-parallel attention: DEP) each rank brings its own.
  bool tokens_replicated = false;

  bool expert_parallel() const { return !expert_owner.empty(); }
};

// Route's result: for each of `count` tokens its top_k experts and their weights. The spans of
// this and of MoeDispatch point into the block's workspace: valid until the scope open when the
// step that made them ran ends.
struct MoeRouting {
  int64_t count = 0;
  int64_t top_k = 0;
  std::span<int32_t> chosen;  // [count, top_k], by descending biased score
  std::span<float> weights;   // [count, top_k]
};

// Dispatch's result, which Experts fills and Combine reads. This rank's routed rows are laid out
// expert after expert, each expert's rows in token order; the experts in the order they are sent
// (by owning rank, then expert index: expert-index order over one process).
struct MoeDispatch {
  int64_t latent_width = 0;        // Hm
  std::span<int64_t> token;        // [routed]: the token each routed row came from
  std::span<float> weight;         // [routed]: its routing weight
  struct ExpertRows {
    int64_t expert = 0;
    int64_t first_row = 0;
    int64_t n = 0;
  };
  // One per expert this rank's tokens chose, in the order sent: its rows of token / weight.
  std::span<ExpertRows> sent;
  // One per expert this rank runs that received rows, in expert-index order: its rows
  // [first_row, first_row + n) of `rows` (the same as `sent` without expert parallelism).
  std::span<ExpertRows> experts;
  // Expert parallelism: the received rows arrive by source rank, each source's in expert order;
  // block i moves n rows from row `from` of that arrival order to row `to` of `rows`, expert-major.
  struct RowBlock {
    int64_t from = 0, to = 0, n = 0;
  };
  std::span<RowBlock> regroup;
  // Expert parallelism: rows routed to each expert by every rank of the group this step [E].
  std::span<int64_t> group_rows_per_expert;
  std::span<int64_t> send_rows;  // per rank: rows sent by Dispatch (received back by Combine)
  std::span<int64_t> recv_rows;  // per rank: rows received by Dispatch (sent back by Combine)
  std::span<float> rows;         // [received, Hm]: the rows this rank's experts process
  std::span<float> gate_up;      // [received, 2I]
  std::span<float> activated;    // [received, I]
  std::span<float> expert_out;   // [received, Hm]
};

// The MoE of one layer for one step: a view over its weights, options, communicator and the
// step's workspace, which every step takes its buffers from (open a Workspace::Scope around
// the steps; Forward opens its own).
// Adds one to expert_tokens[e] for every (token, expert e) pair of `routing`: count x top_k in all.
// Every row of a step is a real token (the runner builds batches without padding); a batch that
// pads must route only its real rows through here.
void CountExpertTokens(const MoeRouting& routing, int64_t* expert_tokens);

class MoeBlock {
 public:
  MoeBlock(const MoeWeights& weights, const MoeOptions& options, exec::Communicator& comm, Workspace& workspace)
      : w_(weights), o_(options), comm_(comm), ws_(workspace) {}

  // f [count, H] = MoE(x [count, H]): Route, Dispatch, Experts, Combine. With `expert_tokens`
  // (num_experts counters, this layer's row of ForwardOutput::expert_load), each token adds one
  // to each expert it was routed to; the counts read the routing and change no numbers.
  void Forward(const float* x, int64_t count, float* f, int64_t* expert_tokens = nullptr) const;
  // The most workspace Forward takes for `tokens` tokens.
  static int64_t WorkspaceBytes(const MoeWeights& weights, const MoeOptions& options, int64_t tokens,
                                const exec::Communicator& comm);

  MoeRouting Route(const float* x, int64_t count) const;
  MoeDispatch Dispatch(const float* x, const MoeRouting& routing) const;
  void Experts(MoeDispatch& d) const;
  // f [count, H] from the expert outputs in `d`.
  void Combine(const MoeDispatch& d, int64_t count, float* f) const;

 private:
  // Dispatch under expert parallelism: `d` with its rows sent (`gathered`, `rows_of[e]` rows per
  // expert) to their experts' ranks, and the rows this rank received regrouped per expert.
  MoeDispatch ExchangeRows(MoeDispatch d, const float* gathered, const int64_t* rows_of) const;

  const MoeWeights& w_;
  const MoeOptions& o_;
  exec::Communicator& comm_;
  Workspace& ws_;
};

}  // namespace ember
