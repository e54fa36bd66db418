#!/usr/bin/env python3
"""Side-by-side throughput of two Whittle builds (e.g. before and after a change) on the same
models, batch sizes and thread counts: `run-model --bench --json` of build A and build B run
alternately (A, B, A, B, ...) for --rounds rounds; the table gives the median throughput of each
and the ratio B/A (1.00 = unchanged; the spread of the rounds says what noise is).

  python3 tests/bench/compare_builds.py --a ../old/build/bin/run-model --b build/bin/run-model \
      models/mlp.onnx models/cnn.onnx --batch 1,64 --threads 1,2 --rounds 7
"""
import argparse
import json
import statistics
import subprocess
import sys


def throughput(run_model, path, batch, threads, seconds):
    out = subprocess.run([run_model, path, "--bench", "--batch", str(batch), "--threads", str(threads),
                          "--min-time", str(seconds), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["bench"][0]["throughput"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--a", required=True, help="run-model of the baseline build")
    ap.add_argument("--b", required=True, help="run-model of the build under test")
    ap.add_argument("--batch", default="1,64")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(f"medians of {args.rounds} alternating rounds of {args.seconds} s; samples/s")
    print(f"{'model':<22} {'threads':>7} {'batch':>6} {'A':>12} {'B':>12} {'B/A':>6}  {'B/A per round'}")
    for m in args.models:
        for t in [int(x) for x in args.threads.split(",")]:
            for b in [int(x) for x in args.batch.split(",")]:
                a, bb = [], []
                for _ in range(args.rounds):
                    a.append(throughput(args.a, m, b, t, args.seconds))
                    bb.append(throughput(args.b, m, b, t, args.seconds))
                ma, mb = statistics.median(a), statistics.median(bb)
                rounds = " ".join(f"{y / x:.2f}" for x, y in zip(a, bb))
                print(f"{m:<22} {t:>7} {b:>6} {ma:>12.0f} {mb:>12.0f} {mb / ma:>6.2f}  {rounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
