#include "model/tensor_parallel.h"

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "formats/ggml_type.h"

namespace ember {
namespace {

using Bytes = std::vector<uint8_t>;

// Copies `rows` rows of `row_bytes` each, taking `take` bytes from `offset` of each source row
// (source rows `stride` bytes apart), into a new buffer.
std::shared_ptr<Bytes> CopyColumns(const void* data, int64_t rows, int64_t stride, int64_t offset, int64_t take) {
  auto copy = std::make_shared<Bytes>(static_cast<size_t>(rows * take));
  const auto* src = static_cast<const uint8_t*>(data);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(copy->data() + r * take, src + r * stride + offset, static_cast<size_t>(take));
  }
  return copy;
}

Status CheckRange(const ShardRange& r, int64_t n, std::string_view what) {
  if (r.begin < 0 || r.count <= 0 || r.end() > n) {
    return InvalidArgument(fmt::format("shard [{}, {}) of the {} {} is out of range", r.begin, r.end(), n, what));
  }
  return Status::Ok();
}

// Tensor-parallel sizes up to num_heads that ShardHeads accepts, for error messages.
std::string WorkingSizes(int64_t num_heads, int64_t num_kv_heads) {
  std::string sizes;
  for (int64_t s = 1; s <= num_heads; ++s) {
    if (num_heads % s == 0 && (num_kv_heads % s == 0 || s % num_kv_heads == 0)) {
      sizes += fmt::format("{}{}", sizes.empty() ? "" : ", ", s);
    }
  }
  return sizes;
}

}  // namespace

Expected<ShardRange> TensorParallelRank::Block(int64_t n, std::string_view what) const {
  if (size <= 0 || rank < 0 || rank >= size) {
    return InvalidArgument(fmt::format("tensor-parallel rank {} of {}", rank, size));
  }
  if (n % size != 0) {
    return InvalidArgument(fmt::format("--tensor-parallel-size {} does not divide the {} {}", size, n, what));
  }
  return ShardRange{rank * (n / size), n / size};
}

Expected<HeadShard> ShardHeads(int64_t num_heads, int64_t num_kv_heads, const TensorParallelRank& tp) {
  if (num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0) {
    return InvalidArgument(fmt::format("{} query heads cannot share {} KV heads", num_heads, num_kv_heads));
  }
  const bool kv_split = num_kv_heads % tp.size == 0;
  const bool kv_replicated = tp.size % num_kv_heads == 0;
  if (num_heads % tp.size != 0 || !(kv_split || kv_replicated)) {
    return InvalidArgument(fmt::format(
        "--tensor-parallel-size {} cannot split {} query heads over {} KV heads (each rank needs a whole block of "
        "query heads and of the KV heads they read); sizes that work for this model: {}",
        tp.size, num_heads, num_kv_heads, WorkingSizes(num_heads, num_kv_heads)));
  }
  HeadShard shard;
  EMBER_ASSIGN_OR_RETURN(shard.q_heads, tp.Block(num_heads, "query heads"));
  if (kv_split) {
    EMBER_ASSIGN_OR_RETURN(shard.kv_heads, tp.Block(num_kv_heads, "KV heads"));
  } else {
    // tp.size / num_kv_heads ranks share each KV head; a rank's query heads all read it.
    shard.kv_heads = {tp.rank / (tp.size / num_kv_heads), 1};
  }
  return shard;
}

Expected<LayerSplits> SplitLayer(int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, int64_t intermediate,
                                 const TensorParallelRank& tp) {
  LayerSplits s;
  EMBER_ASSIGN_OR_RETURN(s.heads, ShardHeads(num_heads, num_kv_heads, tp));
  if (!tp.sharded()) return s;
  s.q = MatrixSplit::Rows(s.heads.q_heads, head_dim);
  s.kv = MatrixSplit::Rows(s.heads.kv_heads, head_dim);
  s.o = MatrixSplit::Columns(s.heads.q_heads, head_dim);
  if (intermediate > 0) {
    EMBER_ASSIGN_OR_RETURN(const ShardRange ffn, tp.Block(intermediate, "MLP intermediate features"));
    s.ffn_in = MatrixSplit::Rows(ffn);
    s.ffn_out = MatrixSplit::Columns(ffn);
  }
  return s;
}

Expected<SlicedTensor> SliceTensor(const TensorView& m, const MatrixSplit& split) {
  if (m.shape.rank() != 2) return InvalidArgument(fmt::format("a matrix must be 2-D, got {}", m.shape.ToString()));
  const int64_t rows = m.shape[0], cols = m.shape[1];
  const int64_t row_bytes = DTypeBytes(m.dtype, cols);
  switch (split.kind) {
    case MatrixSplit::Kind::kWhole: return SlicedTensor{m, nullptr};
    case MatrixSplit::Kind::kRows: {
      EMBER_RETURN_IF_ERROR(CheckRange(split.range, rows, "rows"));
      TensorView view = m;
      view.shape = Shape{split.range.count, cols};
      view.data = static_cast<const uint8_t*>(m.data) + split.range.begin * row_bytes;
      return SlicedTensor{view, nullptr};
    }
    case MatrixSplit::Kind::kColumns: {
      EMBER_RETURN_IF_ERROR(CheckRange(split.range, cols, "columns"));
      const int64_t offset = DTypeBytes(m.dtype, split.range.begin);
      const int64_t take = DTypeBytes(m.dtype, split.range.count);
      auto copy = CopyColumns(m.data, rows, row_bytes, offset, take);
      TensorView view{m.dtype, Shape{rows, split.range.count}, copy->data()};
      return SlicedTensor{view, std::move(copy)};
    }
  }
  return InvalidArgument("unknown matrix split");
}

