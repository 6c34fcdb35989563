// Batch invariance of paged attention (kernels/paged_attention.h), bit for bit, on every kernel
// variant and KV dtype: a query's output must not depend on the other queries of its tile, the
// tile's offset, how its request's prompt was chunked, the other requests of the batch, whether
// the kernel split a tile's segments over threads (few tiles) or not, or the thread count. The
// reference for every query is the query computed alone (a decode step at its position, one
// thread); every other way of computing it must give the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "model/kv_store.h"

namespace ember {
namespace {

struct Shape {
  int64_t num_heads, num_kv_heads, head_dim, block_size, window;
  std::vector<int64_t> seq_lens;  // the sequences in the cache
};

// One request of a call: sequence `seq`, query positions [begin, end) (its context is `end`).
struct Part {
  int64_t seq, begin, end;
};

class PagedAttentionInvarianceTest : public ::testing::TestWithParam<kv::KvDtype> {
 protected:
  void TearDown() override {
    ThreadPool::SetGlobalThreads(0);
    ASSERT_TRUE(SelectIsa(IsaName(AvailableIsas().back())).ok());
  }

  void Setup(const Shape& s, uint32_t seed) {
    shape_ = s;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t d = s.head_dim, kv_width = s.num_kv_heads * d;
    q_width_ = s.num_heads * d;
    max_blocks_ = 0;
    int64_t total_blocks = 0;
    for (int64_t n : s.seq_lens) {
      max_blocks_ = std::max(max_blocks_, (n + s.block_size - 1) / s.block_size);
      total_blocks += (n + s.block_size - 1) / s.block_size;
    }
    auto config = kv::PlanKvGroups({{kv::AttentionKind::kFull, 0, s.num_kv_heads, d}}, s.block_size, GetParam());
    ASSERT_TRUE(config.ok());
    config->num_blocks = 1 + total_blocks;
    auto store = KvStore::Create(*config);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::make_unique<KvStore>(std::move(*store));
    std::vector<int32_t> ids(total_blocks);
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), rng);
    const int64_t num_seqs = static_cast<int64_t>(s.seq_lens.size());
    tables_.assign(num_seqs * max_blocks_, 0);
    q_.assign(num_seqs, {});
    size_t next = 0;
    for (int64_t r = 0; r < num_seqs; ++r) {
      const int64_t n = s.seq_lens[r];
      for (int64_t j = 0; j * s.block_size < n; ++j) tables_[r * max_blocks_ + j] = ids[next++];
      std::vector<float> k(n * kv_width), v(n * kv_width);
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      // A few large keys so that the running max moves between chunks and segments.
      for (int64_t p = 0; p < n; p += 37) k[p * kv_width] = 8.0f;
      std::vector<int64_t> slots(n);
      for (int64_t p = 0; p < n; ++p) {
        slots[p] = int64_t{tables_[r * max_blocks_ + p / s.block_size]} * s.block_size + p % s.block_size;
      }
      store_->Write(0, k.data(), v.data(), n, slots.data());
      q_[r].resize(n * q_width_);
      for (float& x : q_[r]) x = normal(rng);
    }
  }

  // Runs one call over `parts` and returns each part's output rows.
  std::vector<std::vector<float>> Run(const std::vector<Part>& parts, int threads) {
    ThreadPool::SetGlobalThreads(threads);
    std::vector<int32_t> query_start_loc = {0}, positions, seq_lens, table;
    std::vector<float> q;
    for (const Part& p : parts) {
      for (int64_t t = p.begin; t < p.end; ++t) positions.push_back(static_cast<int32_t>(t));
      query_start_loc.push_back(static_cast<int32_t>(positions.size()));
      seq_lens.push_back(static_cast<int32_t>(p.end));
      table.insert(table.end(), tables_.begin() + p.seq * max_blocks_, tables_.begin() + (p.seq + 1) * max_blocks_);
      q.insert(q.end(), q_[p.seq].begin() + p.begin * q_width_, q_[p.seq].begin() + p.end * q_width_);
    }
    kernels::PagedBatch batch;
    batch.num_reqs = static_cast<int64_t>(parts.size());
    batch.query_start_loc = query_start_loc.data();
    batch.positions = positions.data();
    batch.seq_lens = seq_lens.data();
    batch.block_table = table.data();
    batch.max_blocks_per_req = max_blocks_;
    const kernels::AttentionShape shape{shape_.num_heads, shape_.num_kv_heads, shape_.head_dim,
                                        1.0f / std::sqrt(static_cast<float>(shape_.head_dim)), shape_.window};
    const int64_t num_tokens = static_cast<int64_t>(positions.size());
    std::vector<float> out(num_tokens * q_width_, NAN);
    kernels::PagedAttention(q.data(), num_tokens, batch, store_->View(0), shape, out.data());
    std::vector<std::vector<float>> rows;
    for (size_t i = 0; i < parts.size(); ++i) {
      rows.emplace_back(out.begin() + query_start_loc[i] * q_width_, out.begin() + query_start_loc[i + 1] * q_width_);
    }
    return rows;
  }

