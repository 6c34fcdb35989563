#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "core/check.h"
#include "kv/block_hash.h"
#include "kv/kv_cache_coordinator.h"

namespace ember::kv {

class KvCacheManager::Impl {
 public:
  Impl(KvCacheConfig config, KvCacheManagerOptions options)
      : config_(std::move(config)), options_(options), coordinator_(config_) {}

  KvCacheConfig config_;
  KvCacheManagerOptions options_;
  KvCacheCoordinator coordinator_;
  PrefixCacheStats stats_;
  // Each running request's chain of full-block hashes, grown as its tokens are computed.
  struct Chain {
    uint64_t salt = 0;
    std::vector<ExtraContent> content;  // the request's, copied: the caller's span may move
    std::vector<BlockHash> hashes;
  };
  std::unordered_map<uint64_t, Chain> chains_;
};

KvCacheManager::KvCacheManager(KvCacheConfig config, KvCacheManagerOptions options)
    : impl_(std::make_unique<Impl>(std::move(config), options)) {}
KvCacheManager::~KvCacheManager() = default;
KvCacheManager::KvCacheManager(KvCacheManager&&) noexcept = default;
KvCacheManager& KvCacheManager::operator=(KvCacheManager&&) noexcept = default;

const KvCacheConfig& KvCacheManager::config() const { return impl_->config_; }
int KvCacheManager::num_groups() const { return impl_->coordinator_.num_groups(); }

CacheHit KvCacheManager::Lookup(std::span<const int32_t> tokens, const BlockKeys& keys) const {
  if (!impl_->options_.enable_prefix_caching) {
    CacheHit none;
    none.blocks.per_group.resize(num_groups());
    return none;
  }
  // At least the last token is computed again: its logits are what the step samples from.
  const int64_t bs = impl_->config_.block_size;
  const int64_t max_blocks = tokens.empty() ? 0 : (static_cast<int64_t>(tokens.size()) - 1) / bs;
  std::vector<BlockHash> hashes;
  hashes.reserve(max_blocks);
  ExtendBlockHashes(tokens.first(max_blocks * bs), bs, keys, hashes);
  return impl_->coordinator_.FindLongestHit(hashes, max_blocks);
}

CacheHit KvCacheManager::FindCachedPrefix(std::span<const int32_t> tokens, const BlockKeys& keys) {
  CacheHit hit = Lookup(tokens, keys);
  if (!impl_->options_.enable_prefix_caching) return hit;
  impl_->stats_.queries += static_cast<int64_t>(tokens.size());
  impl_->stats_.hits += hit.num_tokens;
  return hit;
}

int64_t KvCacheManager::CachedPrefixTokens(std::span<const int32_t> tokens, const BlockKeys& keys) const {
  return Lookup(tokens, keys).num_tokens;
}

std::optional<KvBlocks> KvCacheManager::AllocateSlots(uint64_t request, int64_t num_computed_tokens,
                                                      int64_t num_new_tokens, const CacheHit* hit,
                                                      int64_t num_lookahead) {
  EMBER_CHECK(num_computed_tokens >= 0 && num_new_tokens >= 0 && num_lookahead >= 0,
              "AllocateSlots({}, {}, {}, lookahead {})", request, num_computed_tokens, num_new_tokens, num_lookahead);
  return impl_->coordinator_.AllocateSlots(request, num_computed_tokens,
                                           num_computed_tokens + num_new_tokens + num_lookahead, hit);
}

void KvCacheManager::CacheFullBlocks(uint64_t request, std::span<const int32_t> tokens, int64_t num_computed_tokens,
                                     const BlockKeys& keys) {
  if (!impl_->options_.enable_prefix_caching) return;
  EMBER_CHECK(num_computed_tokens >= 0 && num_computed_tokens <= static_cast<int64_t>(tokens.size()),
              "request {}: {} computed tokens of {}", request, num_computed_tokens, tokens.size());
  const auto [it, inserted] = impl_->chains_.try_emplace(request);
  Impl::Chain& chain = it->second;
  if (inserted) {
    chain.salt = keys.salt;
    chain.content.assign(keys.content.begin(), keys.content.end());
  }
  const bool same_content =
      std::equal(chain.content.begin(), chain.content.end(), keys.content.begin(), keys.content.end());
  EMBER_CHECK(chain.salt == keys.salt && same_content, "request {} changed its block keys", request);
  const int64_t bs = impl_->config_.block_size;
  const int64_t num_full = num_computed_tokens / bs;
  ExtendBlockHashes(tokens.first(num_full * bs), bs, BlockKeys(chain.salt, chain.content), chain.hashes);
  impl_->coordinator_.CacheFullBlocks(request, chain.hashes, num_full);
}

std::vector<int32_t> KvCacheManager::TrimTo(uint64_t request, int64_t num_tokens) {
  return impl_->coordinator_.TrimTo(request, num_tokens);
}

void KvCacheManager::Free(uint64_t request) {
  impl_->coordinator_.Free(request);
  impl_->chains_.erase(request);
}

const KvBlocks& KvCacheManager::Blocks(uint64_t request) const { return impl_->coordinator_.Blocks(request); }

int64_t KvCacheManager::num_free_blocks() const { return impl_->coordinator_.pool().num_free_blocks(); }

double KvCacheManager::usage() const {
  const int64_t usable = impl_->coordinator_.pool().num_blocks() - 1;
  return static_cast<double>(usable - num_free_blocks()) / static_cast<double>(usable);
}

const PrefixCacheStats& KvCacheManager::prefix_cache_stats() const { return impl_->stats_; }

void KvCacheManager::ResetPrefixCache() { impl_->coordinator_.pool().ResetPrefixCache(); }

Status KvCacheManager::CheckInvariants() const { return impl_->coordinator_.CheckInvariants(); }

}  // namespace ember::kv
