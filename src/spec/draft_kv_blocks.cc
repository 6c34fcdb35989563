#include "spec/draft_kv_blocks.h"

#include "core/check.h"

namespace ember::spec {

DraftKvBlocks::DraftKvBlocks(int64_t num_blocks, int64_t num_groups, int64_t block_size)
    : num_groups_(num_groups), block_size_(block_size) {
  EMBER_CHECK(num_blocks >= 1 && num_groups >= 1 && block_size >= 1);
  free_.reserve(num_blocks - 1);
  // Highest id first, so blocks are handed out from id 1 up (easier to read in a debugger).
  for (int64_t id = num_blocks - 1; id >= 1; --id) free_.push_back(static_cast<kv::BlockId>(id));
}

bool DraftKvBlocks::Grow(DraftBlockTables& tables, int64_t num_tokens) {
  EMBER_CHECK(tables.empty() || static_cast<int64_t>(tables.size()) == num_groups_);
  const int64_t want = (num_tokens + block_size_ - 1) / block_size_;
  const int64_t have = tables.empty() ? 0 : static_cast<int64_t>(tables.front().size());
  if (want <= have) return true;
  if ((want - have) * num_groups_ > num_free_blocks()) return false;
  tables.resize(num_groups_);
  for (std::vector<kv::BlockId>& blocks : tables) {
    for (int64_t j = have; j < want; ++j) {
      blocks.push_back(free_.back());
      free_.pop_back();
    }
  }
  return true;
}

void DraftKvBlocks::Free(DraftBlockTables& tables) {
  for (std::vector<kv::BlockId>& blocks : tables) free_.insert(free_.end(), blocks.rbegin(), blocks.rend());
  tables.clear();
}

}  // namespace ember::spec
