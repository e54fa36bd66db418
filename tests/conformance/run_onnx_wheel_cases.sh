#!/usr/bin/env bash
# The ONNX backend node cases of the check venv's onnx package (newer opsets than Debian's
# libonnx-testdata, which stops at opset 17), generated into the build tree once per onnx version
# and run by onnx_conformance against their own expectations file.
#   run_onnx_wheel_cases.sh PYTHON RUNNER OUT_DIR EXPECTATIONS
set -euo pipefail
python=$1 runner=$2 out=$3 expectations=$4
version="$("$python" -c 'import onnx; print(onnx.__version__)') $(sed -n 's/^GENERATOR = "\(.*\)"$/\1/p' "$(dirname "$0")/gen_onnx_node_data.py")"
if [[ ! -f "$out/VERSION" || "$(cat "$out/VERSION")" != "$version" ]]; then
  "$python" "$(dirname "$0")/gen_onnx_node_data.py" "$out"
fi
exec "$runner" --data "$out" --expectations "$expectations"
