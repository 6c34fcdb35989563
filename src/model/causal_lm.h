// The interface every architecture implements, and the registry that finds one for a model
// directory. Architectures live in model/arch/, one self-registering file each; nothing here
// switches over architecture names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/workspace.h"
#include "exec/communicator.h"
#include "exec/expert_placement.h"
#include "kv/spec.h"
#include "model/forward_batch.h"
#include "model/forward_output.h"
#include "model/kv_store.h"
#include "model/tensor_parallel.h"
#include "quant/block_scaled.h"

namespace ember {

class Linear;

struct ModelInfo {
  std::string architecture;  // "muse_spark", ...
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;  // width of the residual stream (hidden states, input embeddings)
  int64_t num_layers = 0;   // decoder layers
  int64_t max_position_embeddings = 0;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  // Mixture-of-experts models (0 / empty for dense ones): routed experts per MoE layer, experts
  // per token, and the decoder layers that route (whichever pipeline stage runs them).
  int64_t num_experts = 0;
  int64_t num_experts_per_token = 0;
  std::vector<int32_t> moe_layers;
};

// Bytes of weights by role, for memory plans and the decode roofline.
struct WeightBytes {
  int64_t total = 0;             // every tensor the model holds
  int64_t per_token_decode = 0;  // weights one decode token streams at batch 1 (dense + top-k experts + lm_head)
  int64_t repacked = 0;          // load-time copies in a kernel's own layout, held besides `total`
};

// What `ember inspect` prints: the shape of the model and its parameter census.
struct ModelSummary {
  std::string architecture;
  int64_t num_layers = 0;
  std::string layer_pattern;  // one letter per layer: S = sliding window, F = full attention
  int64_t hidden_size = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
  int64_t sliding_window = 0, max_position_embeddings = 0;
  int64_t num_experts = 0, experts_per_token = 0;
  int64_t parameters_total = 0;
  int64_t parameters_active = 0;  // per token, excluding the embedding table and lm_head
  int64_t parameters_embedding = 0;  // embedding table + lm_head
  WeightBytes bytes;
};

// The most one step may hold, which sizes a model's step workspace (ReserveWorkspace).
struct StepLimits {
  int64_t max_tokens = 0;      // the engine's max_num_batched_tokens
  int64_t max_logit_rows = 0;  // rows of logits one step asks for (at most max_tokens)
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const ModelInfo& info() const = 0;
  virtual WeightBytes weight_bytes() const = 0;
  virtual ModelSummary Summary() const = 0;
  // One entry per layer, in model order: what PlanKvGroups needs to lay out the paged cache.
  virtual const std::vector<kv::LayerKvSpec>& KvLayerSpecs() const = 0;
  // The KV dtype tools use for "auto": f16 for GGUF models (llama.cpp's default), bf16 for
  // checkpoints whose weights are bf16.
  virtual kv::KvDtype DefaultKvDtype() const = 0;
  // For drafters that share the target's embedding and head (DSpark, DFlash).
  // DrafterEmbedToken writes `token`'s embedding as such a drafter reads it, hidden_size floats:
  // the embedding module's output without an embedding norm, as transformers'
  // DFlashTokenCandidateGenerator takes it (`_get_noise_embeds` sets the module's `embed_norm`
  // aside; Muse Spark's normed-embedding class says "Dflash implem needs to embed without the
  // norm"), so Gemma's sqrt(hidden) scale applies and Muse Spark's weightless RMSNorm does not.
  // lm_head is the output head [vocab, hidden] as loaded (the embedding table for tied models),
  // nullptr where not exposed, valid while the model lives. Unimplemented / nullptr where an
  // architecture does not expose them.
  virtual Status DrafterEmbedToken(int32_t token, float* out) const {
    (void)token, (void)out;
    return Unimplemented(info().architecture + " does not expose its token embedding");
  }
  virtual const Linear* lm_head() const { return nullptr; }
  // out [rows, hidden] = the model's final norm (what its lm_head reads) of the residual-stream
  // rows x, for drafters whose last tap is transformers' normed last hidden state (DSpark).
  // Unimplemented where an architecture does not expose it. In-place allowed.
  virtual Status ApplyFinalNorm(const float* x, int64_t rows, float* out) const {
    (void)x, (void)rows, (void)out;
    return Unimplemented(info().architecture + " does not expose its final norm");
  }

