#include "parallel/mpi_communicator.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/check.h"
#include "core/logging.h"
#include "parallel/mpi_error.h"

namespace ember::parallel {
namespace {

// Collectives' tags start where user tags end, so a user Send/Recv can never match one of their
// messages (and vice versa). Successive calls of one collective may share a tag: MPI delivers
// messages between two ranks with one tag in the order they were posted, and every rank calls
// the collectives in the same order.
enum CollectiveTag : int {
  kTagAllReduceSum = exec::Communicator::kMaxUserTag,
  kTagReduceScatterSum,
  kTagAllGather,
  kTagAllToAllV,
  kTagBroadcast,
  kTagAllReduceMin,
  kTagAllReduceSumChunks,  // the second round of a two-round AllReduceSum
};
// MPI guarantees tags up to 32767 (MPI_TAG_UB is at least that).
static_assert(kTagAllReduceSumChunks <= 32767);

constexpr int64_t kDefaultMaxChunkBytes = int64_t{1} << 30;
// AllReduceSum payloads from this size on, over more than two ranks, take two rounds (each rank
// sums its own chunk, then the chunks are shared): a rank sends 2 (p - 1) / p of the payload
// instead of p - 1 times it. Below it the one-round exchange's single latency wins.
constexpr int64_t kTwoRoundBytes = int64_t{64} << 10;
constexpr int64_t kFloatBytes = sizeof(float);

// The wait loop's back-off while nothing completes, by the time since the last progress: spin on
// MPI_Testsome for the first kSpinFor (a decode step's peers are usually microseconds behind),
// then sched_yield between polls until kYieldFor (on a core of its own this is still a spin; on
// a shared core it hands the core to the rank being waited for), then sleep, from 1 us doubling
// to kMaxSleep, so that a rank that waits long (a worker between requests) costs next to no CPU
// and notices a message within ~100 us.
constexpr std::chrono::microseconds kSpinFor{50};
constexpr std::chrono::microseconds kYieldFor{1000};
constexpr std::chrono::microseconds kMaxSleep{100};

class Backoff {
 public:
  void Reset(std::chrono::steady_clock::time_point now) {
    since_ = now;
    sleep_ = std::chrono::microseconds(1);
  }
  void Wait(std::chrono::steady_clock::time_point now) {
    const auto idle = now - since_;
    if (idle < kSpinFor) return;
    if (idle < kYieldFor) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, kMaxSleep);
  }

 private:
  std::chrono::steady_clock::time_point since_;
  std::chrono::microseconds sleep_{1};
};

void CheckMpi(int code, const char* call) {
  EMBER_CHECK(code == MPI_SUCCESS, "{} failed: {}", call, internal::MpiErrorString(code));
}

// dst[i] = ((src_0[i] + src_1[i]) + src_2[i]) + ... over `ranks` blocks of `count` at
// blocks + r * count: the same order, hence the same bits, on every rank.
void SumInRankOrder(const float* blocks, int ranks, int64_t count, float* dst) {
  std::copy_n(blocks, count, dst);
  for (int r = 1; r < ranks; ++r) {
    const float* src = blocks + r * count;
    for (int64_t i = 0; i < count; ++i) dst[i] += src[i];
  }
}

bool Disjoint(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  return pa + a_bytes <= pb || pb + b_bytes <= pa;
}

}  // namespace

// Adds one call and its wall time to `stats` (time waiting for peers included: what a step
// spends in communication).
class TimedCall {
 public:
  explicit TimedCall(MpiCommunicator::CollectiveStats& stats) : stats_(stats), start_(std::chrono::steady_clock::now()) {}
  ~TimedCall() {
    ++stats_.calls;
    stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  MpiCommunicator::CollectiveStats& stats_;
  std::chrono::steady_clock::time_point start_;
};

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  std::vector<int> world_ranks;  // of each rank of this group
  double timeout_seconds = 0.0;
  FaultHandler fault_handler;
  int64_t max_chunk_bytes = kDefaultMaxChunkBytes;
  CollectiveStats stats;  // the collectives called on this group so far

