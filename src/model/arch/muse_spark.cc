// Muse Spark: weight loading and registration. The forward pass is in muse_spark_forward.cc.
#include "model/arch/muse_spark.h"

#include <fmt/format.h>

#include <cmath>

#include "core/logging.h"
#include "formats/checkpoint.h"
#include "kernels/ops.h"
#include "model/quantized_weights.h"

namespace ember {
namespace {

constexpr std::initializer_list<DType> kMatrixDTypes = {DType::kBF16, DType::kF32};
// The residual gate's floor on alpha^2 (transformers' MuseSparkResidualGate eps).
constexpr float kResidualGateEps = 1e-3f;

Expected<Linear> LoadMatrix(WeightSource& source, const std::string& name, int64_t rows, int64_t cols,
                            const MatrixSplit& split = MatrixSplit::Whole()) {
  EMBER_ASSIGN_OR_RETURN(TensorView t, source.Require(name, kMatrixDTypes, Shape{rows, cols}));
  EMBER_ASSIGN_OR_RETURN(Linear linear, SliceDense(t, split));
  if (split.kind == MatrixSplit::Kind::kColumns) source.Release(t);  // the copy is all this rank keeps
  return linear;
}

}  // namespace

MuseSparkModel::MuseSparkModel(const MuseSparkConfig& config, std::shared_ptr<WeightSource> weights,
                               const QuantScheme& scheme, const LoadOptions& options, const LayerSplits& splits,
                               const ShardRange& expert_columns, bool expert_parallel)
    : config_(config),
      weights_(std::move(weights)),
      scheme_(scheme),
      options_(options),
      comm_(exec::OrLocal(options.communicator)),
      moe_comm_(options.expert_communicator != nullptr && options.expert_communicator->world_size() > 1
                    ? *options.expert_communicator
                    : comm_),
      splits_(splits),
      expert_columns_(expert_columns),
      expert_parallel_(expert_parallel) {
  const ShardRange vocab = VocabShard(config.vocab_size, TensorParallelRank::Of(comm_));
  vocab_ = {vocab, config.vocab_size};
  if (expert_parallel) {
    // Expert parallelism (each layer's placement: LoadLayer). TEP: every rank runs the same tokens
    // (tensor-parallel attention), so each sends its block of them to the experts. DEP: every rank
    // runs tokens of its own and sends them all.
    moe_options_.tokens_replicated = &moe_comm_ == &comm_;
  } else {
    // Tensor parallelism: every rank routes every token and holds a block of each expert's features.
    moe_options_.tensor_parallel = comm_.world_size() > 1;
  }
  info_.architecture = "muse_spark";
  info_.vocab_size = config.vocab_size;
  info_.hidden_size = config.hidden_size;
  info_.num_layers = config.num_hidden_layers;
  info_.max_position_embeddings = config.max_position_embeddings;
  info_.bos_token_id = config.bos_token_id;
  info_.eos_token_ids = config.eos_token_ids;
  info_.num_experts = config.num_local_experts;
  info_.num_experts_per_token = config.num_experts_per_tok;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    if (config.mlp_layer_types[l] != MlpKind::kSparse) continue;
    info_.moe_layers.push_back(static_cast<int32_t>(l));
    // The expert load counts the sparse layers this stage runs (ForwardOutput::expert_load).
    if (options_.pipeline.holds(l)) counted_layers_.push_back(static_cast<int32_t>(l));
  }
  moe_options_.num_experts = config.num_local_experts;
  moe_options_.top_k = config.num_experts_per_tok;
  moe_options_.routed_scaling_factor = config.routed_scaling_factor;
  moe_options_.router_logit_scale = static_cast<float>(config.output_multiplier);
  moe_options_.latent_norm_eps = static_cast<float>(config.rms_norm_eps);
  moe_options_.post_expert_norm_eps = static_cast<float>(config.post_norm_eps);
  kv_specs_.resize(config.num_hidden_layers);
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    kv::LayerKvSpec& spec = kv_specs_[l];
    spec.kind = config.IsSliding(l) ? kv::AttentionKind::kSlidingWindow : kv::AttentionKind::kFull;
    spec.window = config.IsSliding(l) ? config.sliding_window : 0;
    spec.num_kv_heads = splits.heads.kv_heads.count;
    spec.head_dim = config.head_dim;
  }
}

