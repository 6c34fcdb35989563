// What can be checked of MPI's lifetime without mpiexec (tests/mpi runs the rest under it).
#include "parallel/mpi_runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace ember::parallel {
namespace {

TEST(MpiRuntimeTest, LaunchedByMpiReadsTheLaunchersVariables) {
  // ctest runs this suite outside mpiexec; the variables are set here one at a time.
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMIX_RANK");
  EXPECT_FALSE(LaunchedByMpi());
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_TRUE(LaunchedByMpi());
  unsetenv("OMPI_COMM_WORLD_SIZE");
  setenv("PMIX_RANK", "0", 1);
  EXPECT_TRUE(LaunchedByMpi());
  unsetenv("PMIX_RANK");
}

}  // namespace
}  // namespace ember::parallel