  // The requests of the call in progress, with each one's peer (a rank of this group) and, for a
  // receive, the byte count its message must have (-1 for a send). Kept between calls so that a
  // decode step's collectives allocate nothing.
  std::vector<MPI_Request> requests;
  std::vector<int> request_peers;
  std::vector<int64_t> request_bytes;
  std::vector<int> completed;
  std::vector<MPI_Status> statuses;
  std::vector<float> scratch;          // every rank's block, gathered for a sum
  std::vector<int64_t> scratch_values;  // AllReduceMin's values
  std::vector<int64_t> send_offsets, recv_offsets;

  // Wraps `comm` (owned from now on) and learns its ranks' world ranks.
  explicit Impl(MPI_Comm owned) : comm(owned) {
    CheckMpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    CheckMpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    CheckMpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    MPI_Group group, world_group;
    CheckMpi(MPI_Comm_group(comm, &group), "MPI_Comm_group");
    CheckMpi(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group");
    std::vector<int> ranks(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
    world_ranks.resize(static_cast<size_t>(size));
    CheckMpi(MPI_Group_translate_ranks(group, size, ranks.data(), world_group, world_ranks.data()),
             "MPI_Group_translate_ranks");
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    fault_handler = [world_rank = world_ranks[static_cast<size_t>(rank)]](const std::string& message) {
      EMBER_LOG_ERROR("rank {}: {}", world_rank, message);
      MPI_Abort(MPI_COMM_WORLD, 1);
    };
  }

  void CheckPeer(int peer, const char* what) const {
    EMBER_CHECK(peer >= 0 && peer < size && peer != rank, "{}: rank {} is not a peer of rank {} in a group of {}",
                what, peer, rank, size);
  }

  // Posts `bytes` at `data` to `peer` as one message per chunk (at least one, empty if need be).
  void PostSend(const void* data, int64_t bytes, int peer, int tag) {
    const auto* p = static_cast<const char*>(data);
    int64_t offset = 0;
    do {
      const int64_t chunk = std::min(bytes - offset, max_chunk_bytes);
      MPI_Request request;
      CheckMpi(MPI_Isend(p + offset, static_cast<int>(chunk), MPI_BYTE, peer, tag, comm, &request), "MPI_Isend");
      requests.push_back(request);
      request_peers.push_back(peer);
      request_bytes.push_back(-1);
      offset += chunk;
    } while (offset < bytes);
  }

  // The matching receive: the same chunks, each checked for its size when it arrives.
  void PostRecv(void* data, int64_t bytes, int peer, int tag) {
    auto* p = static_cast<char*>(data);
    int64_t offset = 0;
    do {
      const int64_t chunk = std::min(bytes - offset, max_chunk_bytes);
      MPI_Request request;
      CheckMpi(MPI_Irecv(p + offset, static_cast<int>(chunk), MPI_BYTE, peer, tag, comm, &request), "MPI_Irecv");
      requests.push_back(request);
      request_peers.push_back(peer);
      request_bytes.push_back(chunk);
      offset += chunk;
    } while (offset < bytes);
  }

  // "rank 1 did not answer AllReduceSum within 30 s: it died or hangs", naming the world ranks
  // of the peers whose requests are still pending.
  std::string FaultMessage(const char* what) const {
    std::vector<int> late;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i] != MPI_REQUEST_NULL) late.push_back(world_ranks[static_cast<size_t>(request_peers[i])]);
    }
    std::sort(late.begin(), late.end());
    late.erase(std::unique(late.begin(), late.end()), late.end());
    const bool one = late.size() == 1;
    return fmt::format("{} {} did not answer {} within {:g} s: {}", one ? "rank" : "ranks", fmt::join(late, ", "),
                       what, timeout_seconds, one ? "it died or hangs" : "they died or hang");
  }

  // The sum in rank order of every rank's block for this rank, into `out` [count]: each peer p is
  // sent `block_for(p)` (a span; its length is what p expects) and this rank's own block is
  // `block_for(rank)`, which has `count` elements like every block received. The one-round
  // AllReduceSum, ReduceScatterSum and the first round of the two-round AllReduceSum are all this.
  // `out` may be a sent block: the sends complete before the sum is written.
  template <typename BlockFor>
  void SumBlocksInRankOrder(BlockFor block_for, int64_t count, float* out, int tag, const char* what) {
    scratch.resize(static_cast<size_t>(size * count));
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) PostRecv(scratch.data() + peer * count, count * kFloatBytes, peer, tag);
    }
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const std::span<const float> block = block_for(peer);
      PostSend(block.data(), static_cast<int64_t>(block.size()) * kFloatBytes, peer, tag);
    }
    std::copy_n(block_for(rank).data(), count, scratch.data() + rank * count);
    WaitAll(what);
    SumInRankOrder(scratch.data(), size, count, out);
  }

  // Waits for every posted request, then forgets them. Polls with MPI_Testsome, which also tells
  // which requests are done, so that a timeout can name the peers that are not.
  void WaitAll(const char* what) {
    const int n = static_cast<int>(requests.size());
    completed.resize(requests.size());
    statuses.resize(requests.size());
    const auto start = std::chrono::steady_clock::now();
    bool reported = false;
    int pending = n;
    Backoff backoff;
    backoff.Reset(start);
    while (pending > 0) {
      int done = 0;
      const int code = MPI_Testsome(n, requests.data(), &done, completed.data(), statuses.data());
      if (code == MPI_ERR_IN_STATUS) {
        for (int i = 0; i < done; ++i) {
          const int error = statuses[static_cast<size_t>(i)].MPI_ERROR;
          EMBER_CHECK(error == MPI_SUCCESS, "{}: a message with rank {} failed: {}", what,
                      world_ranks[static_cast<size_t>(request_peers[static_cast<size_t>(completed[i])])],
                      internal::MpiErrorString(error));
        }
      }
      CheckMpi(code, "MPI_Testsome");
      if (done == MPI_UNDEFINED) break;  // no active request left
      if (done > 0) {
        for (int i = 0; i < done; ++i) {
          const size_t index = static_cast<size_t>(completed[static_cast<size_t>(i)]);
          if (request_bytes[index] < 0) continue;
          int received = 0;
          CheckMpi(MPI_Get_count(&statuses[static_cast<size_t>(i)], MPI_BYTE, &received), "MPI_Get_count");
          EMBER_CHECK(received == request_bytes[index], "{}: rank {} sent {} bytes where {} were expected", what,
                      world_ranks[static_cast<size_t>(request_peers[index])], received, request_bytes[index]);
        }
        pending -= done;
        backoff.Reset(std::chrono::steady_clock::now());
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (!reported && timeout_seconds > 0.0 && std::chrono::duration<double>(now - start).count() > timeout_seconds) {
        reported = true;
        fault_handler(FaultMessage(what));
      }
      backoff.Wait(now);
    }
    requests.clear();
    request_peers.clear();
    request_bytes.clear();
  }
};

