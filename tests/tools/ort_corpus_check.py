#!/usr/bin/env python3
"""Every model of the exported-graph corpus (tests/corpus) on Whittle's runtime vs ONNX Runtime:
random inputs at batch 1 and 3 (integer inputs get valid ids), Whittle's `run-model --input` vs
ORT. An output agrees when max |whittle - ort| / max(|ort|, 1) <= max(1e-4, 2 x the difference
ORT has against itself with and without its graph optimizations). Prints one line per model and
output; exits non-zero on any disagreement or failure to load.

    build/check-venv/bin/python tests/tools/ort_corpus_check.py --bin build/bin --corpus tests/corpus

--device cuda runs Whittle on the GPU (scripts/cuda-device-check.sh, step 9) against ORT on the CPU,
with the same tolerance: cuBLAS's FP32 GEMM and Whittle's own kernels sum in other orders than
ORT's CPU kernels, but well inside 1e-4 of the output's scale.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort


# Decoders with a KV cache (tests/large/make_decoder.py's layout) need consistent free dims: the mask
# covers past + new tokens, and positions continue the past.
DECODER_DIMS = {"sequence": 7, "past_sequence": 5, "total_sequence": 12}


def make_inputs(model, batch, rng):
    feeds = {}
    init = {i.name for i in model.graph.initializer}
    decoder = any(vi.name.startswith("past_key_values.") for vi in model.graph.input)
    for vi in model.graph.input:
        if vi.name in init:
            continue
        tt = vi.type.tensor_type
        dims = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(d.dim_value)
            elif decoder and k > 0 and d.dim_param in DECODER_DIMS:
                dims.append(DECODER_DIMS[d.dim_param])
            else:
                dims.append(batch if k == 0 else 7)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if decoder and vi.name == "attention_mask":
            feeds[vi.name] = np.ones(dims, dtype=dtype)
        elif decoder and vi.name == "position_ids":
            feeds[vi.name] = np.ascontiguousarray(np.broadcast_to(np.arange(DECODER_DIMS["past_sequence"], DECODER_DIMS["total_sequence"], dtype=dtype), dims))
        elif np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, 100, size=dims).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(dims).astype(dtype)
    return feeds


def ort_run(path, feeds, optimize):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return [o.name for o in s.get_outputs()], s.run(None, feeds)


def rel(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)) / np.maximum(np.abs(b.astype(np.float64)), 1.0))) if a.size else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="Whittle's device (ORT runs on the CPU)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    failures = 0
    models = sorted(glob.glob(os.path.join(args.corpus, "*.onnx")))
    if not models:
        sys.exit("no models in " + args.corpus)
    for path in models:
        model = onnx.load(path)
        name = os.path.basename(path)
        for batch in (1, 3):
            feeds = make_inputs(model, batch, rng)
            names, ref = ort_run(path, feeds, True)
            _, ref_noopt = ort_run(path, feeds, False)
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [os.path.join(args.bin, "run-model"), path, "--output-dir", tmp, "--device", args.device]
                for k, v in feeds.items():
                    f = os.path.join(tmp, "in_%d.npy" % len(cmd))
                    np.save(f, v)
                    cmd += ["--input", "%s=%s" % (k, f)]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    print("FAIL %-36s batch %d: run-model: %s" % (name, batch, r.stderr.strip()))
                    failures += 1
                    continue
                for out_name, expected, other in zip(names, ref, ref_noopt):
                    safe = "".join(c if c.isalnum() or c in "_-." else "_" for c in out_name)
                    got = np.load(os.path.join(tmp, safe + ".npy"))
                    if got.shape != expected.shape:
                        print("FAIL %-36s batch %d %s: shape %s, ORT %s" % (name, batch, out_name, got.shape, expected.shape))
                        failures += 1
                        continue
                    err, self_err = rel(got, expected), rel(other, expected)
                    tol = max(1e-4, 2 * self_err)
                    ok = err <= tol
                    failures += not ok
                    print("%s %-36s batch %d %-10s rel err %.2e (ORT vs itself %.2e, tolerance %.1e)" %
                          ("ok  " if ok else "FAIL", name, batch, out_name[:10], err, self_err, tol))
    print("%d model(s), %d failure(s)" % (len(models), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