Expected<std::unique_ptr<MuseSparkModel>> MuseSparkModel::Create(const MuseSparkConfig& config,
                                                                 std::shared_ptr<WeightSource> weights,
                                                                 const QuantScheme& scheme,
                                                                 const LoadOptions& options) {
  EMBER_RETURN_IF_ERROR(config.Validate());
  if (options.quantization && scheme.quantized()) {
    return InvalidArgument(fmt::format("--quantization {} converts bf16 checkpoints, but {} is already quantized ({})",
                                       quant::WeightFormatName(*options.quantization), weights->Describe(),
                                       scheme.Describe()));
  }
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const double theta = config.layer_rope_theta[l];
    if (theta > 0 && theta != config.rope_theta) {
      EMBER_LOG_WARN("layer {}: layer_rope_theta {} differs from rope_theta {}; using {} as the reference "
                     "implementation does", l, theta, config.rope_theta, config.rope_theta);
    }
  }
  const TensorParallelRank tp = TensorParallelRank::Of(exec::OrLocal(options.communicator));
  EMBER_ASSIGN_OR_RETURN(const LayerSplits splits, SplitLayer(config.num_attention_heads, config.num_key_value_heads,
                                                              config.head_dim, config.intermediate_size, tp));
  ShardRange expert_columns{0, config.moe_intermediate_size};
  // The experts' group: every data-parallel rank under DEP, else the tensor group (TEP).
  const bool dep = options.expert_communicator != nullptr && options.expert_communicator->world_size() > 1;
  if (dep && (!options.expert_parallel || tp.sharded())) {
    // DEP: attention, dense layers and vocabulary stay whole on each rank; experts spread over all.
    return InvalidArgument("data parallelism over Muse Spark needs --enable-expert-parallel and runs without "
                           "--tensor-parallel-size for now");
  }
  const TensorParallelRank moe_group = dep ? TensorParallelRank::Of(*options.expert_communicator) : tp;
  const bool expert_parallel = options.expert_parallel && moe_group.sharded();
  if (expert_parallel) {
    EMBER_RETURN_IF_ERROR(
        moe_group.Block(config.num_local_experts, dep ? "routed experts of a layer over the data-parallel ranks (DEP)"
                                                      : "routed experts of a layer (expert parallelism)")
            .status());
    if (options.expert_placement && options.expert_placement->ep_size() != moe_group.size) {
      return InvalidArgument(fmt::format("--expert-placement places experts on {} ranks, but expert parallelism here "
                                         "spreads them over {}; make the map for {} ranks (ember placement "
                                         "--expert-parallel-size {})", options.expert_placement->ep_size(),
                                         moe_group.size, moe_group.size, moe_group.size));
    }
    EMBER_LOG_INFO("expert parallelism{}: {} of the {} experts of every MoE layer on this rank ({})",
                   dep ? " (DEP)" : "", config.num_local_experts / moe_group.size, config.num_local_experts,
                   options.expert_placement ? "placed by --expert-placement" : "a contiguous block");
  } else {
    EMBER_ASSIGN_OR_RETURN(expert_columns, tp.Block(config.moe_intermediate_size, "experts' FFN features"));
  }
  LoadOptions staged = options;
  EMBER_ASSIGN_OR_RETURN(staged.pipeline, options.pipeline.ForModel(config.num_hidden_layers));
  std::unique_ptr<MuseSparkModel> model(
      new MuseSparkModel(config, std::move(weights), scheme, staged, splits, expert_columns, expert_parallel));
  // Before reading any weights: a placement that does not fit the model fails in a moment.
  if (options.expert_placement) EMBER_RETURN_IF_ERROR(CheckExpertPlacement(*options.expert_placement, model->info()));
  EMBER_RETURN_IF_ERROR(model->LoadWeights());
  return model;
}