  // Every probed position of `seq` computed alone: one decode step, one thread.
  void RecordAlone(int64_t seq, const std::vector<int64_t>& probes) {
    alone_.clear();
    for (int64_t p : probes) alone_.push_back(Run({{seq, p, p + 1}}, 1)[0]);
    probes_ = probes;
  }

  // The rows of `rows` (positions [begin, end) of the probed sequence) at probed positions.
  void ExpectAlone(const std::vector<float>& rows, int64_t begin, int64_t end, const std::string& how) {
    for (size_t i = 0; i < probes_.size(); ++i) {
      const int64_t p = probes_[i];
      if (p < begin || p >= end) continue;
      ASSERT_EQ(std::memcmp(rows.data() + (p - begin) * q_width_, alone_[i].data(), q_width_ * sizeof(float)), 0)
          << how << ": position " << p << " differs from the query alone";
    }
  }

  // The checks for sequence 0 on the active variant.
  void CheckSequence0() {
    const int64_t n = shape_.seq_lens[0];
    std::vector<int64_t> probes;
    for (int64_t p : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{255}, int64_t{256},
                      int64_t{257}, int64_t{511}, int64_t{512}, n - 2, n - 1}) {
      if (p >= 0 && p < n) probes.push_back(p);
    }
    for (int64_t p = 3; p < n; p += 29) probes.push_back(p);
    std::sort(probes.begin(), probes.end());
    probes.erase(std::unique(probes.begin(), probes.end()), probes.end());
    RecordAlone(0, probes);
    // Alone at 2 and 3 threads: the few-tiles path, one work item per segment.
    for (int threads : {2, 3}) {
      for (size_t i = 0; i < probes_.size(); ++i) {
        const std::vector<float> row = Run({{0, probes_[i], probes_[i] + 1}}, threads)[0];
        ASSERT_EQ(std::memcmp(row.data(), alone_[i].data(), q_width_ * sizeof(float)), 0)
            << "decode of position " << probes_[i] << " alone, " << threads << " threads";
      }
    }
    // The whole prompt in one call, at 1-3 threads.
    std::vector<float> whole;
    for (int threads = 1; threads <= 3; ++threads) {
      const std::vector<float> rows = Run({{0, 0, n}}, threads)[0];
      ExpectAlone(rows, 0, n, "one prefill call, " + std::to_string(threads) + " threads");
      if (whole.empty()) {
        whole = rows;
      } else {
        ASSERT_EQ(std::memcmp(rows.data(), whole.data(), rows.size() * sizeof(float)), 0) << threads << " threads";
      }
    }
    // Chunked prefills (tiles start at other offsets), batched with other sequences or alone;
    // the lone chunks of 8 after a first chunk of 6 are the few-tiles path with multi-row tiles
    // (with a 512-key window, a tile at positions 766-773 spans four segments).
    struct Plan {
      int64_t first, chunk;
      int threads;
      bool batched;
    };
    for (const Plan& plan : {Plan{1, 1, 2, true}, Plan{7, 7, 1, true}, Plan{100, 100, 3, true}, Plan{6, 8, 2, false}}) {
      std::vector<float> rows;
      for (int64_t begin = 0; begin < n; begin += begin == 0 ? plan.first : plan.chunk) {
        const int64_t end = std::min(n, begin + (begin == 0 ? plan.first : plan.chunk));
        std::vector<Part> parts = {{0, begin, end}};
        // Other requests before and after it: a decode of sequence 1 and a prefill chunk of 2.
        const bool batched = plan.batched && shape_.seq_lens.size() > 2;
        if (batched) {
          parts.insert(parts.begin(), Part{1, shape_.seq_lens[1] - 1, shape_.seq_lens[1]});
          parts.push_back(Part{2, 0, std::min<int64_t>(shape_.seq_lens[2], 5 + begin % 23)});
        }
        const auto out = Run(parts, plan.threads);
        const std::vector<float>& mine = out[batched ? 1 : 0];
        rows.insert(rows.end(), mine.begin(), mine.end());
      }
      ASSERT_EQ(std::memcmp(rows.data(), whole.data(), rows.size() * sizeof(float)), 0)
          << "chunks of " << plan.first << " then " << plan.chunk << (plan.batched ? " batched, " : " alone, ")
          << plan.threads << " threads differ from one prefill call";
    }
    // Decode of the probed positions in a batch with many other requests (enough tiles that no
    // segment split happens), against the same alone (where a long context splits).
    if (shape_.seq_lens.size() > 2) {
      for (int threads : {1, 2, 3}) {
        for (size_t i = 0; i < probes_.size(); ++i) {
          std::vector<Part> parts;
          for (int rep = 0; rep < 4; ++rep) {
            parts.push_back({1, shape_.seq_lens[1] - 1 - rep, shape_.seq_lens[1] - rep});
            parts.push_back({2, 0, shape_.seq_lens[2]});
          }
          parts.insert(parts.begin() + 3, Part{0, probes_[i], probes_[i] + 1});
          const auto out = Run(parts, threads);
          ASSERT_EQ(std::memcmp(out[3].data(), alone_[i].data(), q_width_ * sizeof(float)), 0)
              << "decode of position " << probes_[i] << " in a batch, " << threads << " threads";
        }
      }
    }
  }

  void RunOnEveryVariant(const Shape& s, uint32_t seed) {
    Setup(s, seed);
    for (const Isa isa : AvailableIsas()) {
#ifdef EMBER_SANITIZED
      // The scalar oracle converts each K/V element through a call: under the sanitizers it took
      // 95% of this suite's time (2-5 minutes a test). The release suite runs it here, and the
      // sanitizers see its memory accesses in paged_attention_test.
      if (isa == Isa::kRef) continue;
#endif
      SCOPED_TRACE(std::string(IsaName(isa)));
      ASSERT_TRUE(SelectIsa(IsaName(isa)).ok());
      CheckSequence0();
      if (HasFatalFailure()) return;
    }
  }

  Shape shape_;
  std::unique_ptr<KvStore> store_;
  std::vector<int32_t> tables_;
  int64_t max_blocks_ = 0;
  int64_t q_width_ = 0;
  std::vector<std::vector<float>> q_;
  std::vector<int64_t> probes_;
  std::vector<std::vector<float>> alone_;
};