  // Runs one step over a ragged batch of requests: writes every token's K/V into `kv` at its
  // slot (batch.groups[g].slot_mapping for the layer's group g), attends over each request's
  // blocks, and fills `out` (model/forward_output.h): vocab_size logits for each row listed in
  // batch.logits_indices, in that order, and the hidden states after batch.hidden_state_layers.
  // `kv` must be laid out from KvLayerSpecs(). A request's results do not depend on the other
  // requests in the batch or on how its prompt was split into steps (bitwise). Bad token ids,
  // positions, tables, layers or embeddings are errors, not crashes.
  // Every activation buffer comes from the model's step workspace, so once the workspace has
  // been reserved for the engine's limits a step makes no heap allocation (tests/alloc); `out`
  // is resized only when the step asks for more rows than the last one held.
  virtual Status Forward(const ForwardBatch& batch, KvStore& kv, ForwardOutput* out) = 0;
  // A data-parallel rank with no tokens in a step that other ranks compute (DEP): takes part in
  // every collective its expert-parallel layers run, with 0 tokens, and touches no KV. The expert
  // load the group exchanged is added to `out` as Forward adds it. Models without such layers
  // have nothing to run with the others, so data parallelism refuses them.
  virtual Status ForwardWithoutTokens(ForwardOutput* out) {
    (void)out;
    return Unimplemented(info().architecture + " has no expert-parallel layers to run without tokens");
  }

  // Pipeline parallelism (LoadOptions::pipeline). The number of stages; with more than one, a
  // step's requests may run as micro-batches so that the stages overlap (ModelRunner).
  virtual int pipeline_stages() const { return 1; }
  // The logits of a step travel once, after all its micro-batches: the last stage's Forward
  // leaves them in `out`, and its rank that sends_logits() sends the step's rows (every
  // micro-batch's, in order) with SendLogits; the sampling rank, whose Forward only sends the
  // residual stream on (logits_arrive_later()), receives them with ReceiveLogits. Sending once per
  // step rather than per micro-batch keeps a stage from blocking on a send while the sampling rank
  // still forwards the next micro-batch.
  virtual bool logits_arrive_later() const { return false; }
  virtual bool sends_logits() const { return false; }
  virtual Status ReceiveLogits(int64_t rows, ForwardOutput* out) {
    (void)rows, (void)out;
    return Unimplemented(info().architecture + " has no pipeline stages");
  }
  virtual Status SendLogits(const ForwardOutput& out) {
    (void)out;
    return Unimplemented(info().architecture + " has no pipeline stages");
  }

  // The workspace one step within `limits` takes, at most (an architecture sums its blocks').
  virtual int64_t WorkspaceBytes(const StepLimits& limits) const = 0;
  // Sizes the step workspace for `limits` once, at load (LocalEngine does). A step beyond them
  // still runs: the workspace grows to fit it (core/workspace.h). ResourceExhausted when the
  // host cannot hold it.
  Status ReserveWorkspace(const StepLimits& limits) { return workspace_.Reserve(WorkspaceBytes(limits)); }
  const Workspace& workspace() const { return workspace_; }

 protected:
  // The scratch arena of Forward; one step at a time (the engine thread's).
  Workspace workspace_;
};

// The checks every Forward starts with: batch shape, token ids against the vocabulary, positions
// against max_position_embeddings and seq_lens, block tables and slots against the store, and
// the store's layout against the model's KvLayerSpecs.
Status CheckForwardBatch(const CausalLM& model, const ForwardBatch& batch, const KvStore& kv);

// Pipeline parallelism: which consecutive layers this rank's stage runs, and where the residual
// stream comes from and goes to (ranks of `comm`, the engine's world). The first stage embeds; a
// later stage receives the residual stream from the stage before; every stage but the last sends
// its result on; the last runs the head and its tensor rank 0 sends the logits to the rank that
// samples. One stage (the default): everything here, nothing sent.
struct PipelineStage {
  exec::Communicator* comm = nullptr;
  int index = 0;            // this stage, of num_stages
  int num_stages = 1;
  ShardRange layers;        // count 0: every layer (ForModel sets it)
  int previous = -1;        // rank the residual stream comes from; -1 on the first stage
  int next = -1;            // rank it goes to; -1 on the last stage
  int logits_to = -1;       // last stage: the rank the logits go to (-1: none, or this rank samples)
  int logits_from = -1;     // the sampling rank of the first stage: the rank the logits come from