ModelSummary MuseSparkModel::Summary() const {
  const MuseSparkConfig& c = config_;
  ModelSummary s;
  s.architecture = info_.architecture;
  s.num_layers = c.num_hidden_layers;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) s.layer_pattern += c.IsSliding(l) ? 'S' : 'F';
  s.hidden_size = c.hidden_size;
  s.num_heads = c.num_attention_heads;
  s.num_kv_heads = c.num_key_value_heads;
  s.head_dim = c.head_dim;
  s.vocab_size = c.vocab_size;
  s.sliding_window = c.sliding_window;
  s.max_position_embeddings = c.max_position_embeddings;
  s.num_experts = c.num_local_experts;
  s.experts_per_token = c.num_experts_per_tok;
  const ParameterCounts counts = CountParameters(c);
  s.parameters_total = counts.Total();
  s.parameters_active = counts.ActivePerTokenExcludingEmbeddings();
  s.parameters_embedding = counts.embedding + counts.lm_head;
  s.bytes = weight_bytes_;
  return s;
}

Status MuseSparkModel::LoadWeights() {
  const MuseSparkConfig& c = config_;
  WeightSource& w = *weights_;
  const std::string& p = c.tensor_prefix;
  const MatrixSplit vocab_rows = MatrixSplit::Rows(vocab_.shard);
  const PipelineStage& stage = options_.pipeline;
  // Only the first pipeline stage embeds and only the last runs the head.
  if (stage.first()) {
    EMBER_ASSIGN_OR_RETURN(embed_tokens_, LoadMatrix(w, p + "embed_tokens.weight", c.vocab_size, c.hidden_size, vocab_rows));
  }
  // The reference never ties the output head to the embedding table, whatever config.json's
  // tie_word_embeddings says (see ParseTextConfig), so lm_head.weight must be there.
  if (!w.Has("lm_head.weight")) {
    return NotFound(fmt::format("tensor 'lm_head.weight' not found in {}: Muse Spark always has its own output head "
                                "(transformers' MuseSparkForConditionalGeneration ignores tie_word_embeddings and "
                                "never ties it to embed_tokens); use a checkpoint that includes lm_head.weight",
                                w.Describe()));
  }
  if (stage.last()) {
    EMBER_ASSIGN_OR_RETURN(lm_head_, LoadMatrix(w, "lm_head.weight", c.vocab_size, c.hidden_size, vocab_rows));
  }
  // The final norm's gain is absolute (no +1), unlike the zero-centred block norms.
  EMBER_ASSIGN_OR_RETURN(final_gain_, RequireVectorF32(w, p + "norm.weight", c.hidden_size));
  layers_.resize(c.num_hidden_layers);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (stage.holds(l)) EMBER_RETURN_IF_ERROR(LoadLayer(l, layers_[l]));
  }

  // Byte accounting for memory plans and the decode roofline.
  int64_t total = embed_tokens_.bytes() + lm_head_.bytes();
  int64_t per_token = lm_head_.bytes();
  int64_t repacked = embed_tokens_.repacked_bytes() + lm_head_.repacked_bytes();
  for (const MuseSparkLayer& layer : layers_) {
    const AttentionWeights& a = layer.attention;
    const MoeWeights& m = layer.moe;
    const int64_t dense = a.q.bytes() + a.k.bytes() + a.v.bytes() + a.gate.bytes() + a.o.bytes() +
                          m.router.bytes() + m.pre_expert_proj.bytes() + m.post_expert_proj.bytes() +
                          layer.mlp.bytes();
    const int64_t experts = m.experts_gate_up.bytes() + m.experts_down.bytes();
    repacked += a.q.repacked_bytes() + a.k.repacked_bytes() + a.v.repacked_bytes() + a.gate.repacked_bytes() +
                a.o.repacked_bytes() + m.router.repacked_bytes() + m.pre_expert_proj.repacked_bytes() +
                m.post_expert_proj.repacked_bytes() + layer.mlp.repacked_bytes() + m.experts_gate_up.repacked_bytes() +
                m.experts_down.repacked_bytes();
    total += dense + experts;
    per_token += dense;
    if (experts > 0) per_token += experts / c.num_local_experts * c.num_experts_per_tok;
  }
  weight_bytes_.total = total;
  weight_bytes_.per_token_decode = per_token;
  weight_bytes_.repacked = repacked;
  return Status::Ok();
}

