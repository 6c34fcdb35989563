# xgrammar's C++ core (the grammar engine behind vLLM's, SGLang's and TensorRT-LLM's structured
# outputs), built from its pinned PyPI source distribution with the Python bindings off. The sdist
# carries the C++ sources and its header-only dependencies (dlpack, picojson); none of it is
# committed here. scripts/setup downloads it with the venv's pip; a configure that finds it
# missing does the same, so a fresh clone needs no network beyond PyPI.
set(EMBER_XGRAMMAR_VERSION 0.2.9)
set(EMBER_XGRAMMAR_SHA256 87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90)
set(EMBER_XGRAMMAR_SDIST "${PROJECT_SOURCE_DIR}/.deps/xgrammar-${EMBER_XGRAMMAR_VERSION}.tar.gz"
    CACHE FILEPATH "xgrammar's PyPI source distribution")

if(NOT EXISTS "${EMBER_XGRAMMAR_SDIST}")
  set(pip "${PROJECT_SOURCE_DIR}/.venv/bin/pip")
  if(NOT EXISTS "${pip}")
    message(FATAL_ERROR "xgrammar's sdist is missing (${EMBER_XGRAMMAR_SDIST}) and there is no .venv to "
                        "download it with: run scripts/setup")
  endif()
  get_filename_component(sdist_dir "${EMBER_XGRAMMAR_SDIST}" DIRECTORY)
  message(STATUS "Downloading xgrammar ${EMBER_XGRAMMAR_VERSION}'s sdist from PyPI")
  # --no-binary for xgrammar alone: its build dependencies may come as wheels (metadata only).
  execute_process(COMMAND "${pip}" download --quiet --no-deps --no-binary xgrammar -d "${sdist_dir}"
                          "xgrammar==${EMBER_XGRAMMAR_VERSION}"
                  RESULT_VARIABLE pip_result)
  if(NOT pip_result EQUAL 0)
    message(FATAL_ERROR "pip could not download xgrammar==${EMBER_XGRAMMAR_VERSION}")
  endif()
endif()
file(SHA256 "${EMBER_XGRAMMAR_SDIST}" sdist_hash)
if(NOT sdist_hash STREQUAL EMBER_XGRAMMAR_SHA256)
  message(FATAL_ERROR "${EMBER_XGRAMMAR_SDIST}: SHA-256 ${sdist_hash}, expected ${EMBER_XGRAMMAR_SHA256}")
endif()

set(xgrammar_src "${PROJECT_BINARY_DIR}/_deps/xgrammar-${EMBER_XGRAMMAR_VERSION}")
if(NOT EXISTS "${xgrammar_src}/CMakeLists.txt")
  file(ARCHIVE_EXTRACT INPUT "${EMBER_XGRAMMAR_SDIST}" DESTINATION "${PROJECT_BINARY_DIR}/_deps")
endif()

# xgrammar's CMakeLists reads ${CMAKE_BINARY_DIR}/config.cmake first, before its own (which turns
# the Python bindings on): this one keeps the build to the static C++ library.
file(WRITE "${PROJECT_BINARY_DIR}/config.cmake"
     "set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)\nset(XGRAMMAR_BUILD_CXX_TESTS OFF)\n"
     "set(XGRAMMAR_ENABLE_CPPTRACE OFF)\nset(XGRAMMAR_ENABLE_COVERAGE OFF)\nset(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)\n")
add_subdirectory("${xgrammar_src}" "${PROJECT_BINARY_DIR}/_deps/xgrammar-build" EXCLUDE_FROM_ALL SYSTEM)
# Its flags add -Werror and -flto=auto: a warning from a newer compiler must not break ember's
# build, and LTO objects in a static archive need the compiler's own ar. Later flags win.
target_compile_options(xgrammar PRIVATE -Wno-error -fno-lto -w)
