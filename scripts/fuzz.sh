#!/usr/bin/env bash
# Builds Whittle's libFuzzer targets (tests/fuzz/; clang, ASan+UBSan, CMake option WHITTLE_FUZZ)
# into build-asan/ and runs one for a bounded time on its seed corpus (tests/fuzz/make_seeds.sh):
#   scripts/fuzz.sh [TARGET] [SECONDS] [extra libFuzzer flags...]
#     TARGET   fuzz_model_load_run (default), fuzz_data_readers or fuzz_passes
#     SECONDS  -max_total_time (default 60)
#   scripts/fuzz.sh --regressions   runs every target once over tests/fuzz/regressions/<target>/
# Installs clang and libFuzzer when missing (scripts/install-deps.sh --sanitizers). The corpus a
# campaign grows is kept in build-asan/corpus/<target>; crashes go to build-asan/artifacts/<target>/.
# JOBS (default 2) sets the build's parallelism, FUZZ_JOBS runs that many fuzzing processes (-fork).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
build="$root/build-asan"
targets=(fuzz_model_load_run fuzz_data_readers fuzz_passes)

regress=0
if [ "${1:-}" = "--regressions" ]; then
  regress=1
  target=all
else
  target="${1:-fuzz_model_load_run}"
  secs="${2:-60}"
  shift $(($# < 2 ? $# : 2))
  case " ${targets[*]} " in *" $target "*) ;; *) echo "fuzz.sh: unknown target '$target' (${targets[*]})" >&2; exit 2 ;; esac
fi

# The ASan+UBSan folder the sanitizer tests use too (scripts/sanitize.sh configures it).
"$root/scripts/sanitize.sh" configure address
if [ "$regress" = 1 ]; then
  cmake --build "$build" -j"${JOBS:-2}" --target "${targets[@]}"
else
  cmake --build "$build" -j"${JOBS:-2}" --target "$target"
fi

export OMP_NUM_THREADS=1
# allocator_may_return_null: an allocation too large to have returns null, which the library
# turns into a ResourceExhausted error (issue 41), as the release build does.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/sanitizers/lsan.supp}"

if [ "$regress" = 1 ]; then
  status=0
  for t in "${targets[@]}"; do
    dir="$root/tests/fuzz/regressions/$t"
    [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ] || continue
    for f in "$dir"/*; do
      if "$build/bin/$t" -rss_limit_mb=2048 -timeout=10 "$f" >"$build/regress.log" 2>&1; then
        echo "ok    $t $(basename "$f")"
      else
        log="$build/regress-$t-$(basename "$f").log"
        mv "$build/regress.log" "$log"
        echo "FAIL  $t $(basename "$f") (log: $log)"; status=1
      fi
    done
  done
  exit $status
fi

[ -d "$build/seeds/model" ] || "$root/tests/fuzz/make_seeds.sh" "$build/seeds"
case "$target" in
  fuzz_data_readers) seeds="$build/seeds/data"; max_len=65536 ;;
  fuzz_passes) seeds="$build/seeds/model"; max_len=16384 ;;
  *) seeds="$build/seeds/model"; max_len=262144 ;;
esac
corpus="$build/corpus/$target"
mkdir -p "$corpus" "$build/artifacts/$target"
# The regression inputs are not in the corpus (one that still crashes would end every run at
# once): --regressions runs them.
dirs=("$corpus" "$seeds")
fork=()
[ -n "${FUZZ_JOBS:-}" ] && fork=(-fork="$FUZZ_JOBS" -ignore_crashes=1)
exec "$build/bin/$target" -max_total_time="$secs" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$build/artifacts/$target/" "${fork[@]}" "$@" "${dirs[@]}"
