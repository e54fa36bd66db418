#!/usr/bin/env bash
# The CUDA backend's checks, for a session that is lent a GPU machine (the `device` tool): that
# machine has the CUDA driver and toolkit but none of our Debian packages, no test data and no
# network, so the programs are built here and travel with their libraries and data.
#
#   scripts/cuda-device-check.sh bundle   # here: build (WHITTLE_CUDA=ON) and pack .bundle/cuda-check.tar.xz
#   WHITTLE_CHECK_BUILD=build scripts/cuda-device-check.sh bundle   # pack an existing CUDA build
#   device run: carry [".bundle"], command "scripts/cuda-device-check.sh run"
#
# `run` (on the GPU machine; it also runs here, where every CUDA check reports that there is no
# device) unpacks the bundle under /tmp and packs each step's log into $OUT/cuda-check-logs.tar.gz
# (or ./cuda-check-logs.tar.gz); CHECK_STEPS="2 3" runs only those steps:
#   1. the test suite (each kernel test checks every backend whose device is present against the
#      reference kernels; the C API's CUDA test; the CLI tests run the bundled CLIs, and the tests
#      that train read the bundle's first 12000 Fashion-MNIST training images);
#   2. the ONNX conformance runner with --device cuda and the CPU's expectations file;
#   3. run-model --device cpu|cuda --bench --batch 1,64,1024 --profile on the bundled models,
#      side by side, and top-1 accuracy on the Fashion-MNIST test set on both devices;
#   4. the compressed models compress-model makes of them (made here, at bundle time) on the GPU:
#      --int8 (mlp, cnn), --binarize with float and with binary activations (cnn), --cluster k=16
#      and --circulant block=8 (mlp): top-1 agreement with the CPU runtime (--agree-with cpu),
#      accuracy, throughput at batch 1/64/1024 next to the FP32 model's, and which nodes fell
#      back (--profile);
#   5. the bundled models at --precision tf32 and bf16 on the GPU: agreement with the CPU's fp32
#      and throughput next to step 3's fp32 figures;
#   6. one fine-tune of a pruned CNN (compress-model --prune ratio=0.5, the bundled CNN its teacher)
#      on the first 12000 Fashion-MNIST training images, 2 epochs, with --device cpu, --device cuda
#      and --device cuda --precision bf16: eval accuracy on the test set, samples/s, and the
#      training graph's nodes that fell back to the CPU;
#   7. GEMM (fp32 and int8) as a fraction of cuBLAS's own figure for the shape
#      (tests/bench/cuda/gemm_vs_cublas.cc);
#   8. the bundled models at batch 1/64/1024 on Whittle, PyTorch eager and ONNX Runtime's CUDA
#      provider side by side (tests/bench/cuda_vs_torch_ort.py; ORT_SITE: where a carried
#      onnxruntime-gpu is unpacked);
#   9. the exported-graph corpus (tests/corpus) on the GPU against ONNX Runtime on the CPU
#      (tests/tools/ort_corpus_check.py --device cuda; the GPU machine's python has onnx and
#      onnxruntime);
#  10. CUDA graphs (SessionOptions::cuda_graphs, run-model --cuda-graphs): the CudaGraphs tests
#      (every bundled model's runs replayed with new inputs, against an eager CUDA session; the
#      corpus's token-id encoder with a bad id reported through the graph) and the Gather
#      kernel tests (its device-side index check, word for word the CPU's error), then
#      run-model --bench at batch 1/64 with and without --cuda-graphs on the bundled and int8
#      models, alternating, three rounds, and the medians of the p50 columns side by side
#      (tests/tools/bench_medians.py), and what each input shape got;
#  11. page-locked inputs and outputs (Session::NewHostTensor, Session::RunInto, run-model
#      --page-locked-input/--page-locked-output): the PageLocked and C API tests (a refilled
#      page-locked input read by the GPU, an output it writes, eagerly and by graph replays), then
#      run-model --bench at batch 64/1024 with and without --page-locked-input on the MLP, CNN and
#      ResNet, and at batch 1/64 with and without both flags on the MLP, CNN and transformer,
#      alternating, three rounds, and the medians of the p50 columns side by side;
#  12. 4-bit weights (com.microsoft MatMulNBits, kernels/cuda/nbits.*): the MatMulNBits, CudaNBits*
#      (the bodies on the CPU; CudaNBitsDevice: decoder-sized shapes on the GPU) and FuseNBits tests
#      (the CUDA kernel against the reference: a warp per column up to 32 rows, 64x64 tiles beyond),
#      then the MLP and transformer made by compress-model --int4 block=32 (format=matmulnbits,
#      and the DequantizeLinear+MatMul form the runtime fuses) on the GPU: top-1 agreement with the
#      CPU runtime, accuracy, throughput at batch 1/64/1024 next to the FP32 model's, and whether
#      any MatMulNBits node fell back to the CPU (--profile).
#
# ONNX Runtime's CUDA provider for step 8: the GPU machine's onnxruntime is CPU-only and has no
# network, and onnxruntime-gpu (about 200 MB packed) passes one call's 64 MiB carry. So:
#   scripts/cuda-device-check.sh ort-bundle   # here: pip download it, pack .bundle/ort/part-NN (ORT_PART_MB, 40)
#   device run, once per part, one call right after the other (the machine stays warm 30 s):
#     carry [".bundle/ort/part-NN", ".bundle/ort/PARTS", ".bundle/ort/SHA256SUMS"],
#     command "scripts/cuda-device-check.sh ort-part NN"
#   the last part unpacks it into /tmp/whittle-ort/site (checked against .bundle/ort/SHA256SUMS);
#   then: carry [".bundle"], command "ORT_SITE=/tmp/whittle-ort/site CHECK_STEPS=8 scripts/cuda-device-check.sh run".
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
bundle=.bundle/cuda-check.tar.xz

