#!/usr/bin/env bash
# Set-up command 1: install packages, build, and run the demo — run-model evaluating and
# benchmarking the bundled models on Fashion-MNIST.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
for m in mlp cnn; do
  echo "== run-model models/$m.onnx: accuracy on the Fashion-MNIST test set"
  build/bin/run-model models/$m.onnx --eval-data fashion-mnist:test --threads 2
  echo "== run-model models/$m.onnx: benchmark and profile"
  build/bin/run-model models/$m.onnx --bench --batch 1,64 --threads 2 --min-time 0.5 --profile
done