MpiCommunicator::MpiCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<MpiCommunicator> MpiCommunicator::World() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  EMBER_CHECK(initialized, "MpiCommunicator::World before MPI_Init (parallel::MpiRuntime::Init)");
  MPI_Comm comm;
  CheckMpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::make_unique<Impl>(comm)));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::Split(int color, int key) const {
  EMBER_CHECK(color >= 0, "Split: negative color {}", color);
  MPI_Comm comm;
  CheckMpi(MPI_Comm_split(impl_->comm, color, key, &comm), "MPI_Comm_split");
  auto impl = std::make_unique<Impl>(comm);
  impl->timeout_seconds = impl_->timeout_seconds;
  impl->fault_handler = impl_->fault_handler;
  impl->max_chunk_bytes = impl_->max_chunk_bytes;
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(impl)));
}

MpiCommunicator::~MpiCommunicator() {
  // After MPI_Finalize the handle cannot be freed (nor needs to be): the library is gone.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::world_size() const { return impl_->size; }

int MpiCommunicator::WorldRankOf(int rank) const {
  EMBER_CHECK(rank >= 0 && rank < impl_->size, "WorldRankOf: rank {} in a group of {}", rank, impl_->size);
  return impl_->world_ranks[static_cast<size_t>(rank)];
}

MpiCommunicator::CollectiveStats MpiCommunicator::stats() const { return impl_->stats; }

void MpiCommunicator::set_timeout(double seconds) {
  EMBER_CHECK(seconds >= 0.0, "set_timeout: negative timeout {}", seconds);
  impl_->timeout_seconds = seconds;
}

double MpiCommunicator::timeout() const { return impl_->timeout_seconds; }

void MpiCommunicator::set_fault_handler(FaultHandler handler) {
  EMBER_CHECK(handler != nullptr, "set_fault_handler: null handler");
  impl_->fault_handler = std::move(handler);
}

void MpiCommunicator::set_max_chunk_bytes(int64_t bytes) {
  EMBER_CHECK(bytes > 0 && bytes <= kDefaultMaxChunkBytes, "set_max_chunk_bytes: {} not in (0, {}]", bytes,
              kDefaultMaxChunkBytes);
  impl_->max_chunk_bytes = bytes;
}

void MpiCommunicator::AllReduceSum(float* data, int64_t count) {
  EMBER_CHECK(count >= 0, "AllReduceSum: negative count {}", count);
  EMBER_CHECK(count == 0 || data != nullptr, "AllReduceSum: null data for {} elements", count);
  Impl& m = *impl_;
  const TimedCall timed(m.stats);
  if (m.size == 1 || count == 0) return;
  const int64_t bytes = count * kFloatBytes;
  if (m.size > 2 && bytes >= kTwoRoundBytes) {
    // Round 1: rank r receives every rank's values of its chunk r and sums them in rank order;
    // round 2: every rank receives every other rank's summed chunk. Each element is summed by its
    // chunk's owner in the same order the one-round exchange uses, so the bits are the same.
    auto first = [&](int r) { return count * r / m.size; };
    auto chunk = [&](int r) { return std::span<const float>(data + first(r), first(r + 1) - first(r)); };
    const int64_t mine = first(m.rank + 1) - first(m.rank);
    m.SumBlocksInRankOrder(chunk, mine, data + first(m.rank), kTagAllReduceSum, "AllReduceSum");
    for (int peer = 0; peer < m.size; ++peer) {
      if (peer == m.rank) continue;
      m.PostRecv(data + first(peer), (first(peer + 1) - first(peer)) * kFloatBytes, peer, kTagAllReduceSumChunks);
    }
    for (int peer = 0; peer < m.size; ++peer) {
      if (peer != m.rank) m.PostSend(data + first(m.rank), mine * kFloatBytes, peer, kTagAllReduceSumChunks);
    }
    m.WaitAll("AllReduceSum");
    return;
  }
  // One round: every rank's whole vector, summed in rank order here.
  const std::span<const float> whole(data, static_cast<size_t>(count));
  m.SumBlocksInRankOrder([&](int) { return whole; }, count, data, kTagAllReduceSum, "AllReduceSum");
}

void MpiCommunicator::ReduceScatterSum(const float* in, int64_t count_per_rank, float* out) {
  EMBER_CHECK(count_per_rank >= 0, "ReduceScatterSum: negative count {}", count_per_rank);
  Impl& m = *impl_;
  const TimedCall timed(m.stats);
  if (count_per_rank == 0) return;
  EMBER_CHECK(in != nullptr && out != nullptr, "ReduceScatterSum: null buffer for {} elements", count_per_rank);
  const int64_t bytes = count_per_rank * kFloatBytes;
  EMBER_CHECK(Disjoint(in, m.size * bytes, out, bytes), "ReduceScatterSum: in and out overlap");
  // Every peer's block for this rank, then the rank-order sum.
  auto block = [&](int r) { return std::span<const float>(in + r * count_per_rank, count_per_rank); };
  m.SumBlocksInRankOrder(block, count_per_rank, out, kTagReduceScatterSum, "ReduceScatterSum");
}

void MpiCommunicator::AllGather(const float* in, int64_t count_per_rank, float* out) {
  EMBER_CHECK(count_per_rank >= 0, "AllGather: negative count {}", count_per_rank);
  Impl& m = *impl_;
  const TimedCall timed(m.stats);
  if (count_per_rank == 0) return;
  EMBER_CHECK(in != nullptr && out != nullptr, "AllGather: null buffer for {} elements", count_per_rank);
  const int64_t bytes = count_per_rank * kFloatBytes;
  float* own_slot = out + m.rank * count_per_rank;
  EMBER_CHECK(in == own_slot || Disjoint(in, bytes, out, m.size * bytes),
              "AllGather: in overlaps out without being this rank's slot");
  for (int peer = 0; peer < m.size; ++peer) {
    if (peer != m.rank) m.PostRecv(out + peer * count_per_rank, bytes, peer, kTagAllGather);
  }
  for (int peer = 0; peer < m.size; ++peer) {
    if (peer != m.rank) m.PostSend(in, bytes, peer, kTagAllGather);
  }
  if (in != own_slot) std::copy_n(in, count_per_rank, own_slot);
  m.WaitAll("AllGather");
}

void MpiCommunicator::AllToAllV(const float* send, std::span<const int64_t> send_rows, float* recv,
                                std::span<const int64_t> recv_rows, int64_t row_width) {
  Impl& m = *impl_;
  const TimedCall timed(m.stats);
  const auto size = static_cast<size_t>(m.size);
  EMBER_CHECK(send_rows.size() == size && recv_rows.size() == size,
              "AllToAllV: {} send and {} receive counts for a group of {}", send_rows.size(), recv_rows.size(), size);
  EMBER_CHECK(row_width >= 0, "AllToAllV: negative row width {}", row_width);
  // Offsets in floats, as prefix sums of the row counts.
  m.send_offsets.assign(size + 1, 0);
  m.recv_offsets.assign(size + 1, 0);
  for (size_t r = 0; r < size; ++r) {
    EMBER_CHECK(send_rows[r] >= 0 && recv_rows[r] >= 0, "AllToAllV: negative row count for rank {}", r);
    m.send_offsets[r + 1] = m.send_offsets[r] + send_rows[r] * row_width;
    m.recv_offsets[r + 1] = m.recv_offsets[r] + recv_rows[r] * row_width;
  }
  const auto self = static_cast<size_t>(m.rank);
  EMBER_CHECK(send_rows[self] == recv_rows[self], "AllToAllV: rank {} sends itself {} rows but expects {}", m.rank,
              send_rows[self], recv_rows[self]);
  const int64_t send_bytes = m.send_offsets[size] * kFloatBytes;
  const int64_t recv_bytes = m.recv_offsets[size] * kFloatBytes;
  EMBER_CHECK(send_bytes == 0 || send != nullptr, "AllToAllV: null send buffer for {} bytes", send_bytes);
  EMBER_CHECK(recv_bytes == 0 || recv != nullptr, "AllToAllV: null recv buffer for {} bytes", recv_bytes);
  EMBER_CHECK(send_bytes == 0 || recv_bytes == 0 || Disjoint(send, send_bytes, recv, recv_bytes),
              "AllToAllV: send and recv overlap");
  if (m.size == 1 && send_bytes == 0) return;
  // One message per peer even when it is empty: a peer that disagrees about a count then fails
  // the size check of WaitAll instead of waiting forever for a message that never comes.
  for (int peer = 0; peer < m.size; ++peer) {
    if (peer == m.rank) continue;
    const auto p = static_cast<size_t>(peer);
    const int64_t bytes = (m.recv_offsets[p + 1] - m.recv_offsets[p]) * kFloatBytes;
    m.PostRecv(recv + m.recv_offsets[p], bytes, peer, kTagAllToAllV);
  }
  for (int peer = 0; peer < m.size; ++peer) {
    if (peer == m.rank) continue;
    const auto p = static_cast<size_t>(peer);
    const int64_t bytes = (m.send_offsets[p + 1] - m.send_offsets[p]) * kFloatBytes;
    m.PostSend(send + m.send_offsets[p], bytes, peer, kTagAllToAllV);
  }
  std::copy_n(send + m.send_offsets[self], m.send_offsets[self + 1] - m.send_offsets[self],
              recv + m.recv_offsets[self]);
  m.WaitAll("AllToAllV");
}

void MpiCommunicator::Broadcast(void* data, int64_t bytes, int root) {
  Impl& m = *impl_;
  const TimedCall timed(m.stats);
  EMBER_CHECK(root >= 0 && root < m.size, "Broadcast: root {} in a group of {}", root, m.size);
  EMBER_CHECK(bytes >= 0, "Broadcast: negative size {}", bytes);
  EMBER_CHECK(bytes == 0 || data != nullptr, "Broadcast: null data for {} bytes", bytes);
  if (m.size == 1 || bytes == 0) return;
  if (m.rank == root) {
    for (int peer = 0; peer < m.size; ++peer) {
      if (peer != root) m.PostSend(data, bytes, peer, kTagBroadcast);
    }
  } else {
    m.PostRecv(data, bytes, root, kTagBroadcast);
  }
  m.WaitAll("Broadcast");
}

void MpiCommunicator::Send(const void* data, int64_t bytes, int dest, int tag) {
  Impl& m = *impl_;
  m.CheckPeer(dest, "Send");
  EMBER_CHECK(tag >= 0 && tag < kMaxUserTag, "Send: tag {} not in [0, {})", tag, kMaxUserTag);
  EMBER_CHECK(bytes >= 0, "Send: negative size {}", bytes);
  EMBER_CHECK(bytes == 0 || data != nullptr, "Send: null data for {} bytes", bytes);
  m.PostSend(data, bytes, dest, tag);
  m.WaitAll("Send");
}

void MpiCommunicator::Recv(void* data, int64_t bytes, int source, int tag) {
  Impl& m = *impl_;
  m.CheckPeer(source, "Recv");
  EMBER_CHECK(tag >= 0 && tag < kMaxUserTag, "Recv: tag {} not in [0, {})", tag, kMaxUserTag);
  EMBER_CHECK(bytes >= 0, "Recv: negative size {}", bytes);
  EMBER_CHECK(bytes == 0 || data != nullptr, "Recv: null data for {} bytes", bytes);
  m.PostRecv(data, bytes, source, tag);
  m.WaitAll("Recv");
}

int64_t MpiCommunicator::AllReduceMin(int64_t value) {
  Impl& m = *impl_;
  const TimedCall timed(m.stats);
  if (m.size == 1) return value;
  m.scratch_values.assign(static_cast<size_t>(m.size), value);
  for (int peer = 0; peer < m.size; ++peer) {
    if (peer == m.rank) continue;
    m.PostRecv(&m.scratch_values[static_cast<size_t>(peer)], sizeof(int64_t), peer, kTagAllReduceMin);
  }
  for (int peer = 0; peer < m.size; ++peer) {
    if (peer != m.rank) m.PostSend(&value, sizeof(int64_t), peer, kTagAllReduceMin);
  }
  m.WaitAll("AllReduceMin");
  return *std::min_element(m.scratch_values.begin(), m.scratch_values.end());
}

}  // namespace ember::parallel