  bool first() const { return previous < 0; }
  bool last() const { return next < 0; }
  bool holds(int64_t layer) const { return layers.count == 0 || (layer >= layers.begin && layer < layers.end()); }
  // This stage with `layers` set for a model of num_layers layers: consecutive blocks, the first
  // num_layers % num_stages stages one layer longer. InvalidArgument with more stages than layers.
  Expected<PipelineStage> ForModel(int64_t num_layers) const;
};

// How to load a model beyond what its files say.
struct LoadOptions {
  // Quantize a bf16 checkpoint's routed expert weights to this format while loading (round to
  // nearest even, deterministic; model/quantized_weights.h). nullopt keeps the stored formats.
  std::optional<quant::WeightFormat> quantization;
  // MXFP4 block-scale rule for `quantization` kMxfp4: Quark's default "even" (the bytes AMD's
  // toolchain produces) or OCP MX v1.0 "floor" (quant/block_scaled.h).
  quant::Mxfp4ScaleRounding mxfp4_rounding = quant::Mxfp4ScaleRounding::kEven;
  // With `quantization`, also the dense linears of the decoder layers (attention projections,
  // latent projections, dense MLPs); the router, embeddings and lm_head stay as stored.
  bool quantize_dense = false;
  // Called after each converted tensor with (done, total), e.g. to draw a progress bar.
  std::function<void(int64_t done, int64_t total)> progress;
  // The group the model's collectives run over (tensor- and expert-parallel ranks); it must
  // outlive the model. nullptr: the process-wide exec::LocalCommunicator (one process).
  exec::Communicator* communicator = nullptr;
  // Expert parallelism over `communicator`'s ranks (--enable-expert-parallel): each rank holds
  // whole routed experts, a block of E / ranks of every MoE layer, instead of a block of every
  // expert's features; attention and dense layers stay tensor-parallel (TEP). Models without
  // routed experts ignore it.
  bool expert_parallel = false;
  // Data-parallel attention with expert parallelism (DEP, --data-parallel-size with
  // --enable-expert-parallel): the group the routed experts are spread over when its ranks each
  // run tokens of their own (tokens all-to-all'd to their experts' ranks and back), while
  // `communicator` (the tensor group) splits attention, dense layers and vocabulary. With
  // `expert_parallel` and more than one rank here, experts are spread over this group instead of
  // `communicator`; it must outlive the model. nullptr: TEP over `communicator`.
  exec::Communicator* expert_communicator = nullptr;
  // This rank's pipeline stage (architectures that support it: DenseDecoder, Muse Spark).
  PipelineStage pipeline;
  // --expert-placement: which expert-parallel rank holds each routed expert of each layer
  // (exec/expert_placement.h), for expert-parallel execution to follow. LoadModel refuses it for a
  // model without routed experts, or one whose expert or layer count it does not match
  // (CheckExpertPlacement). nullptr: no placement given (the contiguous layout).
  std::shared_ptr<const exec::ExpertPlacement> expert_placement;
};

// --expert-placement against a loaded model's shape (ModelInfo): an error naming what differs.
Status CheckExpertPlacement(const exec::ExpertPlacement& placement, const ModelInfo& info);

// A model directory's config.json model_type selects the factory.
using ModelFactory =
    std::function<Expected<std::unique_ptr<CausalLM>>(const std::string& model_dir, const LoadOptions& options)>;

// Registers `factory` for config.json model_type `model_type`. Used by static registrars.
bool RegisterArchitecture(const std::string& model_type, ModelFactory factory);
// For factories without load options (GGUF files keep their stored types).
bool RegisterArchitecture(const std::string& model_type,
                          std::function<Expected<std::unique_ptr<CausalLM>>(const std::string& path)> factory);
std::vector<std::string> RegisteredArchitectures();

// Loads a Hugging Face-style model directory (config.json + safetensors) or a .gguf file.
// `options.quantization` applies to safetensors checkpoints only.
Expected<std::unique_ptr<CausalLM>> LoadModel(const std::string& model_dir, const LoadOptions& options = {});

}  // namespace ember
