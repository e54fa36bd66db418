#!/usr/bin/env bash
# Set-up command 2: install what is missing, build, and run the whole test suite (unit tests,
# CLI end-to-end tests and the ONNX backend conformance suite) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 1200
