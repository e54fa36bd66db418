#!/usr/bin/env python3
"""Cross-check compress-model's outputs against software we did not write.

For each bundled model and pass configuration: run compress-model, check the result with the
ONNX Python checker (full_check, strict shape inference), run it in ONNX Runtime and in Whittle's
runtime (run-model) on the first 256 Fashion-MNIST test images, and require max |diff| <= 1e-4.
Exits non-zero naming the first configuration that fails. Run by ctest as `ort_crosscheck`
with the interpreter from scripts/install-check-deps.sh.
"""
import argparse
import gzip
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

TOL = 1e-4
CALIB = ["--calibration-data", "fashion-mnist:train", "--calibration-samples", "300"]
CONFIGS = [
    ("mlp", ["--svd", "rank=64"]),
    ("mlp", ["--svd", "ratio=0.5"] + CALIB),
    ("mlp", ["--prune", "ratio=0.3"]),
    ("mlp", ["--prune", "ratio=0.3,criterion=activation", "--svd", "energy=0.9"] + CALIB),
    ("cnn", ["--svd", "rank=8,mode=channel"]),
    ("cnn", ["--svd", "energy=0.9,mode=spatial"]),
    ("cnn", ["--prune", "ratio=0.3"]),
    ("cnn", ["--prune", "ratio=0.5,criterion=activation", "--svd", "energy=0.95"] + CALIB),
    # Exported by PyTorch: whole attention heads and MLP units, consumers re-fitted; residual CNN.
    ("transformer", ["--prune", "ratio=0.3,heads=0.34,round=1,criterion=reconstruction"] + CALIB),
    ("resnet", ["--prune", "ratio=0.2,round=1,criterion=reconstruction"] + CALIB),
]


def load_images(data_dir, n):
    with gzip.open(os.path.join(data_dir, "t10k-images-idx3-ubyte.gz"), "rb") as f:
        raw = f.read()
    count, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    assert count >= n, "fewer test images than requested"
    x = np.frombuffer(raw, dtype=np.uint8, offset=16, count=n * rows * cols)
    return (x.astype(np.float32) / 255.0).reshape(n, 1, rows, cols)


def whittle_run(bindir, model, x_path, out_dir):
    subprocess.run([os.path.join(bindir, "run-model"), model, "--input", "image=" + x_path,
                    "--output-dir", out_dir], check=True, stdout=subprocess.DEVNULL)
    return np.load(os.path.join(out_dir, "logits.npy"))


def ort_run(model, x):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="directory with compress-model and run-model")
    ap.add_argument("--models", required=True, help="directory with the bundled models")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--samples", type=int, default=256)
    args = ap.parse_args()

    x = load_images(args.data, args.samples)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="whittle_ortcheck_") as tmp:
        x_path = os.path.join(tmp, "x.npy")
        np.save(x_path, x)
        for i, (name, flags) in enumerate(CONFIGS):
            src = os.path.join(args.models, name + ".onnx")
            out = os.path.join(tmp, "%s_%d.onnx" % (name, i))
            label = "%s %s" % (name, " ".join(f for f in flags if f not in CALIB))
            subprocess.run([os.path.join(args.bin, "compress-model"), src, "-o", out, "--no-bench",
                            "--quiet"] + flags, check=True, stdout=subprocess.DEVNULL)
            onnx.checker.check_model(out, full_check=True)
            small = os.path.getsize(out) < os.path.getsize(src)
            out_dir = os.path.join(tmp, "out_%d" % i)
            os.makedirs(out_dir)
            y_w = whittle_run(args.bin, out, x_path, out_dir)
            y_o = ort_run(out, x)
            diff = float(np.max(np.abs(y_w - y_o)))
            agree = float(np.mean(np.argmax(y_w, 1) == np.argmax(y_o, 1)))
            ok = diff <= TOL and small
            failures += not ok
            print("%-4s %-72s max|whittle-ort| %.2e  top-1 agreement %.4f  %s%s" % (
                "ok" if ok else "FAIL", label, diff, agree, "" if small else "(file not smaller) ",
                os.path.getsize(out)))
    if failures:
        print("ort_crosscheck: %d configuration(s) failed" % failures)
        return 1
    print("ort_crosscheck: all %d configurations agree within %.0e" % (len(CONFIGS), TOL))
    return 0


if __name__ == "__main__":
    sys.exit(main())
