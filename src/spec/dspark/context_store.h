// DSparkContext: one request's context K/V for every drafter layer, the keys and values the
// drafter projected from the target's hidden states at positions [begin(), end()).
//
// The drafter keeps its own context K/V (reference/muse_spark.md §4.2): a block's own K/V is
// computed for one forward and never stored, so the store only grows by verified positions, in
// order, as the target reports them. With a sliding window only the last `window` positions can
// ever be read again (a block query at position q >= end() reads context positions > q - window),
// so older rows are dropped: the store holds at most max_rows() = window + slack rows and, on
// reaching that, drops the oldest `slack` in one move (slack = max(64, window / 8)), so an append
// costs O(window / slack) row moves at most, amortised, and memory stays within 1/8 of the window.
//
// K/V are f32 (the drafter computes in f32): 2 * layers * kv_heads * head_dim * 4 bytes per
// position, 1.5 KB for the SmolLM2 drafter, 80 KB for the Muse drafter (about 180 MB per request
// at its 2048 window).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ember::spec::dspark {

class DSparkContext {
 public:
  // `kv_width` floats per position per layer for K and for V (num_kv_heads * head_dim); `window`
  // the drafter's sliding window (keys per query including itself), -1 for none.
  DSparkContext(int64_t num_layers, int64_t kv_width, int64_t window);

  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  int64_t size() const { return end_ - begin_; }
  int64_t window() const { return window_; }  // -1: none
  int64_t kv_width() const { return kv_width_; }
  int64_t num_layers() const { return num_layers_; }
  // The most rows held (-1: unbounded, no window).
  int64_t max_rows() const { return window_ > 0 ? window_ + std::max<int64_t>(64, window_ / 8) : -1; }
  // Rows held for every layer (for memory accounting).
  int64_t bytes() const;

  // Drops positions >= `position` (a request recomputed from there). Rows before begin() are gone
  // for good, so cutting below it restarts the store at `position` (RestartAt).
  void TruncateTo(int64_t position);
  // Drops every row; the store continues at `position`. For a report that skips positions (a
  // request whose prompt prefix the target took from its prefix cache, and so never computed).
  void RestartAt(int64_t position);
  // Appends `count` positions from end(): k and v are [num_layers, count, kv_width], or with
  // `layer_stride` floats from one layer's rows to the next (rows of a larger batch).
  void Append(const float* k, const float* v, int64_t count, int64_t layer_stride = -1);
  // Whether a block at `anchor` can be drafted: the store ends at it and holds something. A block
  // reads the positions its window names that the store holds (block_attention.h), so a store
  // that restarted after a gap drafts from the positions since: for a windowed drafter that is
  // exact once the gap has left the window; for one with full-attention layers the drafts are
  // those of a context without the missing positions. The target's hidden states after a gap
  // still carry what it read there, and on chat prompts missing their system prompt the SmolLM2
  // drafter kept 97% of its tokens per step (dspark_proposer.h), where refusing to draft lost them
  // all for the rest of the request.
  bool CanDraftAt(int64_t anchor) const;

  // Row of `position` (begin() <= position < end()) of layer `layer`: kv_width floats.
  const float* K(int64_t layer, int64_t position) const {
    return k_[layer].data() + (position - begin_) * kv_width_;
  }
  const float* V(int64_t layer, int64_t position) const {
    return v_[layer].data() + (position - begin_) * kv_width_;
  }

 private:
  void TrimFront();

  int64_t num_layers_;
  int64_t kv_width_;
  int64_t window_;
  int64_t begin_ = 0;
  int64_t end_ = 0;
  std::vector<std::vector<float>> k_;  // per layer, [end - begin, kv_width]
  std::vector<std::vector<float>> v_;
};

}  // namespace ember::spec::dspark
