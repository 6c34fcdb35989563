#!/usr/bin/env bash
# Fuzzes each target for SECONDS under libFuzzer (the asan preset's build in build/asan), one
# after the other: `make test-fuzz` (a short run, part of `make test`) and `make fuzz` (longer).
#   tests/fuzz/run.sh SECONDS TARGET...
# New interesting inputs collect in build/asan/fuzz/corpus/<target> (kept between runs, never
# committed); the committed corpus/<target>/ is read, never written. A crash, a sanitizer report,
# a leak, an input slower than FUZZ_UNIT_TIMEOUT seconds or one needing more than FUZZ_RSS_MB of
# memory stops that target, prints where its input was written and how to replay it, and makes
# the whole run fail (after the remaining targets have run).
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=$1
shift
build=build/asan
work=$build/fuzz
artifacts=$work/artifacts
unit_timeout=${FUZZ_UNIT_TIMEOUT:-10}
rss_mb=${FUZZ_RSS_MB:-2048}
mkdir -p "$artifacts"
failed=()
for target in "$@"; do
  exe=$build/tests/fuzz/$target
  if [[ ! -x $exe ]]; then
    echo "fuzz: $exe is not built (make asan-build)" >&2
    exit 2
  fi
  mkdir -p "$work/corpus/$target"
  log=$work/fuzz-$target.log
  before=$(ls "$artifacts" | sort)
  start=$(date +%s)
  "$exe" -max_total_time="$seconds" -timeout="$unit_timeout" -rss_limit_mb="$rss_mb" -print_final_stats=1 \
    -artifact_prefix="$artifacts/$target-" "$work/corpus/$target" "tests/fuzz/corpus/$target" > "$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [[ $rc -eq 0 ]]; then
    echo "fuzz: $target ok: ${runs:-?} runs in $(($(date +%s) - start)) s (${speed:-?}/s), $(ls "$work/corpus/$target" | wc -l) inputs in $work/corpus/$target"
    continue
  fi
  failed+=("$target")
  echo "fuzz: $target FAILED (exit $rc) after ${runs:-?} runs; the end of $log:" >&2
  grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*Test unit written|.*ALARM|.*out-of-memory|.*deadly signal)' "$log" | head -20 >&2
  for new in $(comm -13 <(echo "$before") <(ls "$artifacts" | sort)); do
    echo "fuzz: input that failed: $artifacts/$new" >&2
    echo "fuzz:   replay: $exe $artifacts/$new; once fixed, commit it as tests/fuzz/corpus/$target/crash-<what>" >&2
  done
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