Status MuseSparkModel::LoadLayer(int64_t l, MuseSparkLayer& layer) {
  const MuseSparkConfig& c = config_;
  WeightSource& w = *weights_;
  const std::string p = fmt::format("{}layers.{}.", c.tensor_prefix, l);
  const int64_t h = c.hidden_size;
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;

  EMBER_ASSIGN_OR_RETURN(layer.input_gain, RequireVectorF32(w, p + "input_layernorm.weight", h, 1.0f));
  EMBER_ASSIGN_OR_RETURN(layer.pre_ffn_gain, RequireVectorF32(w, p + "pre_feedforward_layernorm.weight", h, 1.0f));
  EMBER_ASSIGN_OR_RETURN(layer.post_ffn_gain, RequireVectorF32(w, p + "post_feedforward_layernorm.weight", h, 1.0f));
  AttentionWeights& a = layer.attention;
  const LayerSplits& s = splits_;
  EMBER_ASSIGN_OR_RETURN(a.q, LoadLinear(p + "self_attn.q_proj.weight", q_width, h, s.q));
  EMBER_ASSIGN_OR_RETURN(a.k, LoadLinear(p + "self_attn.k_proj.weight", kv_width, h, s.kv));
  EMBER_ASSIGN_OR_RETURN(a.v, LoadLinear(p + "self_attn.v_proj.weight", kv_width, h, s.kv));
  EMBER_ASSIGN_OR_RETURN(a.gate, LoadLinear(p + "self_attn.gate_proj.weight", q_width, h, s.q));
  EMBER_ASSIGN_OR_RETURN(a.o, LoadLinear(p + "self_attn.o_proj.weight", h, q_width, s.o));
  // Weightless per-head QK norms with the qk scale factor on q; weightless per-head output norm
  // and the sigmoid gate; RoPE (rotate-half, HF layout) only where layer_rope_theta is nonzero.
  AttentionOptions& o = layer.attention_options;
  o.num_heads = s.heads.q_heads.count;
  o.num_kv_heads = s.heads.kv_heads.count;
  o.head_dim = c.head_dim;
  o.qk_norm = QkNorm::kWeightless;
  o.qk_norm_eps = static_cast<float>(c.rms_norm_eps);
  o.q_multiplier = static_cast<float>(c.qk_scale_factor);
  o.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  o.window = c.WindowOf(l);
  o.output_norm = true;
  o.output_norm_eps = static_cast<float>(c.rms_norm_eps);

  // Residual gates: alpha and beta are fixed per channel, so fold them once (f32, as the reference).
  for (const char* which : {"post_attention_residual_gate", "post_feedforward_residual_gate"}) {
    EMBER_ASSIGN_OR_RETURN(std::vector<float> gate, RequireVectorF32(w, p + which + ".gate", h));
    std::vector<float> alpha(h), beta(h);
    kernels::FoldResidualGate(gate.data(), h, static_cast<float>(c.residual_gate_temperature), kResidualGateEps,
                              alpha.data(), beta.data());
    const bool attn = std::string(which) == "post_attention_residual_gate";
    (attn ? layer.attn_alpha : layer.ffn_alpha) = std::move(alpha);
    (attn ? layer.attn_beta : layer.ffn_beta) = std::move(beta);
  }

  // As in the reference (transformers), layer_rope_theta only switches RoPE off (0); rotating
  // layers all use the global rope_parameters.rope_theta. Create() warns if the two disagree.
  if (c.layer_rope_theta[l] > 0) {
    o.rope = RopeLayout::kRotateHalf;
    o.inv_freq.resize(c.head_dim / 2);
    kernels::RopeInverseFrequencies(c.rope_theta, c.head_dim, o.inv_freq.data());
  }

  if (c.mlp_layer_types[l] == MlpKind::kDense) {
    const int64_t inter = c.intermediate_size;
    EMBER_ASSIGN_OR_RETURN(layer.mlp.gate, LoadLinear(p + "mlp.gate_proj.weight", inter, h, s.ffn_in));
    EMBER_ASSIGN_OR_RETURN(layer.mlp.up, LoadLinear(p + "mlp.up_proj.weight", inter, h, s.ffn_in));
    EMBER_ASSIGN_OR_RETURN(layer.mlp.down, LoadLinear(p + "mlp.down_proj.weight", h, inter, s.ffn_out));
    return Status::Ok();
  }
  const int64_t e = c.num_local_experts;
  const int64_t hm = c.moe_hidden_size;
  const int64_t inter = c.moe_intermediate_size;
  EMBER_ASSIGN_OR_RETURN(layer.moe.router, LoadMatrix(w, p + "mlp.gate.weight", e, h));
  EMBER_ASSIGN_OR_RETURN(layer.moe.router_bias, RequireVectorF32(w, p + "mlp.gate.e_score_correction_bias", e));
  // The router and the latent projections stay whole on every rank: the latent norms need whole
  // latent rows, so splitting them would cost two more collectives per layer for matrices much
  // smaller than the experts.
  EMBER_ASSIGN_OR_RETURN(layer.moe.pre_expert_proj, LoadLinear(p + "mlp.pre_expert_proj.weight", hm, h, {}));
  EMBER_ASSIGN_OR_RETURN(layer.moe.pre_expert_gain, RequireVectorF32(w, p + "mlp.pre_expert_norm.weight", hm, 1.0f));
  const bool split_experts = moe_options_.tensor_parallel;
  const MatrixSplit expert_rows = split_experts ? MatrixSplit::Rows(expert_columns_) : MatrixSplit::Whole();
  const MatrixSplit expert_cols = split_experts ? MatrixSplit::Columns(expert_columns_) : MatrixSplit::Whole();
  layer.moe_options = moe_options_;
  MoeOptions& moe = layer.moe_options;
  moe.expert_owner = ExpertOwners(l);
  std::vector<int32_t> held;
  for (int64_t x = 0; x < e; ++x) {
    const bool here = moe.expert_owner.empty() || moe.expert_owner[x] == moe_comm_.rank();
    if (!moe.expert_owner.empty()) moe.local_expert.push_back(here ? static_cast<int32_t>(held.size()) : -1);
    if (here) held.push_back(static_cast<int32_t>(x));
  }
  EMBER_ASSIGN_OR_RETURN(layer.moe.experts_gate_up,
                         LoadExperts(p + "mlp.experts", "gate_up_proj", 2 * inter, hm, 2, expert_rows, held));
  EMBER_ASSIGN_OR_RETURN(layer.moe.experts_down,
                         LoadExperts(p + "mlp.experts", "down_proj", hm, inter, 1, expert_cols, held));
  EMBER_ASSIGN_OR_RETURN(layer.moe.post_expert_gain,
                         RequireVectorF32(w, p + "mlp.experts.post_expert_norm.weight", hm, 1.0f));
  EMBER_ASSIGN_OR_RETURN(layer.moe.post_expert_proj, LoadLinear(p + "mlp.post_expert_proj.weight", h, hm, {}));
  return Status::Ok();
}

