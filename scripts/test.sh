#!/usr/bin/env bash
# Set-up command 2: install what is missing, build, and run the whole test suite (unit tests,
# CLI end-to-end tests, the ONNX backend conformance suite, and the cross-check of compressed
# models against ONNX Runtime, which install-check-deps.sh puts in a private venv) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/install-check-deps.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 1200
