#include "exec/communicator.h"

#include <algorithm>

#include "core/check.h"

namespace ember::exec {

LocalCommunicator& LocalCommunicator::Instance() {
  static LocalCommunicator instance;
  return instance;
}

Communicator& OrLocal(Communicator* communicator) {
  return communicator != nullptr ? *communicator : LocalCommunicator::Instance();
}

void LocalCommunicator::AllReduceSum(float* data, int64_t count) {
  // The sum over one rank is the rank's own data: nothing to do, and nothing may be rounded.
  EMBER_CHECK(count >= 0, "AllReduceSum: negative count {}", count);
  EMBER_CHECK(count == 0 || data != nullptr, "AllReduceSum: null data for {} elements", count);
}

void LocalCommunicator::AllGather(const float* in, int64_t count_per_rank, float* out) {
  EMBER_CHECK(count_per_rank >= 0, "AllGather: negative count {}", count_per_rank);
  if (count_per_rank == 0) return;
  EMBER_CHECK(in != nullptr && out != nullptr, "AllGather: null buffer for {} elements", count_per_rank);
  if (in == out) return;  // in place: rank 0's slot is the whole output
  EMBER_CHECK(in + count_per_rank <= out || out + count_per_rank <= in, "AllGather: in and out overlap");
  std::copy_n(in, count_per_rank, out);
}

void LocalCommunicator::ReduceScatterSum(const float* in, int64_t count_per_rank, float* out) {
  // One rank's block of the sum is its own input: a copy, every bit kept.
  EMBER_CHECK(count_per_rank >= 0, "ReduceScatterSum: negative count {}", count_per_rank);
  if (count_per_rank == 0) return;
  EMBER_CHECK(in != nullptr && out != nullptr, "ReduceScatterSum: null buffer for {} elements", count_per_rank);
  EMBER_CHECK(in + count_per_rank <= out || out + count_per_rank <= in, "ReduceScatterSum: in and out overlap");
  std::copy_n(in, count_per_rank, out);
}

void LocalCommunicator::AllToAllV(const float* send, std::span<const int64_t> send_rows, float* recv,
                                  std::span<const int64_t> recv_rows, int64_t row_width) {
  EMBER_CHECK(send_rows.size() == 1 && recv_rows.size() == 1,
              "AllToAllV: {} send and {} receive counts for a world of 1", send_rows.size(), recv_rows.size());
  EMBER_CHECK(row_width >= 0, "AllToAllV: negative row width {}", row_width);
  EMBER_CHECK(send_rows[0] >= 0, "AllToAllV: negative row count {}", send_rows[0]);
  EMBER_CHECK(send_rows[0] == recv_rows[0], "AllToAllV: rank 0 sends itself {} rows but expects {}", send_rows[0],
              recv_rows[0]);
  const int64_t count = send_rows[0] * row_width;
  if (count == 0) return;
  EMBER_CHECK(send != nullptr && recv != nullptr, "AllToAllV: null buffer for {} rows", send_rows[0]);
  EMBER_CHECK(send + count <= recv || recv + count <= send, "AllToAllV: send and recv overlap");
  std::copy_n(send, count, recv);
}

void LocalCommunicator::Broadcast(void* data, int64_t bytes, int root) {
  EMBER_CHECK(root == 0, "Broadcast: root {} in a world of 1", root);
  EMBER_CHECK(bytes >= 0, "Broadcast: negative size {}", bytes);
  EMBER_CHECK(bytes == 0 || data != nullptr, "Broadcast: null data for {} bytes", bytes);
}

// A group of one has no peer: a Send or Recv here would wait forever, so it is a bug at the call.
void LocalCommunicator::Send(const void* data, int64_t bytes, int dest, int tag) {
  EMBER_CHECK(false, "Send to rank {} (tag {}) in a world of 1: there is no peer", dest, tag);
}

void LocalCommunicator::Recv(void* data, int64_t bytes, int source, int tag) {
  EMBER_CHECK(false, "Recv from rank {} (tag {}) in a world of 1: there is no peer", source, tag);
}

}  // namespace ember::exec
