#!/usr/bin/env bash
# The sanitizer builds (docs/reliability.md): configure, build whittle_tests and run the tests each
# one covers. `address`: ASan+UBSan (RelWithDebInfo, build-asan/), the unit tests of lib/ and
# runtime/; `thread`: TSan (build-tsan/, no OpenMP: see CMakeLists.txt), the concurrency tests.
# Extra arguments go to whittle_tests (a --gtest_filter there replaces the default one).
# Usage: scripts/sanitize.sh [address|thread] [gtest args...]   (JOBS=N for the build, default nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
[[ $# -gt 0 ]] && shift
case "$mode" in
  address) dir=build-asan ;;
  thread) dir=build-tsan ;;
  *) echo "usage: scripts/sanitize.sh [address|thread] [gtest args...]" >&2; exit 2 ;;
esac

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWHITTLE_SANITIZE="$mode" -DWHITTLE_CUDA=OFF \
      -DWHITTLE_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
t0=$SECONDS
cmake --build "$dir" -j"${JOBS:-$(nproc)}" --target whittle_tests
echo "sanitize.sh: $mode build took $((SECONDS - t0)) s"

filter=()
if ! printf '%s\n' "$@" | grep -q -- '--gtest_filter'; then
  if [[ $mode == address ]]; then
    # Every test suite defined under tests/lib and tests/runtime (TEST, TEST_F and TEST_P ones).
    suites=$(grep -rhoE '^(TEST|TEST_F|TEST_P)\([A-Za-z0-9_]+' tests/lib tests/runtime | sed -E 's/.*\(//' | sort -u)
    pattern=$(for s in $suites; do printf '%s.*:*/%s.*:' "$s" "$s"; done)
    filter=(--gtest_filter="${pattern%:}")
  else
    # Several threads on one session / one kernel, and the intra-op thread-count tests.
    filter=(--gtest_filter='*Concurren*:*ThreadCount*:*Thread*')
  fi
fi

# UBSan findings abort (-fno-sanitize-recover=undefined); leaks are reported at exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
t0=$SECONDS
"$dir/bin/whittle_tests" --gtest_brief=1 "${filter[@]}" "$@"
echo "sanitize.sh: $mode tests took $((SECONDS - t0)) s"
