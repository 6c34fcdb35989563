#include "model/arch/gguf_common.h"

#include <fmt/format.h>

namespace ember {

Expected<GgufWeights> OpenGgufModel(const std::string& path, const std::string& expected_arch) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  GgufWeights weights(std::shared_ptr<const GgufFile>(std::move(file)));
  EMBER_RETURN_IF_ERROR(weights.ReadArchitecture());
  if (weights.architecture() != expected_arch) {
    return InvalidArgument(fmt::format("{}: architecture is {}, expected {}", path, weights.architecture(),
                                       expected_arch));
  }
  return weights;
}

Status LoadGgufEmbeddingsAndHead(const GgufWeights& w, const LoadOptions& options, int64_t num_layers,
                                 DenseDecoderSpec& spec) {
  const GgufFile& file = w.file();
  const GgufTensor* embed = file.FindTensor("token_embd.weight");
  if (embed == nullptr || embed->dims.size() != 2) {
    return InvalidArgument(fmt::format("{}: token_embd.weight is missing or not 2-D", file.path()));
  }
  const int64_t vocab = embed->dims[1];
  spec.communicator = options.communicator;
  EMBER_ASSIGN_OR_RETURN(spec.pipeline, options.pipeline.ForModel(num_layers));
  spec.vocab_shard = VocabShard(vocab, TensorParallelRank::Of(exec::OrLocal(options.communicator)));
  const MatrixSplit rows = MatrixSplit::Rows(spec.vocab_shard);
  // Only the first pipeline stage embeds and only the last runs the head.
  if (options.pipeline.first()) {
    EMBER_ASSIGN_OR_RETURN(spec.embed_tokens, w.Matrix("token_embd.weight", vocab, spec.hidden_size, rows));
  }
  spec.tied_embeddings = !w.Has("output.weight");
  if (options.pipeline.last() && spec.tied_embeddings && options.pipeline.first()) {
    spec.lm_head = spec.embed_tokens;
  } else if (options.pipeline.last()) {
    EMBER_ASSIGN_OR_RETURN(spec.lm_head, w.Matrix(spec.tied_embeddings ? "token_embd.weight" : "output.weight", vocab,
                                                  spec.hidden_size, rows));
  }
  EMBER_ASSIGN_OR_RETURN(spec.final_norm, w.Vector("output_norm.weight", spec.hidden_size));
  spec.info.architecture = w.architecture();
  spec.info.vocab_size = vocab;
  spec.info.max_position_embeddings = w.IntOr("context_length", 4096);
  spec.info.bos_token_id = file.GetInt("tokenizer.ggml.bos_token_id").value_or(-1);
  const int64_t eos = file.GetInt("tokenizer.ggml.eos_token_id").value_or(-1);
  if (eos >= 0) spec.info.eos_token_ids.push_back(eos);
  const int64_t eot = file.GetInt("tokenizer.ggml.eot_token_id").value_or(-1);
  if (eot >= 0 && eot != eos) spec.info.eos_token_ids.push_back(eot);
  spec.keep_alive = w.shared_file();
  return Status::Ok();
}

Expected<LayerSplits> SplitGgufLayer(const GgufLayerShape& shape, const LoadOptions& options, AttentionOptions& o) {
  const TensorParallelRank tp = TensorParallelRank::Of(exec::OrLocal(options.communicator));
  EMBER_ASSIGN_OR_RETURN(LayerSplits splits,
                         SplitLayer(shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.intermediate, tp));
  o.num_heads = splits.heads.q_heads.count;
  o.num_kv_heads = splits.heads.kv_heads.count;
  o.head_dim = shape.head_dim;
  return splits;
}

Status LoadGgufAttention(const GgufWeights& w, int64_t l, const GgufLayerShape& s, const LayerSplits& splits,
                         AttentionWeights& a) {
  const std::string p = fmt::format("blk.{}.", l);
  const int64_t q_width = s.num_heads * s.head_dim, kv_width = s.num_kv_heads * s.head_dim;
  EMBER_ASSIGN_OR_RETURN(a.q, w.Matrix(p + "attn_q.weight", q_width, s.hidden, splits.q));
  EMBER_ASSIGN_OR_RETURN(a.k, w.Matrix(p + "attn_k.weight", kv_width, s.hidden, splits.kv));
  EMBER_ASSIGN_OR_RETURN(a.v, w.Matrix(p + "attn_v.weight", kv_width, s.hidden, splits.kv));
  EMBER_ASSIGN_OR_RETURN(a.o, w.Matrix(p + "attn_output.weight", s.hidden, q_width, splits.o));
  return Status::Ok();
}

Status LoadGgufMlp(const GgufWeights& w, int64_t l, const GgufLayerShape& s, const LayerSplits& splits,
                   DenseDecoderLayer& layer) {
  const std::string p = fmt::format("blk.{}.", l);
  EMBER_ASSIGN_OR_RETURN(layer.mlp.gate, w.Matrix(p + "ffn_gate.weight", s.intermediate, s.hidden, splits.ffn_in));
  EMBER_ASSIGN_OR_RETURN(layer.mlp.up, w.Matrix(p + "ffn_up.weight", s.intermediate, s.hidden, splits.ffn_in));
  EMBER_ASSIGN_OR_RETURN(layer.mlp.down, w.Matrix(p + "ffn_down.weight", s.hidden, s.intermediate, splits.ffn_out));
  return Status::Ok();
}

}  // namespace ember
