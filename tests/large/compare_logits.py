#!/usr/bin/env python3
"""Compares two logits dumps (ort_generate.py --dump-logits, or any .npz with the same array names):
prints each common array's max relative difference (max |a - b| / max |b|, B the reference), the
worst of them, and whether the generated ids agree; exits 1 if the worst exceeds --tol.

    python tests/large/compare_logits.py A.npz REFERENCE.npz [--tol 1e-4]

Used for issue 42's checks: the tiny decoder with a KV cache against the same model without one
(ort_generate.py --no-cache), and Whittle's dump against ONNX Runtime's.
"""
import argparse
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("ref")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--quiet", action="store_true", help="print only the summary line")
    args = ap.parse_args()
    a, b = np.load(args.a), np.load(args.ref)
    names = [n for n in b.files if n in a.files and n != "ids"]
    missing = sorted(set(a.files) ^ set(b.files))
    if not names:
        sys.exit("no arrays in common")

    def order(n):
        return (0, 0) if n == "prefill" else (1, int(n[5:])) if n.startswith("step_") and n[5:].isdigit() else (2, n)

    worst, worst_name = -1.0, ""
    for n in sorted(names, key=order):
        x, y = a[n].astype(np.float64), b[n].astype(np.float64)
        if x.shape != y.shape:
            sys.exit(f"{n}: shapes differ, {x.shape} vs {y.shape}")
        rel = float(np.abs(x - y).max() / max(np.abs(y).max(), 1e-30))
        if not args.quiet:
            print(f"{n}: max rel {rel:.3e}")
        if rel > worst:  # the first array counts even when every difference is 0
            worst, worst_name = rel, n
    ids = ""
    if "ids" in a.files and "ids" in b.files:
        same = a["ids"].shape == b["ids"].shape and bool((a["ids"] == b["ids"]).all())
        ids = f"; generated ids {'agree' if same else 'DIFFER'}"
    print(f"{len(names)} arrays: worst max rel {worst:.3e} ({worst_name}){ids}"
          + (f"; only in one file: {missing}" if missing else "") + f"; tol {args.tol:g}: "
          + ("ok" if worst <= args.tol else "FAIL"))
    sys.exit(0 if worst <= args.tol else 1)


if __name__ == "__main__":
    main()