case "$mode" in
bundle)
  command -v xz >/dev/null || { echo "cuda-device-check: xz is needed (apt-get install xz-utils)" >&2; exit 1; }
  # WHITTLE_CHECK_BUILD names an existing CUDA build to pack instead (e.g. build, when the GPU
  # machine's CPU has every ISA extension of this one: compare `lscpu` flags first).
  build=${WHITTLE_CHECK_BUILD:-build-cuda}
  [[ -n ${WHITTLE_CHECK_BUILD:-} ]] ||
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DWHITTLE_CUDA=ON -DWHITTLE_NATIVE=OFF -DWHITTLE_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target whittle_tests onnx_conformance run-model compress-model finetune-model \
    whittle_cuda_gemm_bench
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  ../shared/tools/device-bundle.sh "$stage/pkg" "$build/bin/whittle_tests" "$build/bin/onnx_conformance" \
    "$build/bin/run-model" "$build/bin/finetune-model" "$build/bin/compress-model" "$build/bin/whittle_cuda_gemm_bench" \
    >/dev/null
  # The CUDA backend is a module the programs load at run time (no ldd entry): next to
  # libwhittle.so in lib/, where the loader looks (the run puts lib/ on LD_LIBRARY_PATH).
  cp -f "$build/lib/libwhittle_cuda.so" "$stage/pkg/lib/"
  mkdir -p "$stage/pkg/data/fashion-mnist" "$stage/pkg/models"
  cp /usr/share/datasets/fashion-mnist/t10k-* "$stage/pkg/data/fashion-mnist/"
  # The first 12000 training images and labels, under the Debian names (the whole set would not
  # fit the 64 MiB carry).
  python3 - "$stage/pkg/data/fashion-mnist" <<'PY'
import gzip, struct, sys
n, src, dst = 12000, "/usr/share/datasets/fashion-mnist/", sys.argv[1] + "/"
for name, item in (("train-images-idx3-ubyte", 784), ("train-labels-idx1-ubyte", 1)):
    data = gzip.open(src + name + ".gz").read()
    header = 16 if item > 1 else 8
    out = bytearray(data[:header] + data[header:header + n * item])
    out[4:8] = struct.pack(">I", n)
    gzip.open(dst + name + ".gz", "wb").write(bytes(out))
