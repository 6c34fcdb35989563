#include "support/single_sequence.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace ember::test {

Expected<SingleSequence> SingleSequence::Create(CausalLM* model, int64_t capacity, kv::KvDtype dtype,
                                                int64_t block_size) {
  capacity = std::min(capacity, model->info().max_position_embeddings);
  if (capacity <= 0) return InvalidArgument(fmt::format("a sequence needs room for at least one token, got {}", capacity));
  EMBER_ASSIGN_OR_RETURN(kv::KvCacheConfig config, kv::PlanKvGroups(model->KvLayerSpecs(), block_size, dtype));
  const int64_t blocks_per_group = (capacity + block_size - 1) / block_size;
  config.num_blocks = 1 + blocks_per_group * static_cast<int64_t>(config.groups.size());
  EMBER_ASSIGN_OR_RETURN(KvStore kv, KvStore::Create(std::move(config)));
  return SingleSequence(model, std::move(kv), capacity);
}

SingleSequence::SingleSequence(CausalLM* model, KvStore kv, int64_t capacity)
    : model_(model), kv_(std::move(kv)), capacity_(capacity) {
  const kv::KvCacheConfig& c = kv_.config();
  const int64_t blocks_per_group = (capacity_ + c.block_size - 1) / c.block_size;
  batch_.groups.resize(c.groups.size());
  for (size_t g = 0; g < c.groups.size(); ++g) {
    KvGroupTable& table = batch_.groups[g];
    table.max_blocks_per_req = static_cast<int32_t>(blocks_per_group);
    table.block_table.resize(blocks_per_group);
    std::iota(table.block_table.begin(), table.block_table.end(), static_cast<int32_t>(1 + g * blocks_per_group));
  }
}

Status SingleSequence::Append(const int32_t* tokens, int64_t count, bool all_logits, std::vector<float>* logits) {
  if (count <= 0) return InvalidArgument("Forward: no tokens");
  const int64_t end = num_tokens_ + count;
  if (end > capacity_) {
    return OutOfRange(fmt::format("sequence of {} tokens exceeds the {} tokens of KV cache reserved for it", end,
                                  capacity_));
  }
  const int64_t bs = kv_.config().block_size;
  batch_.token_ids.assign(tokens, tokens + count);
  batch_.positions.resize(count);
  std::iota(batch_.positions.begin(), batch_.positions.end(), static_cast<int32_t>(num_tokens_));
  batch_.query_start_loc = {0, static_cast<int32_t>(count)};
  batch_.seq_lens = {static_cast<int32_t>(end)};
  for (KvGroupTable& table : batch_.groups) {
    table.slot_mapping.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t position = num_tokens_ + i;
      table.slot_mapping[i] = int64_t{table.block_table[position / bs]} * bs + position % bs;
    }
  }
  batch_.logits_indices.resize(all_logits ? count : 1);
  std::iota(batch_.logits_indices.begin(), batch_.logits_indices.end(), static_cast<int32_t>(all_logits ? 0 : count - 1));
  const Status status = model_->Forward(batch_, kv_, &output_);
  batch_.embedding_rows.clear();
  batch_.input_embeddings.clear();
  EMBER_RETURN_IF_ERROR(status);
  logits->swap(output_.logits);
  num_tokens_ = end;
  return Status::Ok();
}

}  // namespace ember::test
