#!/usr/bin/env bash
# ctest ddp_fault_check: a rank killed mid-epoch ends the data-parallel job, and --resume finishes it
# with the weights of an uninterrupted run (docs/finetune.md, "On several processes (MPI)", Faults).
#   fault_check.sh MPIEXEC BIN_DIR SOURCE_DIR
# On the bundled CNN pruned 50 %, 2 ranks x 1 thread, 3 epochs of 12,800 samples at global batch 8
# (1,600 steps, about 3 s an epoch on 2 cores: the kill lands well inside epoch 2):
#  (a) kill -9 of rank 1 during epoch 2 (after epoch 1's checkpoint) makes mpirun exit non-zero
#      within 60 s, naming rank 1, with no output model written;
#  (b) --resume on 2 ranks from that checkpoint ends with every initializer of the output within max
#      rel 1e-6 (max |a - b| / max |b| per initializer) of an uninterrupted 2-rank run's.
# The comparison needs onnx and numpy: the check venv (scripts/install-check-deps.sh), or
# WHITTLE_CHECK_PYTHON. About 20 s on 2 idle cores (70 s with both cores busy elsewhere).
set -euo pipefail
mpiexec=$1 bin=$2 src=$3
python="${WHITTLE_CHECK_PYTHON:-$bin/../check-venv/bin/python}"
"$python" -c 'import onnx, numpy' 2> /dev/null ||
  { echo "FAIL: $python has no onnx/numpy (run scripts/install-check-deps.sh)"; exit 1; }
tmp="$(mktemp -d)"
job=""
cleanup() {
  if [ -n "$job" ] && kill -0 "$job" 2> /dev/null; then kill "$job" 2> /dev/null || true; fi  # timeout passes it on to mpirun
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

"$bin/compress-model" "$src/models/cnn.onnx" -o "$tmp/student.onnx" --prune ratio=0.5 --no-bench --quiet
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
mpi=(timeout 300 "$mpiexec" "${root[@]}" --oversubscribe --timeout 240 -np 2)
ft=("$bin/finetune-model" "$tmp/student.onnx" --teacher "$src/models/cnn.onnx" --train-data fashion-mnist:train
    --train-limit 12800 --epochs 3 --batch 8 --threads 1 --rank-timeout 120)

# (a) Each rank writes its pid (the exec keeps it) so that the check can kill rank 1 itself.
"${mpi[@]}" bash -c 'echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK"; exec "$@"' "$tmp" "${ft[@]}" \
  --checkpoint-dir "$tmp/ck" -o "$tmp/killed.onnx" > "$tmp/killed.log" 2>&1 &
job=$!
wait_for() {  # wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds, while the job lives
  local what=$1 limit=$2 t0
  t0=$(now)
  shift 2
  until "$@"; do
    kill -0 "$job" 2> /dev/null || fail "the job ended before $what"
    awk -v s="$(since "$t0")" -v l="$limit" 'BEGIN { exit !(s > l) }' && fail "no $what after $limit s"
    sleep 0.05
  done
}
wait_for "epoch 1 checkpoint" 120 test -s "$tmp/ck/state.json"
wait_for "epoch 2 progress" 60 grep -q '^\[epoch 2/3\] [0-9]*/' "$tmp/killed.log"
sleep 1  # about a third of epoch 2
pid1=$(cat "$tmp/pid.1")
[ "$(cat "/proc/$pid1/comm" 2> /dev/null)" = finetune-model ] || fail "pid $pid1 (rank 1) is not finetune-model"
kill -9 "$pid1"
t0=$(now)
while kill -0 "$job" 2> /dev/null; do
  awk -v s="$(since "$t0")" 'BEGIN { exit !(s > 60) }' && fail "mpirun still running 60 s after rank 1 was killed"
  sleep 0.05
done
rc=0
wait "$job" || rc=$?
exit_s=$(since "$t0")
job=""
[ "$rc" -ne 0 ] || fail "mpirun exited 0 after rank 1 was killed"
named=$(grep -m1 -E 'rank 1 .*exited on signal 9' "$tmp/killed.log") || fail "mpirun's output does not name rank 1 killed by signal 9"
compgen -G "$tmp/killed.onnx*" > /dev/null && fail "the killed job wrote an output: $(ls "$tmp"/killed.onnx*)"
# Mid-epoch: epoch 2 neither ended nor was checkpointed.
grep -q '"epoch_done": 0,' "$tmp/ck/state.json" && [ ! -e "$tmp/ck/epoch_2" ] ||
  fail "the kill did not land inside epoch 2 (epoch 2 was checkpointed)"
! grep -q '^\[epoch 2/3\] loss' "$tmp/killed.log" || fail "the kill did not land inside epoch 2 (epoch 2 ended)"
echo "kill -9 of rank 1 (pid $pid1) during epoch 2: mpirun exited $rc after $exit_s s"
echo "  $named"
cp "$tmp/ck/epoch_1/model.onnx" "$tmp/epoch1.onnx"  # the resumed run replaces the checkpoint

# (b) Resumed on 2 ranks against an uninterrupted 2-rank run with the same options.
"${mpi[@]}" "${ft[@]}" --checkpoint-dir "$tmp/ck" --resume -o "$tmp/resumed.onnx" > "$tmp/resumed.log" 2>&1 ||
  fail "the resumed job failed"
grep -q "resuming after epoch 1" "$tmp/resumed.log" || fail "the resumed job did not resume after epoch 1"
"${mpi[@]}" "${ft[@]}" --checkpoint-dir "$tmp/ck_ref" -o "$tmp/ref.onnx" > "$tmp/ref.log" 2>&1 ||
  fail "the uninterrupted job failed"
"$python" - "$tmp/resumed.onnx" "$tmp/ref.onnx" "$tmp/epoch1.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import numpy_helper

def inits(path):
    return {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(path).graph.initializer}

def max_rel(a, b):
    if set(a) != set(b):
        sys.exit("FAIL: initializer names differ: %s" % sorted(set(a) ^ set(b)))
    worst, name = 0.0, None
    for k in a:
        if a[k].shape != b[k].shape:
            sys.exit("FAIL: %s: shape %s vs %s" % (k, a[k].shape, b[k].shape))
        rel = float(np.max(np.abs(a[k] - b[k]), initial=0.0)) / max(float(np.max(np.abs(b[k]), initial=0.0)), 1e-30)
        if rel >= worst:
            worst, name = rel, k
    return worst, name

resumed, ref, epoch1 = (inits(p) for p in sys.argv[1:4])
rel, name = max_rel(resumed, ref)
moved, _ = max_rel(epoch1, ref)
print("resumed vs uninterrupted (2 ranks, 3 epochs): %d initializers, max rel %.3g%s; bound 1e-06"
      % (len(ref), rel, " (%s)" % name if rel > 0 else ""))
print("  (epoch 1's checkpoint vs the uninterrupted output: max rel %.3g)" % moved)
if not rel <= 1e-6:
    sys.exit("FAIL: the resumed output differs from the uninterrupted run's by max rel %.3g (%s)" % (rel, name))
if not moved > 1e-3:
    sys.exit("FAIL: epochs 2-3 left the weights at epoch 1's (max rel %.3g): nothing was compared" % moved)
PY
