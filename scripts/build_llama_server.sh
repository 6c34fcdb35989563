#!/usr/bin/env bash
# Builds llama.cpp's OpenAI-compatible server (llama-server) once, for the
# serving head-to-head (scripts/bench_vs_llamacpp_serve.sh). The source is the
# llama.cpp tree bundled in the llama-cpp-python sdist pinned in
# requirements/dev.txt, so ember's peer numbers come from the same llama.cpp
# version the Python comparisons use.
#
#   scripts/build_llama_server.sh            # prints the binary's path
#
# Environment:
#   LLAMA_CPP_SRC   an unpacked llama.cpp tree (default: the sdist's vendor/llama.cpp,
#                   downloaded with pip into a temp dir when not already unpacked)
#   EMBER_CACHE     cache root (default ~/.cache/ember); the binary lands in
#                   $EMBER_CACHE/llama.cpp/bin/llama-server
#   JOBS            parallel compile jobs (default: nproc)
#   USE_WHEEL_LIBS  1: compile only the server's own sources (server, common, HTTP) and
#                   link them against the shared libllama/libggml/libmtmd that the
#                   installed llama-cpp-python wheel ships (the same llama.cpp version,
#                   built on this machine by pip); about a third of the full build,
#                   for machines where the full build takes too long
#
# Idempotent: when the binary exists, runs, and was built from the same source
# version, the script only prints its path.
set -euo pipefail

version=0.3.36
cache="${EMBER_CACHE:-$HOME/.cache/ember}/llama.cpp"
bin="$cache/bin/llama-server"
stamp="$cache/bin/llama-server.version"

if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "llama-cpp-python-$version"* ]] &&
   "$bin" --version > /dev/null 2>&1; then
  echo "$bin"
  exit 0
fi

src="${LLAMA_CPP_SRC:-/tmp/lcp/llama_cpp_python-$version/vendor/llama.cpp}"
if [[ ! -f "$src/CMakeLists.txt" ]]; then
  repo_root="$(cd "$(dirname "$0")/.." && pwd)"
  pip="$repo_root/.venv/bin/pip"
  [[ -x "$pip" ]] || pip=pip
  # A fixed place beside the build tree, so a rerun finds the same source (a build tree is tied
  # to the source directory it was configured from).
  tmp="$cache/sdist"
  mkdir -p "$tmp"
  echo "fetching the llama-cpp-python $version sdist into $tmp" >&2
  "$pip" download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$tmp" >&2
  tar -xzf "$tmp"/llama_cpp_python-"$version".tar.gz -C "$tmp"
  src="$tmp/llama_cpp_python-$version/vendor/llama.cpp"
fi

# A build tree configured from another source directory (an earlier temporary one) cannot be
# reused: start it afresh.
if [[ -f "$cache/build/CMakeCache.txt" ]] &&
   ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$src" "$cache/build/CMakeCache.txt"; then
  echo "the llama.cpp build tree was configured from another source directory: rebuilding it" >&2
  rm -rf "$cache/build"
fi

# Static libraries so the binary does not depend on the build tree; the web UI
# is left out (no network, and the benchmark only needs the HTTP API).
cmake -S "$src" -B "$cache/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DGGML_NATIVE=ON >&2
mkdir -p "$cache/bin"
if [[ "${USE_WHEEL_LIBS:-0}" == 1 ]]; then
  python="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python"
  wheel_lib="$("$python" -c 'import llama_cpp, os; print(os.path.realpath(os.path.join(os.path.dirname(llama_cpp.__file__), "lib")))')"
  # The object files of the server's own static libraries; the linker takes
  # llama, ggml and mtmd from the wheel instead of building them.
  objs=()
  for dir in tools/server/CMakeFiles/llama-server.dir tools/server/CMakeFiles/llama-server-impl.dir \
             tools/server/CMakeFiles/server-context.dir common/CMakeFiles/llama-common.dir \
             common/CMakeFiles/llama-common-base.dir vendor/hash/CMakeFiles/vendor-hash.dir \
             tools/ui/CMakeFiles/llama-ui.dir vendor/cpp-httplib/CMakeFiles/cpp-httplib.dir; do
    while read -r o; do objs+=("$o"); done < <(grep -oE "^build $dir/[^ :]+\.o" "$cache/build/build.ninja" | sed 's/^build //')
  done
  ninja -C "$cache/build" -j "${JOBS:-$(nproc)}" "${objs[@]}" >&2
  (cd "$cache/build" && c++ -O3 "${objs[@]}" -o "$bin" -L"$wheel_lib" -Wl,-rpath,"$wheel_lib" \
     -lmtmd -lllama -lggml -lggml-cpu -lggml-base -lgomp -lpthread -ldl -lm)
  echo "llama-cpp-python-$version (server linked against $wheel_lib)" > "$stamp"
else
  ninja -C "$cache/build" -j "${JOBS:-$(nproc)}" llama-server >&2
  cp "$cache/build/bin/llama-server" "$bin"
  echo "llama-cpp-python-$version" > "$stamp"
fi
echo "$bin"