// SmolLM2's attention (9 query heads over 3 KV heads, head_dim 64), past two segments.
TEST_P(PagedAttentionInvarianceTest, GqaFullAttention) { RunOnEveryVariant({9, 3, 64, 16, -1, {600, 300, 40}}, 11); }

// Gemma 3's sliding layers (4 heads over 1 KV head, head_dim 256, a 512-key window across
// segments).
TEST_P(PagedAttentionInvarianceTest, SlidingWindowHeadDim256) { RunOnEveryVariant({4, 1, 256, 16, 512, {800, 90, 20}}, 12); }

// Odd shapes: head_dim not a lane multiple, blocks of 5 (chunks span blocks), a window of 20
// (chunk-unaligned edges), 5 query heads per KV head (tiles of 6 positions).
TEST_P(PagedAttentionInvarianceTest, OddShapes) { RunOnEveryVariant({10, 2, 20, 5, 20, {300, 33, 7}}, 13); }

// More query heads per KV head than a tile holds: a position's heads split over two tiles.
TEST_P(PagedAttentionInvarianceTest, MoreHeadsThanATile) { RunOnEveryVariant({40, 1, 24, 16, -1, {300, 33, 7}}, 14); }

INSTANTIATE_TEST_SUITE_P(KvDtypes, PagedAttentionInvarianceTest,
                         ::testing::Values(kv::KvDtype::kF32, kv::KvDtype::kF16, kv::KvDtype::kBF16,
                                           kv::KvDtype::kFp8E4M3),
                         [](const auto& info) { return std::string(kv::KvDtypeName(info.param)); });

}  // namespace
}  // namespace ember