void MuseSparkModel::ReportConversion() {
  if (!options_.progress) return;
  int64_t total = 0;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const bool sparse = config_.mlp_layer_types[l] == MlpKind::kSparse;
    total += sparse ? 2 : 0;
    if (options_.quantize_dense) total += 5 + (sparse ? 2 : 3);  // attention + latent or dense MLP linears
  }
  options_.progress(++converted_, total);
}

Expected<Linear> MuseSparkModel::LoadLinear(const std::string& name, int64_t rows, int64_t cols,
                                            const MatrixSplit& split) {
  if (!options_.quantization || !options_.quantize_dense) return LoadMatrix(*weights_, name, rows, cols, split);
  EMBER_ASSIGN_OR_RETURN(TensorView full, weights_->Require(name, kMatrixDTypes, Shape{rows, cols}));
  EMBER_ASSIGN_OR_RETURN(Linear linear, QuantizeLinear(full, *options_.quantization, options_.mxfp4_rounding, split));
  ReportConversion();
  return linear;
}

std::vector<int32_t> MuseSparkModel::ExpertOwners(int64_t layer) const {
  if (!expert_parallel_) return {};
  if (options_.expert_placement) {
    const std::span<const int32_t> ranks = options_.expert_placement->ranks(layer);
    return {ranks.begin(), ranks.end()};
  }
  std::vector<int32_t> owners;
  const int64_t per_rank = config_.num_local_experts / moe_comm_.world_size();
  for (int64_t e = 0; e < config_.num_local_experts; ++e) owners.push_back(static_cast<int32_t>(e / per_rank));
  return owners;
}

