// The MPI library's lifetime in one process: MPI_Init_thread on Init, MPI_Finalize when the runtime
// goes. Tensor-parallel ember runs one process per rank under mpirun; rank 0 serves, the others
// are workers. This header does not include <mpi.h>, so code that starts MPI needs no MPI
// include paths beyond ember_parallel's.
#pragma once

#include <memory>

#include "core/status.h"

namespace ember::parallel {

// True when this process was started by mpirun / mpiexec (Open MPI sets OMPI_COMM_WORLD_SIZE,
// PMIx launchers PMIX_RANK): the signal to call MpiRuntime::Init rather than run alone.
bool LaunchedByMpi();

class MpiRuntime {
 public:
  // Initialises MPI with MPI_THREAD_SERIALIZED: the collectives run on the engine thread, not on
  // the thread that called Init, and never on two threads at once. Fails when the library offers
  // less, when MPI was already initialised (one runtime per process) or when it was finalised.
  static Expected<std::unique_ptr<MpiRuntime>> Init(int* argc, char*** argv);

  // MPI_Finalize: every MpiCommunicator must be gone by then.
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // This process's rank in MPI_COMM_WORLD, in [0, world_size()).
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

 private:
  MpiRuntime(int world_rank, int world_size) : world_rank_(world_rank), world_size_(world_size) {}

  int world_rank_;
  int world_size_;
};

}  // namespace ember::parallel
