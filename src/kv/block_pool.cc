#include "kv/block_pool.h"

#include <fmt/format.h>

#include "core/check.h"

namespace ember::kv {

BlockPool::BlockPool(int64_t num_blocks) : blocks_(num_blocks) {
  EMBER_CHECK(num_blocks >= 2, "a block pool needs the null block and at least one more, got {}", num_blocks);
  for (BlockId b = 1; b < num_blocks; ++b) PushBack(b);
}

bool BlockPool::InFreeQueue(BlockId block) const {
  // A block sits in the free queue exactly while nothing references it (CheckInvariants).
  return block != kNullBlock && blocks_[block].ref_count == 0;
}

void BlockPool::Unlink(BlockId block) {
  Block& b = blocks_[block];
  blocks_[b.prev].next = b.next;
  blocks_[b.next].prev = b.prev;
  b.prev = b.next = kNullBlock;
  --num_free_;
}

void BlockPool::PushBack(BlockId block) {
  Block& sentinel = blocks_[kNullBlock];
  Block& b = blocks_[block];
  b.prev = sentinel.prev;
  b.next = kNullBlock;
  blocks_[sentinel.prev].next = block;
  sentinel.prev = block;
  ++num_free_;
}

void BlockPool::Evict(BlockId block) {
  Block& b = blocks_[block];
  if (!b.cached) return;
  cached_.erase(CacheKey{b.hash, b.group});
  b.cached = false;
  b.group = -1;
  b.hash = {};
}

std::vector<BlockId> BlockPool::Allocate(int64_t n) {
  EMBER_CHECK(n <= num_free_, "allocating {} blocks with {} free", n, num_free_);
  std::vector<BlockId> out;
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const BlockId block = blocks_[kNullBlock].next;  // the head
    Unlink(block);
    Evict(block);
    blocks_[block].ref_count = 1;
    out.push_back(block);
  }
  return out;
}

void BlockPool::Touch(BlockId block) {
  EMBER_CHECK(block > kNullBlock && block < num_blocks(), "touching block {}", block);
  if (InFreeQueue(block)) Unlink(block);
  ++blocks_[block].ref_count;
}

void BlockPool::Release(BlockId block) {
  EMBER_CHECK(block > kNullBlock && block < num_blocks(), "releasing block {}", block);
  Block& b = blocks_[block];
  EMBER_CHECK(b.ref_count > 0, "block {} released more often than referenced", block);
  if (--b.ref_count == 0) PushBack(block);
}

bool BlockPool::CacheBlock(BlockId block, const BlockHash& hash, int group) {
  Block& b = blocks_[block];
  EMBER_CHECK(block > kNullBlock && b.ref_count > 0 && !b.cached, "caching block {}", block);
  if (!cached_.try_emplace(CacheKey{hash, group}, block).second) return false;
  b.cached = true;
  b.group = group;
  b.hash = hash;
  return true;
}

std::optional<BlockId> BlockPool::Lookup(const BlockHash& hash, int group) const {
  const auto it = cached_.find(CacheKey{hash, group});
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::ResetPrefixCache() {
  for (auto& [key, block] : cached_) {
    blocks_[block].cached = false;
    blocks_[block].group = -1;
    blocks_[block].hash = {};
  }
  cached_.clear();
}

std::vector<BlockId> BlockPool::FreeQueue() const {
  std::vector<BlockId> out;
  for (BlockId b = blocks_[kNullBlock].next; b != kNullBlock; b = blocks_[b].next) out.push_back(b);
  return out;
}

Status BlockPool::CheckInvariants() const {
  if (blocks_[kNullBlock].ref_count != 0 || blocks_[kNullBlock].cached) {
    return Internal("the null block was referenced or cached");
  }
  // Walk the free queue both ways; every free block appears once, every member is free.
  std::vector<bool> seen(blocks_.size(), false);
  int64_t count = 0;
  BlockId prev = kNullBlock;
  for (BlockId b = blocks_[kNullBlock].next; b != kNullBlock; prev = b, b = blocks_[b].next) {
    if (b < 0 || b >= num_blocks() || seen[b]) return Internal(fmt::format("free queue corrupt at block {}", b));
    if (blocks_[b].prev != prev) return Internal(fmt::format("free queue back link of block {} is wrong", b));
    if (blocks_[b].ref_count != 0) {
      return Internal(fmt::format("block {} is in the free queue with {} references", b, blocks_[b].ref_count));
    }
    seen[b] = true;
    ++count;
  }
  if (blocks_[kNullBlock].prev != prev) return Internal("free queue tail link is wrong");
  if (count != num_free_) return Internal(fmt::format("free queue holds {} blocks, counter says {}", count, num_free_));
  int64_t num_cached = 0;
  for (BlockId b = 1; b < num_blocks(); ++b) {
    const Block& blk = blocks_[b];
    if (blk.ref_count < 0) return Internal(fmt::format("block {} has {} references", b, blk.ref_count));
    if (blk.ref_count == 0 && !seen[b]) return Internal(fmt::format("block {} is unreferenced but not free", b));
    if (blk.cached) {
      ++num_cached;
      const auto found = Lookup(blk.hash, blk.group);
      if (!found || *found != b) return Internal(fmt::format("cached block {} is missing from the map", b));
    }
  }
  if (num_cached != static_cast<int64_t>(cached_.size())) {
    return Internal(fmt::format("cache map has {} entries, {} blocks are cached", cached_.size(), num_cached));
  }
  return Status::Ok();
}

}  // namespace ember::kv
