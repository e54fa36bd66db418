#!/usr/bin/env python3
"""Run the ONNX backend node cases of the installed onnx wheel through run-model.

The Debian test data (tests/conformance) stops at ONNX 1.12; the onnx wheel in the check venv
generates its node cases (model, inputs, expected outputs) from onnx.backend.test.case.node. This
script writes each case whose name contains one of --filter's substrings to a temporary folder,
runs `run-model MODEL --input NAME=FILE.npy ... --output-dir DIR`, and compares every output
with the expected one (rtol 1e-3, atol 1e-7, the ONNX backend test defaults).

Prints one line per case: PASS, FAIL (with the reason) or REFUSED (run-model rejected the model
at load, e.g. an opset newer than Whittle supports). Exits 1 if any case FAILs.

  build/check-venv/bin/python tests/tools/newer_opset_cases.py --bin build/bin --filter resize,upsample,nonzero
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
from onnx import numpy_helper  # noqa: F401  (imported for the side effect of registering helpers)

RTOL, ATOL = 1e-3, 1e-7


def collect(filters):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        cases = collect_testcases()
    return [c for c in cases if any(f in c.name for f in filters)]


def run_case(case, run_model, tmp):
    model = case.model
    inputs, outputs = case.data_sets[0]
    d = os.path.join(tmp, case.name)
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    init_names = {t.name for t in model.graph.initializer}
    graph_inputs = [i.name for i in model.graph.input if i.name not in init_names]
    cmd = [run_model, path, "--output-dir", os.path.join(d, "out")]
    for name, value in zip(graph_inputs, inputs):
        f = os.path.join(d, name + ".npy")
        np.save(f, np.asarray(value))
        cmd += ["--input", f"{name}={f}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        msg = msg[-1] if msg else f"exit {p.returncode}"
        return ("REFUSED" if "opset" in msg else "FAIL"), msg
    for out, want in zip(model.graph.output, outputs):
        got = np.load(os.path.join(d, "out", out.name + ".npy"))
        want = np.asarray(want)
        if got.shape != want.shape:
            return "FAIL", f"output {out.name}: shape {got.shape}, expected {want.shape}"
        if got.dtype != want.dtype:
            return "FAIL", f"output {out.name}: dtype {got.dtype}, expected {want.dtype}"
        if np.issubdtype(want.dtype, np.floating):
            ok = np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            ok = np.array_equal(got, want)
        if not ok:
            diff = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))
            return "FAIL", f"output {out.name}: max |diff| {diff:g}"
    return "PASS", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="folder holding run-model")
    ap.add_argument("--filter", default="resize,upsample,nonzero", help="comma-separated name substrings")
    args = ap.parse_args()
    run_model = os.path.join(args.bin, "run-model")
    cases = collect([f for f in args.filter.split(",") if f])
    counts = {"PASS": 0, "FAIL": 0, "REFUSED": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            verdict, why = run_case(case, run_model, tmp)
            counts[verdict] += 1
            opsets = ",".join(str(o.version) for o in case.model.opset_import if o.domain in ("", "ai.onnx"))
            print(f"{verdict:8s}{case.name} (opset {opsets}){': ' + why if why else ''}")
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['REFUSED']} refused")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
