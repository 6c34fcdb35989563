// A steady-state step makes no heap allocation (issue #14): after the first steps have sized
// every buffer, decode steps of SmolLM2 and of the Muse Spark golden models, through
// CausalLM::Forward with the caller's ForwardBatch and ForwardOutput reused, call operator new
// zero times, on any thread (thread-pool workers included); and the workspace the model reserves
// for the engine's limits (CausalLM::WorkspaceBytes) holds every step within them.
//
// This is its own test executable because it replaces the global operator new and delete.
#include <gtest/gtest.h>

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <numeric>
#include <fstream>
#include <string>

#include "model/causal_lm.h"
#include "support/source_dir.h"

// The replacements below pair malloc with free on purpose; GCC's heuristic cannot see that.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};

// EMBER_ALLOC_TRACE=1 prints the stack of the first allocations made while counting, to find
// what allocates (backtrace_symbols_fd writes without allocating).
void TraceAllocation(int64_t n) {
  static const bool trace = std::getenv("EMBER_ALLOC_TRACE") != nullptr;
  if (!trace || n >= 4) return;
  void* frames[24];
  const int depth = backtrace(frames, 24);
  backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  (void)!write(STDERR_FILENO, "----\n", 5);
}

void* CountedAlloc(std::size_t size, std::size_t align) {
  if (g_counting.load(std::memory_order_relaxed)) TraceAllocation(g_allocations.fetch_add(1));
  if (size == 0) size = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (size + align - 1) / align * align)
                                              : std::malloc(size);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return CountedAlloc(size, 0); }
