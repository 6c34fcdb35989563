// What the model runner hands the model for one step (reference/codebases.md §9.3): the tokens of
// every scheduled request flattened into one batch, their positions, and per KV group the block
// tables and slot mapping the paged attention kernels read. Passed explicitly into
// CausalLM::Forward; there is no global context.
#pragma once

#include <cstdint>
#include <vector>

namespace ember {

struct KvGroupTable {
  // [num_reqs * max_blocks_per_req]: request r's block for positions
  // [j*block_size, (j+1)*block_size) is block_table[r*max_blocks_per_req + j]. Sliding-window
  // groups may hold released (null or stale) ids outside the window; kernels never read them.
  std::vector<int32_t> block_table;
  int32_t max_blocks_per_req = 0;
  // [num_tokens]: the slot (block * block_size + offset) each new token's K/V is written to.
  std::vector<int64_t> slot_mapping;
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;        // [num_tokens]
  std::vector<int32_t> positions;        // [num_tokens]
  std::vector<int32_t> query_start_loc;  // [num_reqs + 1]: request r's tokens are [qsl[r], qsl[r+1])
  std::vector<int32_t> seq_lens;         // [num_reqs]: context length after this step's tokens
  std::vector<KvGroupTable> groups;      // one per KV group of the model's KvCacheConfig
  std::vector<int32_t> logits_indices;   // rows of the batch whose logits the caller wants
  // Decoder layers (0-based, increasing) after which the caller wants every token's hidden state
  // in ForwardOutput::hidden_states; empty for none (speculative drafters read these).
  std::vector<int32_t> hidden_state_layers;
  // Rows whose input is an embedding instead of a token id (multimodal placeholders replaced by
  // encoder features), increasing: row embedding_rows[i] takes the hidden_size floats at
  // input_embeddings[i * hidden_size] in place of its token's embedding, used as given, as
  // transformers uses inputs_embeds: what the model's embedding module does to token rows
  // (Gemma's sqrt(hidden) scale, Muse Spark's norm) is not applied to it. token_ids keeps a
  // valid id at those rows (the placeholder's).
  std::vector<int32_t> embedding_rows;
  std::vector<float> input_embeddings;   // [embedding_rows.size(), hidden_size]

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_reqs() const { return static_cast<int64_t>(seq_lens.size()); }
};

}  // namespace ember
