// Entry point of whittle_bench: every tests/bench/*.cc registers its Google Benchmark cases.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
