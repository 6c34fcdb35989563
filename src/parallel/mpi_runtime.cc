#include "parallel/mpi_runtime.h"

#include <mpi.h>

#include <cstdlib>

#include <fmt/format.h>

#include "parallel/mpi_error.h"

namespace ember::parallel {
namespace {

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

}  // namespace

namespace internal {

std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(length));
}

}  // namespace internal

bool LaunchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

Expected<std::unique_ptr<MpiRuntime>> MpiRuntime::Init(int* argc, char*** argv) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized || finalized) {
    return Internal(fmt::format("MPI is already {}: one MpiRuntime per process, created once",
                                finalized ? "finalised" : "initialised"));
  }
  int provided = MPI_THREAD_SINGLE;
  const int code = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (code != MPI_SUCCESS) {
    return Internal(fmt::format("MPI_Init_thread failed: {}", internal::MpiErrorString(code)));
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    // The engine thread makes the MPI calls; under FUNNELED only the main thread may.
    MPI_Finalize();
    return Unimplemented(fmt::format(
        "the MPI library offers only {}; ember's collectives run on the engine thread and need "
        "MPI_THREAD_SERIALIZED (build Open MPI with thread support)",
        ThreadLevelName(provided)));
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiRuntime>(new MpiRuntime(rank, size));
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace ember::parallel
