#!/usr/bin/env bash
# The sanitizer builds (docs/reliability.md), with clang:
#   scripts/sanitize.sh address [gtest args...]  ASan+UBSan build in build-asan/ (WHITTLE_FUZZ=ON: the
#       same folder builds the fuzz targets, scripts/fuzz.sh), then every test of tests/lib and
#       tests/runtime (whittle_sanitize_tests, with the CLIs they run)
#   scripts/sanitize.sh thread [gtest args...]   TSan build in build-tsan/ (no OpenMP: see
#       CMakeLists.txt), then the concurrency tests
#   scripts/sanitize.sh ci                       what scripts/test.sh runs: address, each fuzz target
#       for FUZZ_SECONDS (default 60) from its seeds plus the saved regressions, then thread
#   scripts/sanitize.sh configure address|thread only configures the folder
# Extra arguments go to whittle_sanitize_tests (a --gtest_filter there replaces the default one).
# JOBS sets the build's parallelism (default nproc). Installs clang and libFuzzer when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

configure() {  # configure MODE: build-asan (address + fuzz targets) or build-tsan
  local mode=$1 dir fuzz=OFF
  case "$mode" in
    address) dir=build-asan; fuzz=ON ;;
    thread) dir=build-tsan ;;
    *) echo "sanitize.sh: unknown mode '$mode' (address or thread)" >&2; exit 2 ;;
  esac
  if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    scripts/install-deps.sh --sanitizers
  fi
  [ -f "$dir/CMakeCache.txt" ] && return 0
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # -O1 and line tables only: the sanitizers' usual optimization level, stacks with file:line,
  # and a build about twice as fast as -O2 -g.
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DWHITTLE_SANITIZE="$mode" -DWHITTLE_FUZZ="$fuzz" -DWHITTLE_CUDA=OFF -DWHITTLE_BUILD_BENCH=OFF >/dev/null
}

run_tests() {  # run_tests MODE [gtest args...]
  local mode=$1 dir
  shift
  [ "$mode" = address ] && dir=build-asan || dir=build-tsan
  configure "$mode"
  local t0=$SECONDS
  cmake --build "$dir" -j"${JOBS:-$(nproc)}" --target whittle_sanitize_tests
  echo "sanitize.sh: $mode build took $((SECONDS - t0)) s"
  local filter=()
  if [ "$mode" = thread ] && ! printf '%s\n' "$@" | grep -q -- '--gtest_filter'; then
    # Threads on one or several sessions, concurrent kernel callers, intra-op thread counts, and
    # the batching session's queue, workers, Swap and Shutdown.
    filter=(--gtest_filter='*Concurren*:*Thread*:BatchingSession.*')
  fi
  # UBSan findings abort (-fno-sanitize-recover=undefined); leaks are reported at exit.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:allocator_may_return_null=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitizers/lsan.supp}
  t0=$SECONDS
  "$dir/bin/whittle_sanitize_tests" --gtest_brief=1 "${filter[@]}" "$@"
  echo "sanitize.sh: $mode tests took $((SECONDS - t0)) s"
}

mode=${1:-address}
[[ $# -gt 0 ]] && shift
case "$mode" in
  configure) configure "${1:?configure needs address or thread}" ;;
  address|thread) run_tests "$mode" "$@" ;;
  ci)
    run_tests address
    for t in fuzz_model_load_run fuzz_data_readers fuzz_passes; do
      # A fixed seed: the run explores the same inputs in the same order on every machine (a
      # slower one gets less far along the same sequence), so a green run here is reproducible.
      scripts/fuzz.sh "$t" "${FUZZ_SECONDS:-60}" -seed="${FUZZ_SEED:-1}"
    done
    scripts/fuzz.sh --regressions
    run_tests thread
    ;;
  *) echo "usage: scripts/sanitize.sh address|thread|ci|configure MODE [gtest args...]" >&2; exit 2 ;;
esac
