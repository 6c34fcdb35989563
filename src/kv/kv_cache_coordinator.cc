#include "kv/kv_cache_coordinator.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"

namespace ember::kv {

KvCacheCoordinator::KvCacheCoordinator(const KvCacheConfig& config)
    : pool_(config.num_blocks), block_size_(config.block_size) {
  EMBER_CHECK(!config.groups.empty(), "a KV cache needs at least one group");
  for (size_t g = 0; g < config.groups.size(); ++g) {
    managers_.push_back(MakeSingleTypeManager(config.groups[g], static_cast<int>(g), block_size_, pool_));
    hit_order_.push_back(static_cast<int>(g));
  }
  // Full attention first: its hit is a plain prefix and bounds everything else cheaply.
  std::stable_sort(hit_order_.begin(), hit_order_.end(), [&](int a, int b) {
    return config.groups[a].kind == AttentionKind::kFull && config.groups[b].kind != AttentionKind::kFull;
  });
}

CacheHit KvCacheCoordinator::FindLongestHit(std::span<const BlockHash> hashes, int64_t max_blocks) const {
  int64_t length = std::min<int64_t>(max_blocks, static_cast<int64_t>(hashes.size()));
  CacheHit hit;
  hit.blocks.per_group.resize(managers_.size());
  // Each group answers within the current length and may shorten it; repeat until a whole pass
  // agrees, so every group's list ends at the same block.
  for (bool changed = true; changed;) {
    changed = false;
    for (int g : hit_order_) {
      hit.blocks.per_group[g] = managers_[g]->FindLongestHit(hashes, length);
      const int64_t found = static_cast<int64_t>(hit.blocks.per_group[g].size());
      if (found < length) {
        length = found;
        changed = true;
      }
    }
  }
  hit.num_tokens = length * block_size_;
  return hit;
}

std::optional<KvBlocks> KvCacheCoordinator::AllocateSlots(uint64_t request, int64_t num_computed_tokens,
                                                          int64_t num_tokens, const CacheHit* hit) {
  const auto it = requests_.find(request);
  const bool is_new = it == requests_.end();
  const int num_groups = this->num_groups();
  const bool has_hit = is_new && hit != nullptr && hit->num_tokens > 0;
  if (is_new) {
    EMBER_CHECK(num_computed_tokens == (has_hit ? hit->num_tokens : 0),
                "request {} starts at {} computed tokens but its cache hit covers {}", request, num_computed_tokens,
                has_hit ? hit->num_tokens : 0);
  }
  if (has_hit) {
    EMBER_CHECK(static_cast<int>(hit->blocks.per_group.size()) == num_groups, "cache hit has {} groups, not {}",
                hit->blocks.per_group.size(), num_groups);
    for (int g = 0; g < num_groups; ++g) {
      EMBER_CHECK(static_cast<int64_t>(hit->blocks.per_group[g].size()) * block_size_ == hit->num_tokens,
                  "cache hit group {} has {} blocks for {} tokens", g, hit->blocks.per_group[g].size(), hit->num_tokens);
      for (BlockId b : hit->blocks.per_group[g]) {
        EMBER_CHECK(b == kNullBlock || pool_.IsCached(b),
                    "cache hit block {} was evicted: call FindCachedPrefix right before AllocateSlots", b);
      }
    }
  }

  // Plan every group first so that a short pool changes nothing.
  static const std::vector<BlockId> kEmpty;
  std::vector<GroupAllocationPlan> plans(num_groups);
  int64_t needed = 0;
  int64_t available = pool_.num_free_blocks();
  for (int g = 0; g < num_groups; ++g) {
    const std::vector<BlockId>& held =
        is_new ? (has_hit ? hit->blocks.per_group[g] : kEmpty) : it->second.blocks.per_group[g];
    plans[g] = managers_[g]->Plan(held, is_new, num_computed_tokens, num_tokens);
    needed += plans[g].num_new + plans[g].num_touched_free;
    available += plans[g].num_released_free;
  }
  if (needed > available) return std::nullopt;

  RequestBlocks* state;
  std::vector<size_t> old_sizes(num_groups, 0);
  if (is_new) {
    state = &requests_[request];
    state->blocks.per_group.resize(num_groups);
    state->num_cached.assign(num_groups, 0);
    if (has_hit) {
      state->blocks = hit->blocks;
      // Hit blocks are cached already (or null, which never will be).
      state->num_cached.assign(num_groups, hit->num_tokens / block_size_);
    }
  } else {
    state = &it->second;
    for (int g = 0; g < num_groups; ++g) old_sizes[g] = state->blocks.per_group[g].size();
  }
  for (int g = 0; g < num_groups; ++g) {
    managers_[g]->SettleHeldBlocks(plans[g], is_new, state->blocks.per_group[g]);
  }
  KvBlocks appended;
  appended.per_group.resize(num_groups);
  for (int g = 0; g < num_groups; ++g) {
    std::vector<BlockId>& list = state->blocks.per_group[g];
    managers_[g]->AppendNewBlocks(plans[g], list);
    appended.per_group[g].assign(list.begin() + static_cast<std::ptrdiff_t>(old_sizes[g]), list.end());
  }
  return appended;
}

void KvCacheCoordinator::CacheFullBlocks(uint64_t request, std::span<const BlockHash> hashes,
                                         int64_t num_full_blocks) {
  const auto it = requests_.find(request);
  EMBER_CHECK(it != requests_.end(), "CacheFullBlocks for request {}, which holds no blocks", request);
  RequestBlocks& state = it->second;
  for (int g = 0; g < num_groups(); ++g) {
    managers_[g]->CacheFullBlocks(state.blocks.per_group[g], hashes, num_full_blocks, &state.num_cached[g]);
  }
}

void KvCacheCoordinator::Free(uint64_t request) {
  const auto it = requests_.find(request);
  if (it == requests_.end()) return;  // never allocated (e.g. aborted while waiting)
  // Last position first, across all groups at each position: released blocks join the free
  // queue's tail in that order, so a sequence's tail is evicted before its head (which more
  // prompts share), and every group keeps the same prefix as long as possible (a hybrid hit
  // needs all of them).
  std::vector<std::vector<BlockId>>& lists = it->second.blocks.per_group;
  size_t longest = 0;
  for (const auto& list : lists) longest = std::max(longest, list.size());
  for (size_t j = longest; j-- > 0;) {
    for (const auto& list : lists) {
      if (j < list.size() && list[j] != kNullBlock) pool_.Release(list[j]);
    }
  }
  requests_.erase(it);
}

std::vector<int32_t> KvCacheCoordinator::TrimTo(uint64_t request, int64_t num_tokens) {
  const auto it = requests_.find(request);
  EMBER_CHECK(it != requests_.end(), "TrimTo for request {}, which holds no blocks", request);
  const size_t keep = static_cast<size_t>((num_tokens + block_size_ - 1) / block_size_);
  RequestBlocks& state = it->second;
  bool changed = false;
  for (const auto& list : state.blocks.per_group) changed |= list.size() > keep;
  if (!changed) return {};
  std::vector<int32_t> kept;
  for (int g = 0; g < num_groups(); ++g) {
    std::vector<BlockId>& list = state.blocks.per_group[g];
    while (list.size() > keep) {
      // Never cached: only blocks full of verified tokens are, and these lie past them.
      if (list.back() != kNullBlock) pool_.Release(list.back());
      list.pop_back();
    }
    state.num_cached[g] = std::min<int64_t>(state.num_cached[g], static_cast<int64_t>(list.size()));
    kept.push_back(static_cast<int32_t>(list.size()));
  }
  return kept;
}

const KvBlocks& KvCacheCoordinator::Blocks(uint64_t request) const {
  const auto it = requests_.find(request);
  EMBER_CHECK(it != requests_.end(), "request {} holds no KV blocks", request);
  return it->second.blocks;
}

Status KvCacheCoordinator::CheckInvariants() const {
  if (Status s = pool_.CheckInvariants(); !s.ok()) return s;
  // Every reference the pool counts is one entry of one request's list, and a block serves one
  // group at a time (it is one slice of tensors shared by every group).
  std::vector<int32_t> refs(pool_.num_blocks(), 0);
  std::vector<int> group_of(pool_.num_blocks(), -1);
  for (const auto& [request, state] : requests_) {
    if (static_cast<int>(state.blocks.per_group.size()) != num_groups()) {
      return Internal(fmt::format("request {} has {} block lists", request, state.blocks.per_group.size()));
    }
    for (int g = 0; g < num_groups(); ++g) {
      const std::vector<BlockId>& list = state.blocks.per_group[g];
      std::vector<BlockId> sorted;
      for (BlockId b : list) {
        if (b == kNullBlock) continue;
        if (b < 0 || b >= pool_.num_blocks()) return Internal(fmt::format("request {} holds block id {}", request, b));
        if (group_of[b] != -1 && group_of[b] != g) {
          return Internal(fmt::format("block {} is in groups {} and {}", b, group_of[b], g));
        }
        if (pool_.IsCached(b) && pool_.CachedGroup(b) != g) {
          return Internal(fmt::format("block {} of group {} is cached for group {}", b, g, pool_.CachedGroup(b)));
        }
        group_of[b] = g;
        ++refs[b];
        sorted.push_back(b);
      }
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
        return Internal(fmt::format("request {} holds a block twice in group {}", request, g));
      }
    }
  }
  for (BlockId b = 1; b < pool_.num_blocks(); ++b) {
    if (refs[b] != pool_.ref_count(b)) {
      return Internal(fmt::format("block {} has {} references, requests hold it {} times", b, pool_.ref_count(b),
                                  refs[b]));
    }
  }
  return Status::Ok();
}

}  // namespace ember::kv
