#!/usr/bin/env bash
# All-reduce bandwidth and latency on this machine (docs/distributed-scaling.md): compiles
# tests/bench/mpi/allreduce_bw.cc (plain MPI, no Whittle code) with mpicxx -O2 into a temp dir and runs
# it on NP ranks (default 2) of this one machine, so what it measures is Open MPI's shared-memory
# transport, not a network. Not run by CI (it needs the machine to itself).
#   tests/bench/allreduce_bw.sh [NP=2] [allreduce_bw options: --reps N --warmup W --max-bytes B --fit]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
np="${1:-2}"
shift || true
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mpicxx -O2 -std=c++17 -o "$tmp/allreduce_bw" "$root/tests/bench/mpi/allreduce_bw.cc"
mpi=(mpirun --oversubscribe -np "$np")
[ "$(id -u)" -eq 0 ] && mpi=(mpirun --allow-run-as-root --oversubscribe -np "$np")
echo "# $(mpirun --version 2>&1 | head -1); $(lscpu | sed -n 's/^Model name: *//p'); $(nproc) cores; $(date -u +%Y-%m-%d); $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
"${mpi[@]}" "$tmp/allreduce_bw" "$@"
