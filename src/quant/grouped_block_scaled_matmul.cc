#include "quant/grouped_block_scaled_matmul.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "quant/block_scaled_dot.h"
#include "quant/block_scaled_matmul.h"
#include "quant/block_scaled_packed.h"
#include "quant/matmul_tiling.h"

namespace ember::quant {

std::vector<GroupRowRange> SplitGroupRows(std::span<const int64_t> rows, std::span<const int64_t> cost_per_row,
                                          int threads) {
  std::vector<GroupRowRange> ranges;
  SplitGroupRows(rows, cost_per_row, threads, ranges);
  return ranges;
}

void SplitGroupRows(std::span<const int64_t> rows, std::span<const int64_t> cost_per_row, int threads,
                    std::vector<GroupRowRange>& ranges) {
  EMBER_CHECK(rows.size() == cost_per_row.size(), "SplitGroupRows: {} row counts, {} costs", rows.size(),
              cost_per_row.size());
  int64_t total = 0;
  for (size_t g = 0; g < rows.size(); ++g) total += rows[g] * cost_per_row[g];
  // Eight ranges per thread: the pool hands out four chunks per thread (consecutive ranges), and
  // two ranges per chunk keep chunks within about half a range of each other.
  const int64_t target = std::max<int64_t>(kMinChunkBytes, total / std::max<int64_t>(1, int64_t{8} * threads));
  ranges.clear();
  for (size_t g = 0; g < rows.size(); ++g) {
    if (rows[g] == 0) continue;
    const int64_t cost = rows[g] * cost_per_row[g];
    const int64_t pieces = std::max<int64_t>(1, (cost + target / 2) / target);
    const int64_t step = (rows[g] + pieces - 1) / pieces;
    const int64_t tiled = (step + kRowTile - 1) / kRowTile * kRowTile;
    for (int64_t begin = 0; begin < rows[g]; begin += tiled) {
      ranges.push_back({static_cast<int64_t>(g), begin, std::min(rows[g], begin + tiled)});
    }
  }
}

namespace {

struct ActivationRow {
  const float* x;
  int64_t k;
  uint8_t* out;
  bool packed_records;
};

struct Scratch {
  std::vector<int64_t> act_offset, rows, cost;
  std::vector<GroupRowRange> ranges;
  std::vector<ActivationRow> todo;
};

}  // namespace

void GroupedBlockScaledMatMul(std::span<const BlockScaledGroup> groups) {
  const int64_t count = static_cast<int64_t>(groups.size());
  // Scratch kept per calling thread, so a steady-state step allocates nothing here. Bound to
  // references because the pool's workers, which the loops below capture them into, must see the
  // caller's vectors, not their own thread_local ones.
  thread_local Scratch scratch;
  std::vector<int64_t>& act_offset = scratch.act_offset;
  std::vector<int64_t>& rows = scratch.rows;
  std::vector<int64_t>& cost = scratch.cost;
  std::vector<GroupRowRange>& ranges = scratch.ranges;
  // Where each group's prepared activations start in the buffer (-1: none, FP8); a group that
  // shares the previous group's input reuses its rows.
  act_offset.assign(count, -1);
  int64_t act_total = 0;
  for (int64_t g = 0; g < count; ++g) {
    const BlockScaledGroup& group = groups[g];
    const Status valid = ValidateBlockScaledMatrix(group.w);
    EMBER_CHECK(valid.ok(), "GroupedBlockScaledMatMul: {}", valid.message());
    EMBER_CHECK(group.m >= 0 && group.ldy >= group.w.rows, "GroupedBlockScaledMatMul: m {} ldy {} rows {}", group.m,
                group.ldy, group.w.rows);
    const int64_t row_bytes = PreparedActivationRowBytes(group.w.format, group.w.cols);
    if (row_bytes == 0 || group.m == 0) continue;
    if (g > 0 && act_offset[g - 1] >= 0 && groups[g - 1].x == group.x && groups[g - 1].m == group.m &&
        groups[g - 1].w.cols == group.w.cols) {
      act_offset[g] = act_offset[g - 1];
      continue;
    }
    act_offset[g] = act_total;
    act_total += group.m * row_bytes;  // row_bytes is a multiple of 64: every row stays aligned
  }

  ThreadPool& pool = ThreadPool::Global();
  thread_local std::vector<uint8_t> activation_buffer;
  activation_buffer.resize(static_cast<size_t>(act_total + 64));
  uint8_t* act = activation_buffer.data() + (64 - reinterpret_cast<uintptr_t>(activation_buffer.data()) % 64) % 64;
  if (act_total > 0) {
    // Every activation row to quantize, over all groups, as one loop (inline when it is small, as
    // at decode: a handful of rows).
    std::vector<ActivationRow>& todo = scratch.todo;
    todo.clear();
    int64_t floats = 0;
    for (int64_t g = 0; g < count; ++g) {
      if (act_offset[g] < 0 || (g > 0 && act_offset[g] == act_offset[g - 1])) continue;
      const BlockScaledGroup& group = groups[g];
      const int64_t row_bytes = PreparedActivationRowBytes(group.w.format, group.w.cols);
      // The groups sharing these rows (consecutive, same x) may differ in having a packed copy.
      bool packed = false;
      for (int64_t h = g; h < count && act_offset[h] == act_offset[g]; ++h) packed |= UsesPackedGemm(groups[h].w, groups[h].m);
      for (int64_t i = 0; i < group.m; ++i) {
        todo.push_back({group.x + i * group.w.cols, group.w.cols, act + act_offset[g] + i * row_bytes, packed});
      }
      floats += group.m * group.w.cols;
    }
    const int64_t average_k = std::max<int64_t>(1, floats / static_cast<int64_t>(todo.size()));
    pool.ParallelFor(
        static_cast<int64_t>(todo.size()),
        [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            QuantizeActivationInt8(todo[r].x, todo[r].k, todo[r].out);
            if (todo[r].packed_records) FillPackedActivationRecords(todo[r].k, todo[r].out);
          }
        },
        std::max<int64_t>(1, kMinChunkBytes / (average_k * 4)));
  }

  rows.resize(count);
  cost.resize(count);
  for (int64_t g = 0; g < count; ++g) {
    const BlockScaledMatrix& w = groups[g].w;
    rows[g] = groups[g].m == 0 ? 0 : w.rows;
    cost[g] = (CodesRowBytes(w.format, w.cols) + ScalesRowBytes(w.format, w.cols)) * groups[g].m;
  }
  SplitGroupRows(rows, cost, pool.num_threads(), ranges);
  pool.ParallelFor(static_cast<int64_t>(ranges.size()), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const BlockScaledGroup& group = groups[ranges[r].group];
      const uint8_t* group_act = act_offset[ranges[r].group] >= 0 ? act + act_offset[ranges[r].group] : nullptr;
      BlockScaledMatMulRows(group.w, group.x, group_act, group.m, ranges[r].begin, ranges[r].end, group.y, group.ldy);
    }
  });
}

}  // namespace ember::quant
