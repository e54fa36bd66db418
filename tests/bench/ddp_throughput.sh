#!/usr/bin/env bash
# Data-parallel fine-tuning throughput (issue 44), as the issue measures it: samples/s of one epoch
# of finetune-model on the bundled CNN pruned 50 %, in alternating rounds of
#   A: 1 process, 1 thread    B: 2 ranks x 1 thread (mpirun)    C: 1 process, 2 threads
# and the medians' ratios B/A and B/C. Not run by CI (it needs the machine to itself).
#   tests/bench/ddp_throughput.sh [ROUNDS=5] [SAMPLES=12800]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$root/build/bin" rounds="${1:-5}" samples="${2:-12800}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin/compress-model" "$root/models/cnn.onnx" -o "$tmp/student.onnx" --prune ratio=0.5 --no-bench -q
mpi=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
ft=("$bin/finetune-model" "$tmp/student.onnx" --teacher "$root/models/cnn.onnx" --train-data fashion-mnist:train
    --train-limit "$samples" --epochs 1 --batch 64 --json -q -o "$tmp/out.onnx")
rate() { python3 -c 'import json,sys; print(json.load(sys.stdin)["epochs"][0]["samples_per_s"])'; }
for r in $(seq "$rounds"); do
  a=$("${ft[@]}" --threads 1 | rate)
  b=$("${mpi[@]}" "${ft[@]}" --threads 1 | rate)
  c=$("${ft[@]}" --threads 2 | rate)
  echo "round $r: 1x1 $a  2x1 $b  1x2 $c samples/s"
  echo "$a $b $c" >> "$tmp/rounds"
done
python3 - "$tmp/rounds" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
a, b, c = (statistics.median(col) for col in zip(*rows))
print("median samples/s: 1 process x 1 thread %.0f, 2 ranks x 1 thread %.0f, 1 process x 2 threads %.0f" % (a, b, c))
print("2 ranks x 1 thread vs 1 x 1: %.2fx; vs 1 x 2 threads: %.2fx" % (b / a, b / c))
PY
