#!/usr/bin/env bash
# Installs the Debian 12 packages Whittle builds, tests and runs its demo with
# (scripts/install-deps.sh [--sanitizers]).
# Idempotent: packages already present are not reinstalled. Needs root (or sudo).
set -euo pipefail
PKGS=(build-essential cmake pkg-config zlib1g-dev
      libonnx-dev libprotobuf-dev protobuf-compiler libeigen3-dev libfftw3-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libdnnl-dev
      ocl-icd-opencl-dev opencl-headers
      openmpi-bin libopenmpi-dev
      libcpp-httplib-dev pybind11-dev python3-dev python3-venv
      dataset-fashion-mnist libonnx-testdata)
# --sanitizers: also clang and libFuzzer, for the sanitizer and fuzz builds (scripts/sanitize.sh,
# scripts/fuzz.sh; scripts/test.sh runs them).
if [ "${1:-}" = "--sanitizers" ]; then PKGS+=(clang libfuzzer-14-dev); fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
