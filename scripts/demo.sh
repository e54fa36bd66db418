#!/usr/bin/env bash
# Set-up command 1: install packages, build, and run the demo on the bundled Fashion-MNIST
# models: run-model evaluates and benchmarks them, then compress-model makes them smaller
# (SVD for the MLP, channel pruning and INT8 quantization for the CNN) and reports what that cost
# and bought.
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
mkdir -p build/demo
echo "== compress-model models/mlp.onnx --svd ratio=0.5 (half the MACs, ranks allocated by measured sensitivity)"
build/bin/compress-model models/mlp.onnx -o build/demo/mlp_svd.onnx --svd ratio=0.5 \
  --calibration-data fashion-mnist:train --eval-data fashion-mnist:test \
  --report build/demo/mlp_svd.html --report-json build/demo/mlp_svd.json
echo "== compress-model models/cnn.onnx --prune ratio=0.2,round=1 (channels physically removed)"
build/bin/compress-model models/cnn.onnx -o build/demo/cnn_prune.onnx --prune ratio=0.2,round=1 \
  --calibration-data fashion-mnist:train --eval-data fashion-mnist:test \
  --report build/demo/cnn_prune.html
echo "== compress-model models/cnn.onnx --int8 (static, per-channel weights, activations calibrated on 500 images)"
build/bin/compress-model models/cnn.onnx -o build/demo/cnn_int8.onnx --int8 \
  --calibration-data fashion-mnist:train --calibration-samples 500 --eval-data fashion-mnist:test \
  --report build/demo/cnn_int8.html
echo "== compress-model models/resnet.onnx (exported by torch.onnx.export) --prune criterion=reconstruction"
build/bin/compress-model models/resnet.onnx -o build/demo/resnet_prune.onnx --prune ratio=0.2,round=1,criterion=reconstruction \
  --calibration-data fashion-mnist:train --calibration-samples 500 --eval-data fashion-mnist:test \
  --report build/demo/resnet_prune.html
echo "== compress-model models/transformer.onnx (exported by torch.onnx.export) --int8 attention=1"
build/bin/compress-model models/transformer.onnx -o build/demo/transformer_int8.onnx --int8 attention=1 \
  --calibration-data fashion-mnist:train --calibration-samples 500 --eval-data fashion-mnist:test \
  --report build/demo/transformer_int8.html
echo "== the compressed models and their reports (open the .html files in a browser) are in build/demo/"
ls -l build/demo
