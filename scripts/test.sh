#!/usr/bin/env bash
# Set-up command 2: install what is missing, build, and run the whole test suite (unit tests,
# CLI end-to-end tests, the ONNX backend conformance suite, and the cross-check of compressed
# models against ONNX Runtime, which install-check-deps.sh puts in a private venv) with CTest.
# Then the portable configuration (-DWHITTLE_NATIVE=OFF: one binary whose CPU kernels choose
# their ISA at run time, kernels/cpu/isa/features.h): only the kernel tests' executable, run on
# the widest ISA this CPU has and capped at AVX2 (WHITTLE_ISA=avx2). Last, the sanitizer checks
# (scripts/sanitize.sh ci; WHITTLE_SANITIZE_CHECKS=0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/install-check-deps.sh
(cd build && ctest --output-on-failure -j"$(nproc)" --timeout 1200)
cmake -S . -B build-portable -DCMAKE_BUILD_TYPE=Release -DWHITTLE_NATIVE=OFF -DWHITTLE_CUDA=OFF \
      -DWHITTLE_BUILD_BENCH=OFF >/dev/null
cmake --build build-portable -j"$(nproc)" --target whittle_kernel_tests
build-portable/bin/whittle_kernel_tests --gtest_brief=1
WHITTLE_ISA=avx2 build-portable/bin/whittle_kernel_tests --gtest_brief=1
# The sanitizer checks (docs/reliability.md): ASan+UBSan unit tests of lib/ and runtime/, each fuzz
# target for FUZZ_SECONDS (60) plus the saved regressions, the concurrency tests under TSan.
if [ "${WHITTLE_SANITIZE_CHECKS:-1}" != 0 ]; then
  scripts/sanitize.sh ci
fi
