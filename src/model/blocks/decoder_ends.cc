#include "model/blocks/decoder_ends.h"

#include <algorithm>

#include "core/op_trace.h"
#include "kernels/ops.h"

namespace ember {

Status EmbedInputs(const Linear& table, const TokenEmbedding& embedding, const ForwardBatch& batch, int64_t hidden,
                   float* residual) {
  ScopedOp op("embed");
  const int64_t count = batch.num_tokens();
  size_t given = 0;
  for (int64_t i = 0; i < count; ++i) {
    float* row = residual + i * hidden;
    if (given < batch.embedding_rows.size() && batch.embedding_rows[given] == i) {
      std::copy_n(batch.input_embeddings.data() + given * hidden, hidden, row);
      ++given;
      continue;
    }
    EMBER_RETURN_IF_ERROR(table.ReadRow(batch.token_ids[i], row));
    if (embedding.scale != 1.0f) {
      for (int64_t j = 0; j < hidden; ++j) row[j] *= embedding.scale;
    }
    // Row-wise, so one row at a time gives the bits of the whole batch at once.
    if (embedding.norm_eps >= 0) kernels::RmsNorm(row, 1, hidden, embedding.norm_eps, row);
  }
  return Status::Ok();
}

HiddenStateTap::HiddenStateTap(const ForwardBatch& batch, int64_t hidden, ForwardOutput* out)
    : layers_(batch.hidden_state_layers), block_floats_(batch.num_tokens() * hidden) {
  out->hidden_states.resize(layers_.size() * block_floats_);
  out_ = out->hidden_states.data();
}

void HiddenStateTap::AfterLayer(int64_t layer, const float* residual) {
  if (next_ >= layers_.size() || layers_[next_] != layer) return;
  std::copy_n(residual, block_floats_, out_ + next_ * block_floats_);
  ++next_;
}

void RunHead(const HeadOptions& options, const Linear& lm_head, const ForwardBatch& batch, int64_t hidden,
             const float* residual, ForwardOutput* out) {
  ScopedOp op("lm_head");
  const int64_t rows = static_cast<int64_t>(batch.logits_indices.size());
  const int64_t vocab = lm_head.out_features();
  std::vector<float> selected(rows * hidden), normed(rows * hidden);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(residual + batch.logits_indices[r] * hidden, hidden, selected.data() + r * hidden);
  }
  kernels::RmsNormGain(selected.data(), rows, hidden, options.norm_eps, options.final_gain, normed.data());
  out->logits.resize(rows * vocab);
  lm_head.Apply(normed.data(), rows, out->logits.data());
  if (options.logit_scale != 1.0f || options.logit_softcap > 0) {
    kernels::ScaleSoftcapInPlace(out->logits.data(), rows * vocab, options.logit_scale, options.logit_softcap);
  }
}

}  // namespace ember
