#!/usr/bin/env bash
# ctest ddp_check: the bundled CNN pruned 50 % (compress-model --prune), fine-tuned by 2 ranks on
# localhost (mpirun --oversubscribe: this machine may have fewer cores than ranks; as root,
# --allow-run-as-root, as CI runs) against one process (tests/mpi/ddp_check.cc).
#   ddp_check.sh MPIEXEC BIN_DIR SOURCE_DIR
set -euo pipefail
mpiexec=$1 bin=$2 src=$3
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin/compress-model" "$src/models/cnn.onnx" -o "$tmp/student.onnx" --prune ratio=0.5 --no-bench --quiet
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
# Bounded: a rank that hangs must not hold CI (mpirun's own timeout ends the job).
timeout 600 "$mpiexec" "${root[@]}" --oversubscribe --timeout 540 -np 2 \
  "$bin/ddp_check" --student "$tmp/student.onnx" --teacher "$src/models/cnn.onnx" \
  --data fashion-mnist:train --steps 50 --batch 64
# The same with gradient buckets of 1 KiB (several per step): each bucket's all-reduce starts
# during the backward pass (ddp_check fails unless most do), and the sum is the same.
timeout 600 "$mpiexec" "${root[@]}" --oversubscribe --timeout 540 -np 2 \
  "$bin/ddp_check" --student "$tmp/student.onnx" --teacher "$src/models/cnn.onnx" \
  --data fashion-mnist:train --steps 50 --batch 64 --bucket-kb 1
# Model averaging after every step is synchronous SGD again, up to rounding: averaging whole
# parameters rounds at their magnitude, not the update's (1.2e-05 after 50 steps here).
timeout 600 "$mpiexec" "${root[@]}" --oversubscribe --timeout 540 -np 2 \
  "$bin/ddp_check" --student "$tmp/student.onnx" --teacher "$src/models/cnn.onnx" \
  --data fashion-mnist:train --steps 50 --batch 64 --average 1 --max-rel 1e-4
# finetune-model itself on 2 ranks (rank 0 writes) against 1 process, same epochs and global batch:
# the same eval accuracy within 0.2 points, and a bad launch (ranks given different options) refused.
ft=("$bin/finetune-model" "$tmp/student.onnx" --teacher "$src/models/cnn.onnx" --train-data fashion-mnist:train
    --train-limit 6400 --eval-data fashion-mnist:test --eval-limit 2000 --epochs 2 --batch 64 --threads 1 --json -q)
timeout 600 "$mpiexec" "${root[@]}" --oversubscribe --timeout 540 -np 2 "${ft[@]}" -o "$tmp/ft2.onnx" > "$tmp/ft2.json"
"${ft[@]}" -o "$tmp/ft1.onnx" > "$tmp/ft1.json"
python3 - "$tmp/ft1.json" "$tmp/ft2.json" <<'PY'
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:3]]
one, two = (r["best_eval_accuracy"] for r in runs)
print("finetune-model eval accuracy: 1 process %.4f, 2 ranks %.4f" % (one, two))
if abs(one - two) > 0.002:
    sys.exit("2 ranks reach %.4f, 1 process %.4f: more than 0.2 points apart" % (two, one))
# The teacher's logits of epoch 1 are shared by the ranks: in epoch 2 rank 0 takes all of its
# 3,200 rows' from the cache, wherever the reshuffle put them.
cached = [r["epochs"][1]["teacher_cached"] for r in runs]
print("epoch 2 teacher logits from the cache: 1 process %d of 6400, rank 0 %d of 3200" % tuple(cached))
sys.exit(0 if cached == [6400, 3200] else "the teacher ran again in epoch 2")
PY
# compress-model --finetune the same way: 2 ranks (rank 0 writes the model and the report) against
# one process, the same accuracy within 0.2 points.
cm=("$bin/compress-model" "$src/models/cnn.onnx" --prune ratio=0.5 --finetune epochs=1,batch=64 --train-data fashion-mnist:train
    --train-limit 3200 --eval-data fashion-mnist:test --eval-limit 1000 --threads 1 --no-bench -q)
timeout 600 "$mpiexec" "${root[@]}" --oversubscribe --timeout 540 -np 2 "${cm[@]}" -o "$tmp/cm2.onnx" --report-json "$tmp/cm2.json"
"${cm[@]}" -o "$tmp/cm1.onnx" --report-json "$tmp/cm1.json"
python3 - "$tmp/cm1.json" "$tmp/cm2.json" <<'PY'
import json, sys
one, two = (json.load(open(p))["finetune"]["accuracy_after"] for p in sys.argv[1:3])
print("compress-model --finetune accuracy: 1 process %.4f, 2 ranks %.4f" % (one, two))
sys.exit(0 if abs(one - two) <= 0.002 else "2 ranks reach %.4f, 1 process %.4f: more than 0.2 points apart" % (two, one))
PY
if timeout 120 "$mpiexec" "${root[@]}" --oversubscribe --timeout 100 -np 2 bash -c \
    'exec "$@" --seed "$OMPI_COMM_WORLD_RANK"' _ "${ft[@]}" -o "$tmp/bad.onnx" > /dev/null 2> "$tmp/bad.err"; then
  echo "a launch whose ranks differ in --seed was not refused"; exit 1
fi
grep -q "differ from rank 0's" "$tmp/bad.err" || { echo "bad launch: no message naming it:"; cat "$tmp/bad.err"; exit 1; }
[ ! -e "$tmp/bad.onnx" ] || { echo "bad launch wrote an output"; exit 1; }
echo "bad launch refused: $(grep -m1 "differ from rank 0's" "$tmp/bad.err")"
# A rank that hangs (SIGSTOP of rank 1 mid-epoch) fails the job within --rank-timeout (5 s) and a
# few seconds' grace, with a message naming rank 1, and no output written.
"$bin/finetune-model" --help > "$tmp/help.txt"  # not piped into grep -q: under pipefail, SIGPIPE would fail it
grep -q -- --rank-timeout "$tmp/help.txt"
(
  start=$(date +%s.%N)
  set +e
  timeout 120 "$mpiexec" "${root[@]}" --oversubscribe -np 2 bash -c 'echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK"; shift; exec "$@"' \
    "$tmp" _ "$bin/finetune-model" "$tmp/student.onnx" --teacher "$src/models/cnn.onnx" --train-data fashion-mnist:train \
    --train-limit 60000 --epochs 3 --batch 64 --threads 1 -q --rank-timeout 5 -o "$tmp/hang.onnx" > /dev/null 2> "$tmp/hang.err"
  echo "$? $(python3 -c "import time; print('%.1f' % (time.time() - $start))")" > "$tmp/hang.rc"
) &
for _ in $(seq 100); do [ -s "$tmp/pid.1" ] && break; sleep 0.2; done
sleep 3
kill -STOP "$(cat "$tmp/pid.1")"
wait
read -r rc secs < "$tmp/hang.rc"
grep -m1 "for rank 1, which did not join" "$tmp/hang.err" || { echo "hung rank: no message naming rank 1 (rc $rc):"; cat "$tmp/hang.err"; exit 1; }
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "hung rank: the job exited $rc"; exit 1; }
[ ! -e "$tmp/hang.onnx" ] || { echo "hung rank: an output was written"; exit 1; }
echo "hung rank 1: the job ended with exit $rc after ${secs} s (--rank-timeout 5)"
