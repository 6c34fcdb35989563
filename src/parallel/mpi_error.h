// MPI error codes as text, for the messages of ember_parallel's .cc files (internal: <mpi.h> is
// not needed to call it).
#pragma once

#include <string>

namespace ember::parallel::internal {

// MPI_Error_string of `code`, or "MPI error <code>" when the library does not know it.
std::string MpiErrorString(int code);

}  // namespace ember::parallel::internal
