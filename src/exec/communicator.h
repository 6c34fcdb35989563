// Communicator: the collectives a parallel forward pass needs, behind one interface so that model
// code never knows whether it runs in one process, over MPI (CPU ranks) or over NCCL (CUDA ranks).
//
// Every rank of a group calls the same collective in the same order with matching arguments (the
// MPI rule). Buffers are f32 rows of activations; counts are elements unless named rows or bytes.
// Bad arguments (negative counts, count vectors of the wrong size, receive counts that do not match
// what is sent, a peer that is not in the group) are ember's own bug, so they fail an EMBER_CHECK
// rather than return a Status.
//
// Sums are deterministic: an implementation adds the ranks' values in rank order,
// ((r0 + r1) + r2) + ..., so every rank ends with the same bits, and the bits do not depend on a
// library's choice of reduction tree (src/parallel/README.md).
#pragma once

#include <cstdint>
#include <span>

namespace ember::exec {

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This process's index in the group, in [0, world_size()).
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // data[i] = sum over ranks of data[i], in place, for count elements (tensor parallelism's
  // row-parallel linears). Every rank ends with the same bits: the sum is taken in rank order.
  virtual void AllReduceSum(float* data, int64_t count) = 0;

  // `in` [world_size * count_per_rank] holds one block per rank; `out` [count_per_rank] receives
  // this rank's block of the element-wise sum over ranks, added in rank order like AllReduceSum.
  // `in` and `out` must not overlap.
  virtual void ReduceScatterSum(const float* in, int64_t count_per_rank, float* out) = 0;

  // out [world_size * count_per_rank] = every rank's `in` [count_per_rank], in rank order.
  // `in` may be out + rank() * count_per_rank (in place).
  virtual void AllGather(const float* in, int64_t count_per_rank, float* out) = 0;

  // Exchange of rows of `row_width` floats (expert parallelism's dispatch and combine).
  // `send` holds send_rows[0] rows for rank 0, then send_rows[1] rows for rank 1, ...; `recv`
  // receives recv_rows[0] rows from rank 0, then recv_rows[1] from rank 1, ... Both spans have
  // world_size() entries, and recv_rows[r] here must equal send_rows[rank()] on rank r. `send`
  // and `recv` must not overlap.
  virtual void AllToAllV(const float* send, std::span<const int64_t> send_rows, float* recv,
                         std::span<const int64_t> recv_rows, int64_t row_width) = 0;

  // Copies `bytes` bytes at `data` on rank `root` to `data` on every other rank (rank 0 sends each
  // engine step's WorkerStep to the workers). Every rank passes the same `bytes` and `root`.
  virtual void Broadcast(void* data, int64_t bytes, int root) = 0;

  // Point to point: Send returns once `data` may be reused, Recv once the message has arrived.
  // `tag` is in [0, kMaxUserTag) and a Recv names the exact source, tag and byte count of the
  // matching Send. Messages between two ranks with one tag arrive in the order they were sent.
  // User tags never match a collective's messages.
  static constexpr int kMaxUserTag = 1 << 14;
  virtual void Send(const void* data, int64_t bytes, int dest, int tag) = 0;
  virtual void Recv(void* data, int64_t bytes, int source, int tag) = 0;

  // The minimum of `value` over ranks, on every rank (ranks agree on e.g. the KV block count that
  // fits in every rank's memory).
  virtual int64_t AllReduceMin(int64_t value) = 0;
};

// The group of one process: rank 0 of 1. Every collective is the identity (a copy where the
// output is another buffer), so a model driven by it computes bit for bit what it computes
// without collectives. Stateless, hence safe to share between threads and models. There is no
// peer to Send to or Recv from: both fail an EMBER_CHECK.
class LocalCommunicator final : public Communicator {
 public:
  // The process-wide instance models use when they are given none.
  static LocalCommunicator& Instance();

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void AllReduceSum(float* data, int64_t count) override;
  void AllGather(const float* in, int64_t count_per_rank, float* out) override;
  void ReduceScatterSum(const float* in, int64_t count_per_rank, float* out) override;
  void AllToAllV(const float* send, std::span<const int64_t> send_rows, float* recv,
                 std::span<const int64_t> recv_rows, int64_t row_width) override;
  void Broadcast(void* data, int64_t bytes, int root) override;
  void Send(const void* data, int64_t bytes, int dest, int tag) override;
  void Recv(void* data, int64_t bytes, int source, int tag) override;
  int64_t AllReduceMin(int64_t value) override { return value; }
};

// `communicator`, or the process-wide LocalCommunicator when it is null.
Communicator& OrLocal(Communicator* communicator);

}  // namespace ember::exec
