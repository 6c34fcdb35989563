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

Status LoadGgufEmbeddingsAndHead(const GgufWeights& w, DenseDecoderSpec& spec) {
  const GgufFile& file = w.file();
  const GgufTensor* embed = file.FindTensor("token_embd.weight");
  if (embed == nullptr || embed->dims.size() != 2) {
    return InvalidArgument(fmt::format("{}: token_embd.weight is missing or not 2-D", file.path()));
  }
  const int64_t vocab = embed->dims[1];
  EMBER_ASSIGN_OR_RETURN(spec.embed_tokens, w.Matrix("token_embd.weight", vocab, spec.hidden_size));
  spec.tied_embeddings = !w.Has("output.weight");
  if (spec.tied_embeddings) {
    spec.lm_head = spec.embed_tokens;
  } else {
    EMBER_ASSIGN_OR_RETURN(spec.lm_head, w.Matrix("output.weight", vocab, spec.hidden_size));
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

Status LoadGgufAttention(const GgufWeights& w, int64_t l, int64_t h, const AttentionOptions& o, AttentionWeights& a) {
  const std::string p = fmt::format("blk.{}.", l);
  EMBER_ASSIGN_OR_RETURN(a.q, w.Matrix(p + "attn_q.weight", o.num_heads * o.head_dim, h));
  EMBER_ASSIGN_OR_RETURN(a.k, w.Matrix(p + "attn_k.weight", o.num_kv_heads * o.head_dim, h));
  EMBER_ASSIGN_OR_RETURN(a.v, w.Matrix(p + "attn_v.weight", o.num_kv_heads * o.head_dim, h));
  EMBER_ASSIGN_OR_RETURN(a.o, w.Matrix(p + "attn_output.weight", h, o.num_heads * o.head_dim));
  return Status::Ok();
}

Status LoadGgufMlp(const GgufWeights& w, int64_t l, int64_t hidden, int64_t intermediate, DenseDecoderLayer& layer) {
  const std::string p = fmt::format("blk.{}.", l);
  EMBER_ASSIGN_OR_RETURN(layer.mlp.gate, w.Matrix(p + "ffn_gate.weight", intermediate, hidden));
  EMBER_ASSIGN_OR_RETURN(layer.mlp.up, w.Matrix(p + "ffn_up.weight", intermediate, hidden));
  EMBER_ASSIGN_OR_RETURN(layer.mlp.down, w.Matrix(p + "ffn_down.weight", hidden, intermediate));
  return Status::Ok();
}

}  // namespace ember