void* operator new[](std::size_t size) { return CountedAlloc(size, 0); }
void* operator new(std::size_t size, std::align_val_t align) { return CountedAlloc(size, static_cast<std::size_t>(align)); }
void* operator new[](std::size_t size, std::align_val_t align) {
  return CountedAlloc(size, static_cast<std::size_t>(align));
}
// The nothrow forms too (std::stable_sort's temporary buffer uses them): a sanitizer runtime
// defines its own, which would pair its operator new with the free below.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return CountedAlloc(size, 0);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return CountedAlloc(size, static_cast<std::size_t>(align));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t& tag) noexcept {
  return operator new(size, align, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace ember {
namespace {

std::string ModelCache() {
  const char* cache = std::getenv("EMBER_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  return cache && *cache ? cache : std::string(home ? home : "/") + "/.cache/ember/models";
}

// Three requests with their own blocks in every KV group (block 0 is the null block): one
// prefill step of their prompts, then decode steps that rewrite the batch's arrays in place,
// as the model runner does.
class DecodeLoop {
 public:
  static constexpr int kReqs = 3, kPrompt = 9, kBlockSize = 16, kBlocksPerReq = 4;

  explicit DecodeLoop(CausalLM* model) : model_(model) {
    // As LocalEngine does: the largest step here is the prefill of every prompt at once.
    EXPECT_TRUE(model->ReserveWorkspace({.max_tokens = kReqs * kPrompt, .max_logit_rows = kReqs * kPrompt}).ok());
    kv::KvCacheConfig config = kv::PlanKvGroups(model->KvLayerSpecs(), kBlockSize, kv::KvDtype::kF32).value();
    config.num_blocks = 1 + kReqs * kBlocksPerReq * static_cast<int64_t>(config.groups.size());
    kv_ = std::make_unique<KvStore>(KvStore::Create(std::move(config)).value());
    batch_.groups.resize(kv_->config().groups.size());
    for (size_t g = 0; g < batch_.groups.size(); ++g) {
      KvGroupTable& t = batch_.groups[g];
      t.max_blocks_per_req = kBlocksPerReq;
      t.block_table.resize(kReqs * kBlocksPerReq);
      std::iota(t.block_table.begin(), t.block_table.end(), static_cast<int32_t>(1 + g * kReqs * kBlocksPerReq));
    }
  }

  Status Prefill() {
    batch_.token_ids.clear();
    batch_.positions.clear();
    batch_.query_start_loc = {0};
    batch_.seq_lens.clear();
    for (int r = 0; r < kReqs; ++r) {
      for (int i = 0; i < kPrompt; ++i) {
        batch_.token_ids.push_back(1 + (r * 7 + i * 3) % 50);
        batch_.positions.push_back(i);
      }
      batch_.query_start_loc.push_back((r + 1) * kPrompt);
      batch_.seq_lens.push_back(kPrompt);
    }
    for (KvGroupTable& t : batch_.groups) {
      t.slot_mapping.clear();
      for (int r = 0; r < kReqs; ++r)
        for (int i = 0; i < kPrompt; ++i) t.slot_mapping.push_back(Slot(t, r, i));
    }
    batch_.logits_indices.clear();
    for (int r = 0; r < kReqs; ++r) batch_.logits_indices.push_back((r + 1) * kPrompt - 1);
    return model_->Forward(batch_, *kv_, &out_);
  }

  // One decode token per request at position `position`, with the batch's vectors resized to
  // the decode shape once (the first decode step) and rewritten in place afterwards.
  Status Decode(int position) {
    batch_.token_ids.resize(kReqs);
    batch_.positions.resize(kReqs);
    batch_.query_start_loc.resize(kReqs + 1);
    batch_.logits_indices.resize(kReqs);
    for (int r = 0; r < kReqs; ++r) {
      batch_.token_ids[r] = 1 + (r * 11 + position) % 50;
      batch_.positions[r] = position;
      batch_.query_start_loc[r + 1] = r + 1;
      batch_.seq_lens[r] = position + 1;
      batch_.logits_indices[r] = r;
    }
    for (KvGroupTable& t : batch_.groups) {
      t.slot_mapping.resize(kReqs);
      for (int r = 0; r < kReqs; ++r) t.slot_mapping[r] = Slot(t, r, position);
    }
    return model_->Forward(batch_, *kv_, &out_);
  }

 private:
  static int64_t Slot(const KvGroupTable& t, int r, int position) {
    return int64_t{t.block_table[r * kBlocksPerReq + position / kBlockSize]} * kBlockSize + position % kBlockSize;
  }

  CausalLM* model_;
  std::unique_ptr<KvStore> kv_;
  ForwardBatch batch_;
  ForwardOutput out_;
};

// Heap allocations made by `steps` decode steps after two warm-up steps.
int64_t SteadyStateAllocations(CausalLM* model, int steps) {
  DecodeLoop loop(model);
  EXPECT_TRUE(loop.Prefill().ok());
  int position = DecodeLoop::kPrompt;
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(loop.Decode(position++).ok());
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now, not while counting
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < steps; ++i) {
    const Status s = loop.Decode(position++);
    if (!s.ok()) {
      g_counting = false;
      ADD_FAILURE() << s.ToString();
      return -1;
    }
  }
  g_counting = false;
  EXPECT_EQ(model->workspace().overflowed_steps(), 0) << "WorkspaceBytes underestimates a step";
  EXPECT_LE(model->workspace().high_water(), model->workspace().capacity());
  return g_allocations.load();
}

void ExpectNoAllocation(const std::string& path, bool skip_if_missing) {
  if (skip_if_missing && !std::ifstream(path).good()) GTEST_SKIP() << path << " not found (make models)";
  Expected<std::unique_ptr<CausalLM>> model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(SteadyStateAllocations(model->get(), 8), 0) << path;
}

TEST(StepAllocationTest, MuseSparkGoldenDecodeStepsAllocateNothing) {
  for (const char* fixture : {"tiny_a", "tiny_b"}) {
    ExpectNoAllocation(std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/" + fixture, false);
  }
}

TEST(StepAllocationTest, SmolLm2DecodeStepsAllocateNothing) {
  ExpectNoAllocation(ModelCache() + "/SmolLM2-135M-Instruct.Q4_1.gguf", true);
}

TEST(StepAllocationTest, Gemma3DecodeStepsAllocateNothing) {
  ExpectNoAllocation(ModelCache() + "/gemma-3-270m-q4_k_m.gguf", true);
}

}  // namespace
}  // namespace ember
