#!/usr/bin/env bash
# Installs the cross-check tools the test suite compares Whittle against — ONNX Runtime and the
# ONNX Python checker — and pytest (the Python module's tests, tests/python) into a private virtual
# environment (build/check-venv by default, WHITTLE_CHECK_VENV overrides). They are never a
# dependency of Whittle itself: only the ort_* and python_module tests use them. Idempotent: does
# nothing when the environment already works.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${WHITTLE_CHECK_VENV:-$PWD/build/check-venv}"
PY_PKGS=(onnxruntime==1.31.1 onnx==1.23.2 numpy==2.4.6 pytest==9.2.0)
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import onnxruntime, onnx, numpy, pytest" 2>/dev/null; then
  echo "install-check-deps: $VENV ready"
  exit 0
fi
if ! python3 -m venv "$VENV" 2>/dev/null; then
  # Debian's python3 needs python3-venv for `-m venv`.
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends python3-venv
  python3 -m venv "$VENV"
fi
echo "install-check-deps: installing ${PY_PKGS[*]} into $VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PY_PKGS[@]}"
"$VENV/bin/python" -c "import onnxruntime, onnx, numpy, pytest; print('install-check-deps: onnxruntime', onnxruntime.__version__, 'onnx', onnx.__version__, 'pytest', pytest.__version__)"
