#include "model/blocks/decoder_ends.h"

#include <algorithm>

#include "core/op_trace.h"
#include "kernels/ops.h"

namespace ember {

Status EmbedInputs(const Linear& table, const TokenEmbedding& embedding, const VocabSlice& vocab,
                   const ForwardBatch& batch, int64_t hidden, exec::Communicator& comm, float* residual) {
  ScopedOp op("embed");
  const int64_t count = batch.num_tokens();
  if (!vocab.sharded()) {
    size_t given = 0;
    for (int64_t i = 0; i < count; ++i) {
      float* row = residual + i * hidden;
      if (given < batch.embedding_rows.size() && batch.embedding_rows[given] == i) {
        std::copy_n(batch.input_embeddings.data() + given * hidden, hidden, row);
        ++given;
        continue;
      }
      EMBER_RETURN_IF_ERROR(EmbedToken(table, embedding, batch.token_ids[i], hidden, row));
    }
    return Status::Ok();
  }
  // Token ids were checked against the whole vocabulary (CheckForwardBatch), so every token lies
  // in exactly one rank's block.
  std::fill_n(residual, count * hidden, 0.0f);
  size_t given = 0;
  for (int64_t i = 0; i < count; ++i) {
    float* row = residual + i * hidden;
    if (given < batch.embedding_rows.size() && batch.embedding_rows[given] == i) {
      if (comm.rank() == 0) std::copy_n(batch.input_embeddings.data() + given * hidden, hidden, row);
      ++given;
      continue;
    }
    const int64_t token = batch.token_ids[i];
    if (token >= vocab.shard.begin && token < vocab.shard.end()) {
      EMBER_RETURN_IF_ERROR(table.ReadRow(token - vocab.shard.begin, row));
    }
  }
  comm.AllReduceSum(residual, count * hidden);
  given = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (given < batch.embedding_rows.size() && batch.embedding_rows[given] == i) {
      ++given;
      continue;
    }
    float* row = residual + i * hidden;
    if (embedding.scale != 1.0f) kernels::ScaleInPlace(row, hidden, embedding.scale);
    if (embedding.norm_eps >= 0) kernels::RmsNorm(row, 1, hidden, embedding.norm_eps, row);
  }
  return Status::Ok();
}

Status EmbedToken(const Linear& table, const TokenEmbedding& embedding, int32_t token, int64_t hidden, float* out) {
  EMBER_RETURN_IF_ERROR(table.ReadRow(token, out));
  if (embedding.scale != 1.0f) kernels::ScaleInPlace(out, hidden, embedding.scale);
  // Row-wise, so one row at a time gives the bits of the whole batch at once.
  if (embedding.norm_eps >= 0) kernels::RmsNorm(out, 1, hidden, embedding.norm_eps, out);
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

namespace {
// Message tags of the pipeline's two streams (user tags of exec::Communicator).
constexpr int kTagResidual = 1;
constexpr int kTagLogits = 2;
}  // namespace

void ReceiveResidual(const PipelineStage& stage, float* residual, int64_t count) {
  ScopedOp op("pipeline.receive");
  stage.comm->Recv(residual, count * static_cast<int64_t>(sizeof(float)), stage.previous, kTagResidual);
}

void SendResidual(const PipelineStage& stage, const float* residual, int64_t count) {
  ScopedOp op("pipeline.send");
  stage.comm->Send(residual, count * static_cast<int64_t>(sizeof(float)), stage.next, kTagResidual);
}

void SendLogits(const PipelineStage& stage, const ForwardOutput& out) {
  ScopedOp op("pipeline.send_logits");
  stage.comm->Send(out.logits.data(), static_cast<int64_t>(out.logits.size() * sizeof(float)), stage.logits_to,
                   kTagLogits);
}

void ReceiveLogits(const PipelineStage& stage, int64_t rows, int64_t vocab, ForwardOutput* out) {
  ScopedOp op("pipeline.receive_logits");
  out->logits.resize(rows * vocab);
  stage.comm->Recv(out->logits.data(), rows * vocab * static_cast<int64_t>(sizeof(float)), stage.logits_from,
                   kTagLogits);
}

int64_t HeadWorkspaceBytes(int64_t rows, int64_t hidden, const VocabSlice& vocab) {
  const int64_t normed = Workspace::BytesFor<float>(rows * hidden);
  if (!vocab.sharded()) return normed;
  return normed + Workspace::BytesFor<float>(rows * vocab.shard.count);
}

int64_t DecoderWorkspaceBytes(int64_t tokens, int64_t logit_rows, int64_t hidden, int64_t largest_block_bytes,
                              const VocabSlice& vocab) {
  const int64_t residual = Workspace::BytesFor<float>(tokens * hidden);
  return residual + StepContext::WorkspaceBytes(tokens) +
         std::max(2 * residual + largest_block_bytes, HeadWorkspaceBytes(logit_rows, hidden, vocab));
}

void RunHead(const HeadOptions& options, const Linear& lm_head, const VocabSlice& slice, const StepContext& step,
             const float* residual, ForwardOutput* out) {
  ScopedOp op("lm_head");
  const std::vector<int32_t>& indices = step.batch.logits_indices;
  const int64_t rows = static_cast<int64_t>(indices.size());
  const int64_t hidden = lm_head.in_features();
  const int64_t vocab = slice.vocab_size;
  Workspace::Scope scope(step.workspace);
  float* normed = step.workspace.Take<float>(rows * hidden);
  // Row-wise norm, so norming the selected rows one by one gives the bits of norming them together.
  for (int64_t r = 0; r < rows; ++r) {
    kernels::RmsNormGain(residual + indices[r] * hidden, 1, hidden, options.norm_eps, options.final_gain,
                         normed + r * hidden);
  }
  out->logits.resize(rows * vocab);
  if (!slice.sharded()) {
    lm_head.Apply(normed, rows, out->logits.data());
  } else {
    // Each rank scores its block; the gather lands rank after rank, so each row is reassembled
    // from the world's blocks in vocabulary order.
    const int64_t block = slice.shard.count;
    const int64_t world = step.comm.world_size();
    float* mine = step.workspace.Take<float>(rows * block);
    out->gathered_logits.resize(rows * vocab);
    float* gathered = out->gathered_logits.data();
    lm_head.Apply(normed, rows, mine);
    step.comm.AllGather(mine, rows * block, gathered);
    for (int64_t r = 0; r < world; ++r) {
      for (int64_t i = 0; i < rows; ++i) {
        std::copy_n(gathered + (r * rows + i) * block, block, out->logits.data() + i * vocab + r * block);
      }
    }
  }
  if (options.logit_scale != 1.0f || options.logit_softcap > 0) {
    kernels::ScaleSoftcapInPlace(out->logits.data(), rows * vocab, options.logit_scale, options.logit_softcap);
  }
}

}  // namespace ember