Expected<Linear> SliceDense(const TensorView& matrix, const MatrixSplit& split) {
  EMBER_ASSIGN_OR_RETURN(SlicedTensor s, SliceTensor(matrix, split));
  return Linear::Dense(s.view, std::move(s.owner));
}

Expected<Linear> SliceQuantized(const quant::QuantMatrix& m, const MatrixSplit& split) {
  quant::QuantMatrix out = m;
  out.packed = nullptr;
  switch (split.kind) {
    case MatrixSplit::Kind::kWhole: return Linear::Quantized(out);
    case MatrixSplit::Kind::kRows:
      EMBER_RETURN_IF_ERROR(CheckRange(split.range, m.rows, "rows"));
      out.data = static_cast<const uint8_t*>(m.data) + split.range.begin * m.row_bytes;
      out.rows = split.range.count;
      return Linear::Quantized(out);
    case MatrixSplit::Kind::kColumns: {
      EMBER_RETURN_IF_ERROR(CheckRange(split.range, m.cols, "columns"));
      const GgmlTypeTraits* traits = FindGgmlType(m.type);
      if (traits == nullptr) return InvalidArgument("unknown GGML type");
      const int64_t be = traits->block_elements;
      if (split.range.begin % be != 0 || split.range.count % be != 0) {
        return InvalidArgument(fmt::format("columns [{}, {}) are not whole {} blocks of {}", split.range.begin,
                                           split.range.end(), traits->name, be));
      }
      const int64_t take = split.range.count / be * traits->block_bytes;
      auto copy = CopyColumns(m.data, m.rows, m.row_bytes, split.range.begin / be * traits->block_bytes, take);
      out.data = copy->data();
      out.cols = split.range.count;
      out.row_bytes = take;
      return Linear::Quantized(out, std::move(copy));
    }
  }
  return InvalidArgument("unknown matrix split");
}

Expected<SlicedTensor> SliceExpertStack(const TensorView& stacked, const MatrixSplit& split, int64_t halves) {
  if (stacked.shape.rank() != 3) {
    return InvalidArgument(fmt::format("an expert stack must be [E, rows, cols], got {}", stacked.shape.ToString()));
  }
  if (split.whole()) return SlicedTensor{stacked, nullptr};
  const int64_t experts = stacked.shape[0], rows = stacked.shape[1], cols = stacked.shape[2];
  const int64_t row_bytes = DTypeBytes(stacked.dtype, cols);
  const auto* src = static_cast<const uint8_t*>(stacked.data);
  if (split.kind == MatrixSplit::Kind::kColumns) {
    EMBER_RETURN_IF_ERROR(CheckRange(split.range, cols, "expert columns"));
    auto copy = CopyColumns(src, experts * rows, row_bytes, DTypeBytes(stacked.dtype, split.range.begin),
                            DTypeBytes(stacked.dtype, split.range.count));
    TensorView view{stacked.dtype, Shape{experts, rows, split.range.count}, copy->data()};
    return SlicedTensor{view, std::move(copy)};
  }
  if (halves <= 0 || rows % halves != 0) return InvalidArgument(fmt::format("{} rows in {} halves", rows, halves));
  const int64_t half = rows / halves;
  EMBER_RETURN_IF_ERROR(CheckRange(split.range, half, "expert rows"));
  const int64_t out_rows = halves * split.range.count;
  auto copy = std::make_shared<Bytes>(static_cast<size_t>(experts * out_rows * row_bytes));
  uint8_t* dst = copy->data();
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t h = 0; h < halves; ++h) {
      const int64_t first = e * rows + h * half + split.range.begin;
      const size_t bytes = static_cast<size_t>(split.range.count * row_bytes);
      std::memcpy(dst, src + first * row_bytes, bytes);
      dst += bytes;
    }
  }
  TensorView view{stacked.dtype, Shape{experts, out_rows, cols}, copy->data()};
  return SlicedTensor{view, std::move(copy)};
}

Expected<SlicedTensor> SelectExperts(const TensorView& stacked, std::span<const int32_t> held) {
  if (stacked.shape.rank() != 3 || held.empty()) {
    return InvalidArgument(fmt::format("selecting {} experts of a {} stack", held.size(), stacked.shape.ToString()));
  }
  const int64_t experts = stacked.shape[0];
  const int64_t expert_bytes = stacked.NumBytes() / experts;
  const auto* src = static_cast<const uint8_t*>(stacked.data);
  bool consecutive = true;
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i] < 0 || held[i] >= experts || (i > 0 && held[i] <= held[i - 1])) {
      return InvalidArgument(fmt::format("expert {} of {} out of order or range", held[i], experts));
    }
    consecutive &= i == 0 || held[i] == held[i - 1] + 1;
  }
  TensorView view = stacked;
  view.shape = Shape{static_cast<int64_t>(held.size()), stacked.shape[1], stacked.shape[2]};
  if (consecutive) {
    view.data = src + held.front() * expert_bytes;
    return SlicedTensor{view, nullptr};
  }
  auto copy = std::make_shared<Bytes>(held.size() * static_cast<size_t>(expert_bytes));
  for (size_t i = 0; i < held.size(); ++i) {
    std::memcpy(copy->data() + i * expert_bytes, src + held[i] * expert_bytes, static_cast<size_t>(expert_bytes));
  }
  view.data = copy->data();
  return SlicedTensor{view, std::move(copy)};
}

ShardRange VocabShard(int64_t vocab_size, const TensorParallelRank& tp) {
  if (!tp.sharded() || vocab_size % tp.size != 0) return {0, vocab_size};
  const int64_t count = vocab_size / tp.size;
  return {tp.rank * count, count};
}

}  // namespace ember
