#!/usr/bin/env bash
# Seed corpora for the libFuzzer targets (tests/fuzz/): make_seeds.sh OUTDIR writes
#   OUTDIR/model  models for fuzz_model_load_run and fuzz_passes: models/*.onnx, tests/corpus/*.onnx
#                 and tests/data/*.onnx under MAX_SEED_BYTES (default 262144), and the ONNX node
#                 tests' tiny one-op models (libonnx-testdata) where that package is installed
#   OUTDIR/data   inputs for fuzz_data_readers, each with its selector byte first (0 npy, 1 npz,
#                 2 IDX, 3 IDX file (gzip), 4 npz file, 5 dataset spec): the repository's small
#                 .npy/.npz files and a few IDX files made here
# Nothing here is committed: the seeds are copies or made in a few milliseconds.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:?usage: make_seeds.sh OUTDIR}"
max="${MAX_SEED_BYTES:-262144}"
mkdir -p "$out/model" "$out/data"

small() { [ "$(stat -c %s "$1")" -le "$max" ]; }
for f in "$root"/models/*.onnx "$root"/tests/corpus/*.onnx "$root"/tests/data/*.onnx; do
  [ -f "$f" ] && small "$f" && cp "$f" "$out/model/$(basename "$(dirname "$f")")_$(basename "$f")"
done
testdata=/usr/share/libonnx-testdata/data/node
if [ -d "$testdata" ]; then
  for d in "$testdata"/*/; do
    f="$d/model.onnx"
    [ -f "$f" ] && small "$f" && cp "$f" "$out/model/node_$(basename "$d").onnx"
  done
fi

# selector byte + file
seed() { { printf "\\x$(printf %02x "$1")"; cat "$2"; } > "$out/data/$3"; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
n=0
for f in $(find "$root/tests/data" -name '*.npy' -size -4k | sort | sed -n 1,12p); do  # sed, not head: head closing the pipe early is a SIGPIPE (exit 141) under pipefail
  seed 0 "$f" "npy_$n"; n=$((n + 1))
done
for f in "$root"/tests/data/npz/*.npz; do
  b="$(basename "$f" .npz)"
  seed 1 "$f" "npz_$b"; seed 4 "$f" "npzfile_$b"
done
# IDX: 4 uint8 labels; 2 images of 2x3 uint8; 2 float32 values (big-endian)
printf '\x00\x00\x08\x01\x00\x00\x00\x04\x00\x01\x02\x09' > "$tmp/labels.idx"
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x03\x00\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xff' > "$tmp/images.idx"
printf '\x00\x00\x0d\x01\x00\x00\x00\x02\x3f\x80\x00\x00\xc0\x00\x00\x00' > "$tmp/floats.idx"
for f in labels images floats; do
  seed 2 "$tmp/$f.idx" "idx_$f"
  gzip -9nc "$tmp/$f.idx" > "$tmp/$f.idx.gz"
  seed 3 "$tmp/$f.idx.gz" "idxgz_$f"
done
# dataset specs: spec, newline, 2-byte little-endian length of file A, file A, file B ('@', '#')
spec() {  # spec fileA fileB name
  local la; la=$(stat -c %s "$2")
  { printf '\x05%s\n' "$1"; printf "\\x$(printf %02x $((la & 255)))\\x$(printf %02x $((la >> 8)))"
    cat "$2" "$3"; } > "$out/data/spec_$4"
}
: > "$tmp/empty"
spec 'idx:@:#' "$tmp/images.idx.gz" "$tmp/labels.idx" idx
npy="$(find "$root/tests/data" -name '*.npy' -size -4k | sort | sed -n 1p)"
[ -n "$npy" ] && spec 'npy:@' "$npy" "$tmp/empty" npy
[ -f "$root/tests/data/npz/savez.npz" ] && spec 'npz:@' "$root/tests/data/npz/savez.npz" "$tmp/empty" npz
echo "make_seeds: $(ls "$out/model" | wc -l) model seeds, $(ls "$out/data" | wc -l) data seeds in $out"
