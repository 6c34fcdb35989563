// Latency of decode-sized all-reduces: MpiCommunicator::AllReduceSum (point-to-point exchange,
// rank-order sum, a wait loop that backs off) against plain MPI_Allreduce, on the same ranks.
//
//   export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # when root
//     mpiexec -n 2 --oversubscribe build/release/bench/mpi/ember_mpi_allreduce_bench [iterations] [work_us]
//
// Each rank calls the all-reduce `iterations` times in a loop (after a warm-up), optionally
// spinning `work_us` microseconds before each call to stand for a layer's compute, and times
// every call. Rank 0 prints the median, p90, p99 and mean per call, in microseconds. Then every
// rank but 0 waits 2 s in a Broadcast (a worker between requests) while rank 0 sleeps, and rank 1
// reports the CPU time that wait took, for each of the two.
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "parallel/mpi_communicator.h"
#include "parallel/mpi_runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

void Spin(int work_us) {
  if (work_us <= 0) return;
  const auto end = Clock::now() + std::chrono::microseconds(work_us);
  while (Clock::now() < end) {
  }
}

struct Stats {
  double p50, p90, p99, mean;
};

template <typename Call>
Stats Measure(int iterations, int work_us, Call call) {
  for (int i = 0; i < iterations / 10 + 10; ++i) call();  // warm-up
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<double> us(static_cast<size_t>(iterations));
  for (double& t : us) {
    Spin(work_us);
    const auto start = Clock::now();
    call();
    t = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  double sum = 0;
  for (double t : us) sum += t;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[static_cast<size_t>(q * static_cast<double>(us.size() - 1))]; };
  return {at(0.5), at(0.9), at(0.99), sum / static_cast<double>(us.size())};
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// CPU seconds rank 1 spends in `broadcast` while rank 0 sleeps two seconds before joining it.
template <typename Call>
double IdleWaitCpu(int rank, Call broadcast) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double before = CpuSeconds();
  if (rank == 0) std::this_thread::sleep_for(std::chrono::seconds(2));
  broadcast();
  return CpuSeconds() - before;
}

}  // namespace

int main(int argc, char** argv) {
  auto runtime = ember::parallel::MpiRuntime::Init(&argc, &argv);
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
    return 1;
  }
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int work_us = argc > 2 ? std::atoi(argv[2]) : 0;
  const int rank = (*runtime)->world_rank();
  {
    auto comm = ember::parallel::MpiCommunicator::World();
    MPI_Comm mpi_comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &mpi_comm);
    if (rank == 0) {
      std::printf("%d ranks, %d calls each, %d us of work between calls; microseconds per call\n",
                  (*runtime)->world_size(), iterations, work_us);
      std::printf("%-22s %6s %8s %8s %8s %8s\n", "all-reduce", "floats", "p50", "p90", "p99", "mean");
    }
    for (int count : {576, 2048}) {
      std::vector<float> data(static_cast<size_t>(count), 1.0f);
      const Stats mpi = Measure(iterations, work_us, [&] {
        MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, mpi_comm);
        std::fill(data.begin(), data.end(), 1.0f);
      });
      const Stats ours = Measure(iterations, work_us, [&] {
        comm->AllReduceSum(data.data(), count);
        std::fill(data.begin(), data.end(), 1.0f);
      });
      if (rank == 0) {
        for (const auto& [name, s] : {std::pair{"MPI_Allreduce", mpi}, std::pair{"AllReduceSum (ember)", ours}}) {
          std::printf("%-22s %6d %8.2f %8.2f %8.2f %8.2f\n", name, count, s.p50, s.p90, s.p99, s.mean);
        }
      }
    }
    int64_t word = 0;
    const double mpi_cpu = IdleWaitCpu(rank, [&] { MPI_Bcast(&word, 1, MPI_INT64_T, 0, mpi_comm); });
    const double our_cpu = IdleWaitCpu(rank, [&] { comm->Broadcast(&word, sizeof word, 0); });
    if (rank == 1) {
      std::printf("a 2 s wait in a broadcast took %.2f CPU s in MPI_Bcast, %.2f in Broadcast (ember)\n", mpi_cpu,
                  our_cpu);
    }
    MPI_Comm_free(&mpi_comm);
  }
  runtime->reset();
  return 0;
}
