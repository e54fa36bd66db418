#!/usr/bin/env python3
"""Batch-1 decode speed of a decoder LLM in Whittle and ONNX Runtime, side by side (issue 42).

Runs, in alternating rounds (default 3), run-model --generate STEPS and tests/large/ort_generate.py on
each model given, same prompt (ids 1..8), same thread count, and prints the median over rounds of
each one's decode tokens/s (itself the median step of a run) and prefill tokens/s, then the ratios
the issue asks for. A benchmark, never CI: the 1B models are ~4.4 GB (fp32) and ~0.9 GB (int4).

    python3 tests/large/bench_decode.py --bin build/bin --threads 2 \\
        --model fp32=/tmp/dec/1b/decoder_1b.onnx --model int4=/tmp/dec/1bq/decoder_1b_q4.onnx

Needs numpy and onnxruntime (build/check-venv has them). Name the CPU (lscpu) with the figures.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def whittle(bindir, model, steps, threads):
    r = subprocess.run([os.path.join(bindir, "run-model"), model, "--generate", str(steps), "--threads", str(threads),
                        "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("run-model failed on %s: %s" % (model, r.stderr.strip()))
    g = json.loads(r.stdout.strip().splitlines()[-1])["generate"]
    return g["decode_tokens_per_s"], g["prefill_tokens_per_s"]


def ort(model, steps, threads, tmp):
    out = os.path.join(tmp, "ort.json")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_generate.py")
    r = subprocess.run([sys.executable, script, model, "--steps", str(steps), "--threads", str(threads),
                        "--prompt-ids", "1,2,3,4,5,6,7,8", "--prefill-runs", "3", "--json", out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("ort_generate.py failed on %s: %s" % (model, r.stderr.strip()))
    with open(out) as f:
        g = json.load(f)
    return g["decode_tokens_per_s"], g["prefill_tokens_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", action="append", required=True, help="LABEL=PATH (several)")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    models = [m.split("=", 1) for m in a.model]
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(a.rounds):
            for label, path in models:
                for rt in ("whittle", "ort"):
                    d, p = whittle(a.bin, path, a.steps, a.threads) if rt == "whittle" else ort(path, a.steps, a.threads, tmp)
                    res.setdefault((rt, label), []).append((d, p))
                    print("round %d %-8s %-8s decode %7.2f tok/s  prefill %7.1f tok/s" % (rnd + 1, rt, label, d, p),
                          flush=True)
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in res.items()}
    print("\nmedians over %d rounds (%d threads, %d decode steps after an 8-token prompt):" % (a.rounds, a.threads, a.steps))
    for (rt, label), (d, p) in sorted(med.items()):
        print("  %-8s %-8s decode %7.2f tok/s  prefill %7.1f tok/s" % (rt, label, d, p))
    labels = [l for l, _ in models]
    for l in labels:
        print("  Whittle / ORT on %-8s decode %.2fx" % (l, med[("whittle", l)][0] / med[("ort", l)][0]))
    if len(labels) >= 2:
        base = labels[0]
        for l in labels[1:]:
            print("  Whittle %s / Whittle %s decode %.2fx" % (l, base, med[("whittle", l)][0] / med[("whittle", base)][0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
