#!/usr/bin/env bash
# Installs the build into a temporary prefix, checks that the installed headers are the public
# ones only (include/whittle/*.h, including nothing but the standard library and each other),
# builds examples/embed against it with find_package(Whittle) (a separate CMake project), runs its
# C++ and C programs on the bundled models, and checks that both print the same valid top-1 class
# as run-model on the same image.
# Usage: install_example.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
work=$build/install_example
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/lib/cmake/Whittle/WhittleConfig.cmake" || test -f "$prefix/lib64/cmake/Whittle/WhittleConfig.cmake"
test -f "$prefix/include/whittle/session.h"
other=$(find "$prefix/include" -type f ! -path "$prefix/include/whittle/*.h" -o -type f -path "$prefix/include/whittle/*/*")
[[ -z "$other" ]] || { echo "FAIL: the install ships non-public headers: $other"; exit 1; }
bad=$(grep -h '^[[:space:]]*#[[:space:]]*include' "$prefix"/include/whittle/*.h | grep -v '<[a-z_./]*>' | grep -v '"whittle/[a-z_]*\.h"' || true)
[[ -z "$bad" ]] || { echo "FAIL: a public header includes a non-public one: $bad"; exit 1; }
launcher=()
if [[ -n "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]]; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$CMAKE_CXX_COMPILER_LAUNCHER")
fi
cmake -S "$src/examples/embed" -B "$work/embed-build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" >/dev/null
cmake --build "$work/embed-build" -j2 >/dev/null

# The examples' image (pixel i = ((i * 37) % 256) / 256) as .npy for run-model.
python3 - "$work/image.npy" <<'PY'
import struct, sys
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 28, 28), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
data = struct.pack("<784f", *[((i * 37) % 256) / 256.0 for i in range(784)])
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
PY

for model in cnn mlp; do
  m=$src/models/$model.onnx
  cpp=$("$work/embed-build/embed_cpp" "$m")
  c=$("$work/embed-build/embed_c" "$m")
  echo "$model: C++ '$cpp', C '$c'"
  [[ "$cpp" =~ ^top1\ [0-9]$ ]] || { echo "FAIL: bad C++ output '$cpp'"; exit 1; }
  [[ "$cpp" == "$c" ]] || { echo "FAIL: C++ and C disagree"; exit 1; }
  "$build/bin/run-model" "$m" --input "image=$work/image.npy" --output-dir "$work/out_$model" >/dev/null
  ref=$(python3 - "$work/out_$model/logits.npy" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
hlen = struct.unpack("<H", b[8:10])[0]
assert b"'<f4'" in b[10:10 + hlen], "expected float32 logits"
v = struct.unpack("<10f", b[10 + hlen:10 + hlen + 40])
print("top1 %d" % max(range(10), key=lambda i: (v[i], -i)))
PY
)
  [[ "$cpp" == "$ref" ]] || { echo "FAIL: run-model says '$ref'"; exit 1; }
done
echo "install_example: OK"
