// MpiCommunicator: exec::Communicator across the processes of an MPI job (CPU ranks).
//
// Every collective is made of nonblocking point-to-point messages to and from each peer
// (MPI_Isend / MPI_Irecv, a flat exchange: fine for the handful of ranks tensor parallelism uses
// on CPUs) and one wait loop. Two things follow:
//   * Sums are taken here, in rank order ((r0 + r1) + r2) + ..., after gathering every rank's
//     values, so AllReduceSum and ReduceScatterSum give the same bits on every rank whatever
//     algorithm the MPI library would have picked.
//   * The wait loop knows which peers have not delivered. With a timeout set, a peer that died or
//     hangs is named in a message ("rank 1 did not answer AllReduceSum within 30 s: ...") given
//     to the fault handler, instead of the job hanging in silence.
// The wait polls and backs off (yield, then sleeps growing to ~100 us) so a waiting rank does not
// take a core from the ranks it waits for when they share cores.
//
// Not thread-safe: one thread at a time calls a communicator (MPI_THREAD_SERIALIZED), and every
// MpiCommunicator must be destroyed before the MpiRuntime. <mpi.h> stays in the .cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "exec/communicator.h"

namespace ember::parallel {

class MpiCommunicator final : public exec::Communicator {
 public:
  using FaultHandler = std::function<void(const std::string& message)>;

  // A duplicate of MPI_COMM_WORLD (its own message space: nothing else in the process can match
  // its messages). MPI must be initialised (MpiRuntime::Init).
  static std::unique_ptr<MpiCommunicator> World();

  // MPI_Comm_split of this group: the ranks that pass the same `color` (>= 0) form a new group,
  // ordered by `key`, then by rank here (tensor- and pipeline-parallel groups). Collective over
  // this group. The new group starts with this one's timeout, fault handler and chunk size.
  std::unique_ptr<MpiCommunicator> Split(int color, int key) const;

  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override;
  int world_size() const override;
  // This group's rank `rank` in MPI_COMM_WORLD (what fault messages name).
  int WorldRankOf(int rank) const;

  void AllReduceSum(float* data, int64_t count) override;
  void ReduceScatterSum(const float* in, int64_t count_per_rank, float* out) override;
  void AllGather(const float* in, int64_t count_per_rank, float* out) override;
  void AllToAllV(const float* send, std::span<const int64_t> send_rows, float* recv,
                 std::span<const int64_t> recv_rows, int64_t row_width) override;
  void Broadcast(void* data, int64_t bytes, int root) override;
  void Send(const void* data, int64_t bytes, int dest, int tag) override;
  void Recv(void* data, int64_t bytes, int source, int tag) override;
  int64_t AllReduceMin(int64_t value) override;

  // How long one call may wait for its peers, in seconds; 0 (the default) waits forever. When a
  // wait passes it, the fault handler gets a message naming the call and the world ranks of the
  // peers that have not delivered. If the handler returns, the call goes on waiting, without a
  // limit, and completes normally if they catch up.
  void set_timeout(double seconds);
  double timeout() const;
  // The default handler logs the message with EMBER_LOG_ERROR and calls
  // MPI_Abort(MPI_COMM_WORLD, 1): a rank that died leaves the job unable to step, and aborting
  // makes mpirun end every rank instead of leaving them hung.
  void set_fault_handler(FaultHandler handler);

  // Messages are sent in chunks of at most this many bytes (default 1 GiB, under MPI's int
  // count), so any int64_t size goes through. Tests lower it to exercise the chunking.
  void set_max_chunk_bytes(int64_t bytes);

  // The collectives (Send/Recv excepted) called on this group so far and their wall time, waits
  // for slower peers included: the communication time of the steps that called them.
  struct CollectiveStats {
    int64_t calls = 0;
    double seconds = 0.0;
  };
  CollectiveStats stats() const;

 private:
  struct Impl;
  explicit MpiCommunicator(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::parallel