Expected<ExpertWeights> MuseSparkModel::LoadExperts(const std::string& module, const char* param, int64_t rows,
                                                    int64_t cols, int64_t halves, const MatrixSplit& split,
                                                    std::span<const int32_t> held) {
  const ExpertTensor t{module, param, config_.num_local_experts, rows, cols, halves};
  const bool all_experts = static_cast<int64_t>(held.size()) == t.experts;
  if (!options_.quantization) {
    if (split.whole() && all_experts) return ReadExpertWeights(*weights_, scheme_, t);
    EMBER_ASSIGN_OR_RETURN(ExpertWeights stored, ReadExpertWeights(*weights_, scheme_, t, PackForGemm::kNo));
    // Expert parallelism: this rank's whole experts (the other experts' pages are never touched).
    if (!all_experts && stored.format()) return SelectBlockScaledExperts(stored, held);
    // A shard of experts the producer quantized: this rank's block of their codes and scales.
    if (stored.format()) return SliceBlockScaledExperts(stored, split, halves);
  }
  EMBER_ASSIGN_OR_RETURN(TensorView stored, weights_->Require(t.Name(), kMatrixDTypes, Shape{t.experts, rows, cols}));
  if (!all_experts) {
    // Expert parallelism: a view of this rank's experts where they are consecutive, else a copy.
    // Experts quantize independently (NVFP4's global scales are per expert and half), so
    // converting just these gives one process's bytes for them.
    EMBER_ASSIGN_OR_RETURN(SlicedTensor mine, SelectExperts(stored, held));
    if (!options_.quantization) return ExpertWeights::Dense(mine.view, std::move(mine.owner));
    EMBER_ASSIGN_OR_RETURN(std::shared_ptr<const QuantizedStack> q,
                           QuantizeStack(mine.view, *options_.quantization, halves, options_.mxfp4_rounding));
    ReportConversion();
    return q->View(q);
  }
  if (!options_.quantization) {
    EMBER_ASSIGN_OR_RETURN(SlicedTensor sliced, SliceExpertStack(stored, split, halves));
    if (sliced.owner != nullptr) weights_->Release(stored);  // the copy is all this rank keeps
    return ExpertWeights::Dense(sliced.view, std::move(sliced.owner));
  }
  // Load-time conversion quantizes the whole stack, so a shard's scales are one process's, then cuts it.
  EMBER_ASSIGN_OR_RETURN(std::shared_ptr<const QuantizedStack> q,
                         QuantizeStack(stored, *options_.quantization, halves, options_.mxfp4_rounding));
  ReportConversion();
  if (split.whole()) return q->View(q);
  return SliceBlockScaledExperts(q->View(q, PackForGemm::kNo), split, halves);
}

namespace {

Expected<std::unique_ptr<CausalLM>> LoadMuseSparkDirectory(const std::string& dir, const LoadOptions& options) {
  EMBER_ASSIGN_OR_RETURN(MuseSparkConfig config, MuseSparkConfig::FromFile(dir + "/config.json"));
  EMBER_ASSIGN_OR_RETURN(QuantScheme scheme, ReadQuantScheme(dir));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> opened, Checkpoint::OpenDirectory(dir));
  std::shared_ptr<const Checkpoint> checkpoint(std::move(opened));
  std::shared_ptr<WeightSource> source = MakeCheckpointWeightSource(checkpoint, fmt::format("checkpoint {}", dir));
  if (scheme.quantized()) EMBER_LOG_INFO("{}: routed experts stored as {}", dir, scheme.Describe());
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MuseSparkModel> model,
                         MuseSparkModel::Create(config, source, scheme, options));
  // A tensor-parallel rank copied its column blocks out of pages it does not keep using.
  if (exec::OrLocal(options.communicator).world_size() > 1) checkpoint->DropResidentPages();
  const std::vector<std::string> unused = source->UnusedTensorNames();
  if (!unused.empty()) {
    // Multimodal checkpoints carry vision/audio towers the text decoder does not run.
    EMBER_LOG_INFO("{}: {} tensors not used by the text decoder: {}", dir, unused.size(),
                   SummarizeTensorNames(unused));
  }
  return std::unique_ptr<CausalLM>(std::move(model));
}

const bool kRegistered = RegisterArchitecture("muse_spark", LoadMuseSparkDirectory) &&
                         RegisterArchitecture("muse_spark_text", LoadMuseSparkDirectory);

}  // namespace
}  // namespace ember
