#!/usr/bin/env python3
"""Medians of run-model --bench rounds, side by side: one table per comparison that
scripts/cuda-device-check.sh runs in alternating rounds (step 10: eager against --cuda-graphs,
step 11: pageable against --page-locked-input).

Reads LOGS/PREFIX-MODEL-rROUND.txt (the baseline) and LOGS/PREFIX-MODEL-rROUND-VARIANT.txt, each
run-model's bench table, and prints per model and batch the median p50 of each side over the
rounds and baseline / variant (above 1: the variant is faster).

  python3 tests/tools/bench_medians.py LOGS PREFIX VARIANT
"""
import re
import statistics
import sys
from pathlib import Path

# batch, runs, p50, p90, p99, samples/s[, device MiB before / peak]
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)(\s+[0-9.]+ / [0-9.]+)?\s*$")


def p50s(path):
    """{batch: p50 ms} from one run-model --bench table."""
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        m = ROW.match(line)
        if m:
            out[int(m.group(1))] = float(m.group(3))
    return out


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    logs, prefix, variant = Path(argv[1]), argv[2], argv[3]
    name = re.compile(re.escape(prefix) + r"-(.+)-r(\d+)(-" + re.escape(variant) + r")?\.txt$")
    runs = {}  # (model, side) -> {batch: [p50 per round]}
    for f in sorted(logs.glob(prefix + "-*.txt")):
        m = name.fullmatch(f.name)
        if not m:
            continue
        side = variant if m.group(3) else "base"
        for batch, ms in p50s(f).items():
            runs.setdefault((m.group(1), side), {}).setdefault(batch, []).append(ms)
    if not runs:
        print(f"error: no {prefix}-MODEL-rN.txt bench logs under {logs}")
        return 1
    print(f"| model | batch | baseline p50 ms | {variant} p50 ms | baseline / {variant} | rounds |")
    print("|---|---|---|---|---|---|")
    for model in sorted({k[0] for k in runs}):
        base, var = runs.get((model, "base"), {}), runs.get((model, variant), {})
        for batch in sorted(set(base) | set(var)):
            b, v = base.get(batch, []), var.get(batch, [])
            mb = statistics.median(b) if b else None
            mv = statistics.median(v) if v else None
            ratio = f"{mb / mv:.2f}x" if mb and mv else "-"
            fmt = lambda x: f"{x:.4f}" if x is not None else "-"
            print(f"| {model} | {batch} | {fmt(mb)} | {fmt(mv)} | {ratio} | {len(b)}/{len(v)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
