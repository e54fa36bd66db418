#!/usr/bin/env python3
"""finetune-model's outputs outside Whittle: a pruned CNN, an SVD-factorized MLP and an INT8 QDQ CNN
(quantization-aware), each fine-tuned for one short epoch, must keep the student's ops, pass the
ONNX checker and run in ONNX Runtime with Whittle's outputs (float students: logits within 1e-4
relative to the largest; the INT8 student: the same top-1 on >= 99 % of 300 test images).

    build/check-venv/bin/python tests/tools/ort_finetune_check.py --bin build/bin --root .
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_int8_check import load_idx  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return r.stdout


def whittle_logits(bin_dir, model, x, tmp):
    np.save(os.path.join(tmp, "x.npy"), x)
    out = os.path.join(tmp, "out")
    run([os.path.join(bin_dir, "run-model"), model, "--input", "image=" + os.path.join(tmp, "x.npy"), "--output-dir", out])
    files = sorted(f for f in os.listdir(out) if f.endswith(".npy"))
    return np.load(os.path.join(out, files[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    data = "/usr/share/datasets/fashion-mnist"
    x = np.ascontiguousarray(load_idx(data, "t10k-images-idx3-ubyte.gz")[:300])
    compress = os.path.join(a.bin, "compress-model")
    finetune = os.path.join(a.bin, "finetune-model")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("cnn --prune ratio=0.5", "cnn", ["--prune", "ratio=0.5"], False),
            ("mlp --svd ratio=0.5", "mlp", ["--svd", "ratio=0.5", "--calibration-data", "fashion-mnist:train",
                                             "--calibration-samples", "256"], False),
            ("cnn --int8", "cnn", ["--int8", "mode=static", "--calibration-data", "fashion-mnist:train",
                                   "--calibration-samples", "256"], True),
        ]
        for label, model, flags, quantized in cases:
            original = os.path.join(a.root, "models", model + ".onnx")
            student = os.path.join(tmp, "student.onnx")
            out = os.path.join(tmp, "ft.onnx")
            run([compress, original, "-o", student, "--no-bench", "--quiet"] + flags)
            run([finetune, student, "--teacher", original, "--train-data", "fashion-mnist:train", "--train-limit", "512",
                 "-o", out, "--epochs", "1", "--batch", "64", "--lr", "0.01" if quantized else "0.05", "-q"])
            s, f = onnx.load(student), onnx.load(out)
            onnx.checker.check_model(f)
            same_ops = [n.op_type for n in s.graph.node] == [n.op_type for n in f.graph.node]
            same_types = sorted((i.name, i.data_type, tuple(i.dims)) for i in s.graph.initializer) == sorted(
                (i.name, i.data_type, tuple(i.dims)) for i in f.graph.initializer)
            changed = any(not np.array_equal(onnx.numpy_helper.to_array(i), onnx.numpy_helper.to_array(j))
                          for i, j in zip(sorted(s.graph.initializer, key=lambda t: t.name),
                                          sorted(f.graph.initializer, key=lambda t: t.name)))
            sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
            o = sess.run(None, {sess.get_inputs()[0].name: x})[0]
            w = whittle_logits(a.bin, out, x, tmp)
            if quantized:
                agree = float((o.argmax(-1) == w.argmax(-1)).mean())
                ok, detail = agree >= 0.99, f"top-1 agreement {agree:.4f}"
            else:
                err = float(np.abs(o - w).max() / max(np.abs(o).max(), 1e-6))
                ok, detail = err <= 1e-4, f"max rel err {err:.2e}"
            ok = ok and same_ops and same_types and changed
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {label:24s} same ops {same_ops}, same initializer types/shapes "
                  f"{same_types}, weights changed {changed}, ORT vs Whittle: {detail}", flush=True)
    if failures:
        raise SystemExit(f"ort_finetune_check: {failures} case(s) failed")
    print("ort_finetune_check: every fine-tuned output keeps its student's form and runs in ONNX Runtime")


if __name__ == "__main__":
    main()