PY
  cp -r /usr/share/libonnx-testdata/data "$stage/pkg/data/onnx"
  cp tests/conformance/expected_failures.txt "$stage/pkg/data/"
  cp models/*.onnx "$stage/pkg/models/"
  for m in mlp cnn; do
    "$build/bin/compress-model" "models/$m.onnx" -o "$stage/pkg/models/${m}_int8.onnx" --int8 \
      --calibration-data fashion-mnist:train --calibration-samples 1000 >/dev/null
  done
  "$build/bin/compress-model" models/cnn.onnx -o "$stage/pkg/models/cnn_binary.onnx" --binarize >/dev/null
  "$build/bin/compress-model" models/cnn.onnx -o "$stage/pkg/models/cnn_xnor.onnx" --binarize activations=binary >/dev/null
  "$build/bin/compress-model" models/mlp.onnx -o "$stage/pkg/models/mlp_cluster.onnx" --cluster k=16 >/dev/null
  "$build/bin/compress-model" models/mlp.onnx -o "$stage/pkg/models/mlp_circulant.onnx" --circulant block=8 >/dev/null
  "$build/bin/compress-model" models/cnn.onnx -o "$stage/pkg/models/cnn_p50.onnx" --prune ratio=0.5 >/dev/null
  for m in mlp transformer; do
    "$build/bin/compress-model" "models/$m.onnx" -o "$stage/pkg/models/${m}_int4.onnx" --int4 block=32,format=matmulnbits >/dev/null
    "$build/bin/compress-model" "models/$m.onnx" -o "$stage/pkg/models/${m}_int4_qdq.onnx" --int4 block=32 >/dev/null
  done
  pwd > "$stage/pkg/source_dir.txt"  # the tests' compiled-in WHITTLE_SOURCE_DIR
  (cd "$build" && pwd) > "$stage/pkg/binary_dir.txt"  # and WHITTLE_BINARY_DIR (the CLI tests run its bin/)
  mkdir -p .bundle
  tar -C "$stage" -cJf "$bundle.tmp" pkg && mv "$bundle.tmp" "$bundle"
  du -h "$bundle" | awk '{print "wrote " $2 " (" $1 "; the device tool carries at most 64 MiB)"}'
  ;;
ort-bundle)
  # onnxruntime-gpu for the GPU machine's python (3.12, x86_64, CUDA 13 wheels), as parts that
  # each fit one call's carry next to the working tree.
  command -v xz >/dev/null || { echo "cuda-device-check: xz is needed (apt-get install xz-utils)" >&2; exit 1; }
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  python3 -m pip download "onnxruntime-gpu${ORT_VERSION:+==$ORT_VERSION}" --no-deps --only-binary=:all: \
    --python-version 3.12 --platform manylinux_2_28_x86_64 -d "$stage/whl" >/dev/null
  mkdir -p "$stage/site"
  python3 -m zipfile -e "$stage"/whl/*.whl "$stage/site"
  rm -rf .bundle/ort && mkdir -p .bundle/ort
  tar -C "$stage/site" -cf - . | xz -T0 -6 > "$stage/ort.tar.xz"
  split -b "${ORT_PART_MB:-40}M" -d -a 2 "$stage/ort.tar.xz" .bundle/ort/part-
  (cd .bundle/ort && sha256sum "$stage/ort.tar.xz" | awk '{print $1 "  ort.tar.xz"}' > SHA256SUMS && ls part-* > PARTS)
  echo "wrote $(wc -l < .bundle/ort/PARTS) parts of onnxruntime-gpu ($(basename "$stage"/whl/*.whl)) under .bundle/ort"
  ;;
ort-part)
  # On the GPU machine: keep the carried part under /tmp/whittle-ort; once all are there,
  # reassemble, check and unpack.
  n=${2:?usage: scripts/cuda-device-check.sh ort-part NN}
  part=.bundle/ort/part-$n
  [[ -f $part ]] || { echo "cuda-device-check: $part not found (carry it)" >&2; exit 1; }
  dest=/tmp/whittle-ort
  mkdir -p "$dest/parts"
  cp "$part" "$dest/parts/"
  [[ -f .bundle/ort/PARTS && -f .bundle/ort/SHA256SUMS ]] ||
    { echo "cuda-device-check: carry .bundle/ort/PARTS and .bundle/ort/SHA256SUMS with the part" >&2; exit 1; }
  cp .bundle/ort/PARTS .bundle/ort/SHA256SUMS "$dest/"
  have=$(ls "$dest/parts" | wc -l)
  want_parts=$(wc -l < "$dest/PARTS" 2>/dev/null || echo '?')
  echo "ort parts on this machine: $have of $want_parts"
  if [[ $have == "$want_parts" ]]; then
    cat "$dest"/parts/part-* > "$dest/ort.tar.xz"
    (cd "$dest" && sha256sum -c SHA256SUMS) || { echo "cuda-device-check: the reassembled onnxruntime-gpu is corrupt" >&2; exit 1; }
    rm -rf "$dest/site" && mkdir -p "$dest/site" && tar -C "$dest/site" -xJf "$dest/ort.tar.xz"
    echo "onnxruntime-gpu unpacked: ORT_SITE=$dest/site"
  fi
  ;;
run)
  [[ -f $bundle ]] || { echo "cuda-device-check: $bundle not found (run 'bundle' first, carry .bundle)" >&2; exit 1; }
  # Every step's log goes into one archive (the device tool returns at most 8 files).
  logs=/tmp/whittle-cuda-check-logs
  archive=${OUT:-$PWD}/cuda-check-logs.tar.gz
  rm -rf "$logs" && mkdir -p "$logs"
  want() { [[ " ${CHECK_STEPS:-1 2 3 4 5 6 7 8 9 10 11 12} " == *" $1 "* ]]; }
  # bench_rounds PREFIX FLAG VARIANT BATCHES ROWS MODEL...: three alternating rounds of run-model
  # --device cuda --bench at BATCHES on each model, without and with FLAG, into
  # $logs/PREFIX-MODEL-rN[-VARIANT].txt (the lines matching ROWS echoed), then the medians of the p50
  # columns side by side (tests/tools/bench_medians.py) into $logs/PREFIX-medians.md.
  bench_rounds() {
    local prefix=$1 flag=$2 variant=$3 batches=$4 rows=$5 round m f log
    shift 5
    for round in 1 2 3; do
      for m in "$@"; do
        for f in "" "$flag"; do
          log="$logs/$prefix-$m-r$round${f:+-$variant}.txt"
          "$pkg/bin/run-model" "$pkg/models/$m.onnx" --device cuda --threads 16 --bench --batch "$batches" \
            --warmup 20 --min-time 0.5 $f > "$log" 2>&1 || status=1
          grep -E "$rows|error" "$log" | sed "s/^/round $round $m ${f:-without}: /" || true
        done
      done
    done
    echo "medians of the p50 columns (baseline: without $flag)"
    python3 tests/tools/bench_medians.py "$logs" "$prefix" "$variant" | tee "$logs/$prefix-medians.md" || true
  }
  trap 'tar -C "$logs" -czf "$archive" . && echo "logs: $archive"' EXIT
  root=/tmp/whittle-cuda-check
  rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xJf "$bundle"
  pkg=$root/pkg
  cuda_lib=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/lib 2>/dev/null | head -1 || true)
  export LD_LIBRARY_PATH="$pkg/lib${cuda_lib:+:$cuda_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The tests read files under the source folder they were built from, and the Debian data paths:
  # point those at this checkout, the bundled programs and the bundled data (its training set is the
  # first 12000 images: the whole set would pass the tool's 64 MiB).
  src=$(cat "$pkg/source_dir.txt")
  [[ -e $src ]] || { mkdir -p "$(dirname "$src")" && ln -sfn "$PWD" "$src"; }
  bin_dir=$(cat "$pkg/binary_dir.txt" 2>/dev/null || true)
  [[ -z $bin_dir || -e $bin_dir/bin ]] || { mkdir -p "$bin_dir" && ln -sfn "$pkg/bin" "$bin_dir/bin"; }
  # and its lib/ (the CUDA module beside libwhittle.so, where tests/tools/backend_module_test.cc looks)
  [[ -z $bin_dir || -e $bin_dir/lib ]] || ln -sfn "$pkg/lib" "$bin_dir/lib"
  [[ -e /usr/share/libonnx-testdata/data ]] || { mkdir -p /usr/share/libonnx-testdata && ln -sfn "$pkg/data/onnx" /usr/share/libonnx-testdata/data; }
  [[ -e /usr/share/datasets/fashion-mnist ]] || { mkdir -p /usr/share/datasets && ln -sfn "$pkg/data/fashion-mnist" /usr/share/datasets/fashion-mnist; }
  nvidia-smi -L > "$logs/gpu.txt" 2>&1 || echo "no nvidia-smi" > "$logs/gpu.txt"
  lscpu | grep -E 'Model name' >> "$logs/gpu.txt" || true
  echo "ISA: $(lscpu | grep -ow -E 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile' | sort -u | tr '\n' ' ')" >> "$logs/gpu.txt" || true
  status=0
  if want 1; then
  echo "== the test suite (kernel tests check every backend with a device against the reference)"
  timeout "${TEST_TIMEOUT:-420}" "$pkg/bin/whittle_tests" > "$logs/tests.txt" 2>&1 || status=1
  grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]|NO DEVICE' "$logs/tests.txt" | head -40 || true
  fi
  if want 2; then
  echo "== ONNX conformance, --device cuda"
  timeout 300 "$pkg/bin/onnx_conformance" --device cuda --data "$pkg/data/onnx" --expectations "$pkg/data/expected_failures.txt" \
    > "$logs/conformance.txt" 2>&1 || status=1
  tail -5 "$logs/conformance.txt" || true
  fi
  if want 3; then
  echo "== run-model, cpu vs cuda"
  for m in mlp cnn transformer resnet; do
    for d in cpu cuda; do
      "$pkg/bin/run-model" "$pkg/models/$m.onnx" --device "$d" --threads 16 --bench --batch 1,64,1024 --profile \
        --eval-data "idx:$pkg/data/fashion-mnist/t10k-images-idx3-ubyte.gz:$pkg/data/fashion-mnist/t10k-labels-idx1-ubyte.gz" \
        > "$logs/run-$m-$d.txt" 2>&1 || status=1
      grep -E '^accuracy|^ +(1|64|1024) |error' "$logs/run-$m-$d.txt" | sed "s/^/$m $d: /" || true
    done
  done
  fi
  if want 4; then
  echo "== compressed models: cuda against the CPU runtime"
  for m in mlp_int8 cnn_int8 cnn_binary cnn_xnor mlp_cluster mlp_circulant; do
    "$pkg/bin/run-model" "$pkg/models/$m.onnx" --device cuda --agree-with cpu --threads 16 --bench \
      --batch 1,64,1024 --profile \
      --eval-data "idx:$pkg/data/fashion-mnist/t10k-images-idx3-ubyte.gz:$pkg/data/fashion-mnist/t10k-labels-idx1-ubyte.gz" \
      > "$logs/run-$m-cuda.txt" 2>&1 || status=1
    grep -E '^accuracy|^top-1 agreement|^ +(1|64|1024) |error' "$logs/run-$m-cuda.txt" | sed "s/^/$m cuda: /" || true
    grep -A 40 'ran on the CPU' "$logs/run-$m-cuda.txt" | sed "s/^/$m cuda: /" || true
  done
  fi
  if want 5; then
  echo "== reduced precision on the GPU against the CPU's fp32"
  for m in mlp cnn transformer resnet; do
    for p in tf32 bf16; do
      "$pkg/bin/run-model" "$pkg/models/$m.onnx" --device cuda --precision "$p" --agree-with cpu --threads 16 --bench \
        --batch 1,64,1024 \
        --eval-data "idx:$pkg/data/fashion-mnist/t10k-images-idx3-ubyte.gz:$pkg/data/fashion-mnist/t10k-labels-idx1-ubyte.gz" \
        > "$logs/run-$m-cuda-$p.txt" 2>&1 || status=1
      grep -E '^accuracy|^top-1 agreement|^ +(1|64|1024) |error' "$logs/run-$m-cuda-$p.txt" | sed "s/^/$m cuda $p: /" || true
    done
  done
  fi
  if want 6; then
  echo "== one fine-tune of the pruned CNN: cpu, cuda, cuda bf16"
  fm="$pkg/data/fashion-mnist"
  for run in "cpu fp32" "cuda fp32" "cuda bf16"; do
    set -- $run
    "$pkg/bin/finetune-model" "$pkg/models/cnn_p50.onnx" --teacher "$pkg/models/cnn.onnx" --device "$1" --precision "$2" \
      --threads 16 --epochs 2 --lr 0.1 --batch 128 --seed 1 \
      --train-data "idx:$fm/train-images-idx3-ubyte.gz:$fm/train-labels-idx1-ubyte.gz" \
      --eval-data "idx:$fm/t10k-images-idx3-ubyte.gz:$fm/t10k-labels-idx1-ubyte.gz" \
      -o "/tmp/cnn_p50_ft_$1_$2.onnx" --json > "$logs/finetune-$1-$2.json" 2> "$logs/finetune-$1-$2.txt" || status=1
    echo "finetune $1 $2: $(cat "$logs/finetune-$1-$2.json")"
    tail -n 3 "$logs/finetune-$1-$2.txt" | sed "s/^/finetune $1 $2: /"
  done
  fi
  if want 7; then
  echo "== GEMM on the GPU against cuBLAS's own figure"
  timeout 300 "$pkg/bin/whittle_cuda_gemm_bench" > "$logs/gemm-vs-cublas.txt" 2>&1 || status=1
  cat "$logs/gemm-vs-cublas.txt"
  fi
  if want 8; then
  echo "== inference side by side: Whittle vs PyTorch eager vs ONNX Runtime's CUDA provider"
  # ONNX Runtime with the CUDA provider is not on the GPU machine: ORT_SITE names a folder where a
  # carried onnxruntime-gpu was unpacked (without it, that column says n/a).
  PYTHONPATH="${ORT_SITE:+$ORT_SITE:}${PYTHONPATH:-}" timeout 400 python3 tests/bench/cuda_vs_torch_ort.py \
    "$pkg"/models/{mlp,cnn,transformer,resnet}.onnx --bin "$pkg/bin" --batch 1,64,1024 --rounds 3 \
    > "$logs/vs-torch-ort.txt" 2>&1 || status=1
  cat "$logs/vs-torch-ort.txt"
  fi
  if want 9; then
  echo "== the exported-graph corpus on the GPU against ONNX Runtime on the CPU"
  timeout 300 python3 tests/tools/ort_corpus_check.py --bin "$pkg/bin" --corpus tests/corpus --device cuda \
    > "$logs/corpus-cuda.txt" 2>&1 || status=1
  grep -v '^ok' "$logs/corpus-cuda.txt" || true
  fi
  if want 10; then
  echo "== CUDA graphs: replays against eager runs, then latency with and without"
  timeout 300 "$pkg/bin/whittle_tests" --gtest_filter='CudaGraphs.*:CApi.*Graphs*:DeviceSession.*:DeviceCorpus.*:MovementKernelsTest.Gather*' > "$logs/graphs-tests.txt" 2>&1 || status=1
  grep -E '^\[ +(graphs|PASSED|FAILED|SKIPPED) ' "$logs/graphs-tests.txt" || true
  bench_rounds graphs --cuda-graphs graphs 1,64 '^ +(1|64) |replayed|eager' mlp cnn transformer resnet cnn_int8
  fi
  if want 11; then
  echo "== page-locked inputs and outputs: copies with and without a staging copy"
  timeout 120 "$pkg/bin/whittle_tests" --gtest_filter='PageLocked.*:CApi.*PageLocked*' > "$logs/page-locked-tests.txt" 2>&1 || status=1
  grep -E '^\[ +(PASSED|FAILED|SKIPPED) ' "$logs/page-locked-tests.txt" || true
  bench_rounds upload --page-locked-input locked 64,1024 '^ +(64|1024) ' mlp cnn resnet
  bench_rounds io "--page-locked-input --page-locked-output" lockedio 1,64 '^ +(1|64) ' mlp cnn transformer
  fi
  if want 12; then
  echo "== 4-bit weights (MatMulNBits): kernel tests, then int4 models on the GPU against the CPU runtime"
  timeout 120 "$pkg/bin/whittle_tests" --gtest_filter='MatMulNBits.*:CudaNBits*:FuseNBits.*' > "$logs/nbits-tests.txt" 2>&1 || status=1
  grep -E '^\[ +(PASSED|FAILED|SKIPPED) |NO DEVICE' "$logs/nbits-tests.txt" || true
  for m in mlp mlp_int4 mlp_int4_qdq transformer transformer_int4 transformer_int4_qdq; do
    "$pkg/bin/run-model" "$pkg/models/$m.onnx" --device cuda --agree-with cpu --threads 16 --bench \
      --batch 1,64,1024 --profile \
      --eval-data "idx:$pkg/data/fashion-mnist/t10k-images-idx3-ubyte.gz:$pkg/data/fashion-mnist/t10k-labels-idx1-ubyte.gz" \
      > "$logs/run-$m-cuda-nbits.txt" 2>&1 || status=1
    grep -E '^accuracy|^top-1 agreement|^ +(1|64|1024) |error' "$logs/run-$m-cuda-nbits.txt" | sed "s/^/$m cuda: /" || true
    grep -A 40 'ran on the CPU' "$logs/run-$m-cuda-nbits.txt" | sed "s/^/$m cuda: /" || true
  done
  fi
  exit $status
  ;;
*)
  echo "usage: scripts/cuda-device-check.sh bundle|run|ort-bundle|ort-part NN (see the comment at its top)" >&2
  exit 2
  ;;
esac
