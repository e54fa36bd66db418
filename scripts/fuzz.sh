#!/usr/bin/env bash
# Builds Whittle's libFuzzer targets (tests/fuzz/; clang, ASan+UBSan, CMake option WHITTLE_FUZZ)
# into build-fuzz/ and runs one for a bounded time on its seed corpus (tests/fuzz/make_seeds.sh):
#   scripts/fuzz.sh [TARGET] [SECONDS] [extra libFuzzer flags...]
#     TARGET   fuzz_model_load_run (default), fuzz_data_readers or fuzz_passes
#     SECONDS  -max_total_time (default 60)
#   scripts/fuzz.sh --regressions   runs every target once over tests/fuzz/regressions/<target>/
# Needs clang and libFuzzer (Debian 12: apt-get install -y clang libfuzzer-14-dev). The corpus a
# campaign grows is kept in build-fuzz/corpus/<target>; crashes go to build-fuzz/artifacts/<target>/.
# JOBS (default 2) sets the build's parallelism, FUZZ_JOBS runs that many fuzzing processes (-fork).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
build="$root/build-fuzz"
targets=(fuzz_model_load_run fuzz_data_readers fuzz_passes)

if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: needs clang with libFuzzer: apt-get install -y clang libfuzzer-14-dev" >&2
  exit 1
fi

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

if [ ! -f "$build/CMakeCache.txt" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # -O1 and line tables only: ASan's usual optimization level, stacks with file:line, and a build
  # about twice as fast as -O2 -g.
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DWHITTLE_FUZZ=ON -DWHITTLE_CUDA=OFF -DWHITTLE_BUILD_TESTS=OFF -DWHITTLE_BUILD_BENCH=OFF >/dev/null
fi
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
  fuzz_passes) seeds="$build/seeds/model"; max_len=102400 ;;
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
