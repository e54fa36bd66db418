#!/usr/bin/env python3
"""Cross-check compress-model --int8 outputs against ONNX Runtime.

For the bundled MLP and CNN, in QDQ (static, per-channel, the default) and QOperator format:
run compress-model --int8 (calibration on 500 Fashion-MNIST training images), check the file
with the ONNX checker (full_check), run it in ONNX Runtime and in Whittle's runtime (run-model)
on the 10000 test images, and require top-1 agreement >= 99 % between the two and a file at
least 3.5x smaller than the FP32 model. Prints the accuracies next to the FP32 one. Exits
non-zero naming every configuration that fails. Usage: ort_int8_check.py --bin DIR --models DIR

ONNX Runtime is run twice: with its default graph optimizations (its QDQ fusion into int8
kernels) and with ORT_DISABLE_ALL (QuantizeLinear/DequantizeLinear and float ops exactly as ONNX
defines them: the file's reference meaning). Agreement with the reference is required for every
configuration; agreement with the optimized run for every configuration except reduce-range=0.
On x86 CPUs without VNNI (like this machine) ORT's u8 x s8 kernels add pairs of products in int16
and saturate with full-range int8 weights (255 * 127 * 2 > 32767); that is why compress-model
defaults to reduce-range=1 (weights in [-63, 63]). The full-range figure is printed so the
effect stays visible.
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

MIN_AGREEMENT = 0.99
MIN_SHRINK = 3.5
# (model, --int8 spec, whether agreement with ORT's optimized int8 kernels is required)
CONFIGS = [
    ("mlp", "format=qdq", True),
    ("cnn", "format=qdq", True),
    ("mlp", "format=qoperator", True),
    ("cnn", "format=qoperator", True),
    ("mlp", "mode=dynamic", True),
    ("cnn", "activations=s8", True),
    ("cnn", "calibration=entropy", True),
    ("mlp", "per-channel=0,calibration=percentile:99.99", True),
    ("mlp", "format=qdq,reduce-range=0", False),
    ("cnn", "format=qdq,reduce-range=0", False),
]


def load_idx(data_dir, stem, n=None):
    with gzip.open(os.path.join(data_dir, stem), "rb") as f:
        raw = f.read()
    if stem.endswith("labels-idx1-ubyte.gz"):
        return np.frombuffer(raw, dtype=np.uint8, offset=8).astype(np.int64)
    count, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    x = np.frombuffer(raw, dtype=np.uint8, offset=16, count=count * rows * cols)
    return (x.astype(np.float32) / 255.0).reshape(count, 1, rows, cols)


def ort_run(model, x, optimize=True):
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def whittle_run(bindir, model, x_path, out_dir):
    r = subprocess.run([os.path.join(bindir, "run-model"), model, "--input", "image=" + x_path, "--output-dir", out_dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "run-model failed"
    return np.load(os.path.join(out_dir, "logits.npy")), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="directory with compress-model and run-model")
    ap.add_argument("--models", required=True, help="directory with the bundled models")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--calibration-samples", type=int, default=500)
    args = ap.parse_args()

    x = load_idx(args.data, "t10k-images-idx3-ubyte.gz")
    labels = load_idx(args.data, "t10k-labels-idx1-ubyte.gz")
    failures = []
    with tempfile.TemporaryDirectory(prefix="whittle_int8check_") as tmp:
        x_path = os.path.join(tmp, "x.npy")
        np.save(x_path, x)
        fp32_acc = {}
        for i, (name, spec, need_opt) in enumerate(CONFIGS):
            src = os.path.join(args.models, name + ".onnx")
            if name not in fp32_acc:
                fp32_acc[name] = float(np.mean(np.argmax(ort_run(src, x), 1) == labels))
            out = os.path.join(tmp, "%s_%d.onnx" % (name, i))
            label = "%s --int8 %s" % (name, spec)
            r = subprocess.run([os.path.join(args.bin, "compress-model"), src, "-o", out, "--no-bench", "--quiet",
                                "--int8", spec, "--calibration-data", "fashion-mnist:train",
                                "--calibration-samples", str(args.calibration_samples)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                failures.append(label)
                print("FAIL %-44s compress-model: %s" % (label, r.stderr.strip()))
                continue
            onnx.checker.check_model(out, full_check=True)
            shrink = os.path.getsize(src) / os.path.getsize(out)
            y_o = ort_run(out, x)
            y_r = ort_run(out, x, optimize=False)
            acc_o = float(np.mean(np.argmax(y_o, 1) == labels))
            out_dir = os.path.join(tmp, "out_%d" % i)
            os.makedirs(out_dir)
            y_w, err = whittle_run(args.bin, out, x_path, out_dir)
            if y_w is None:
                failures.append(label)
                print("FAIL %-44s ORT accuracy %.4f (fp32 %.4f), %.2fx smaller; run-model: %s" % (
                    label, acc_o, fp32_acc[name], shrink, err))
                continue
            acc_w = float(np.mean(np.argmax(y_w, 1) == labels))
            agree = float(np.mean(np.argmax(y_w, 1) == np.argmax(y_o, 1)))
            agree_ref = float(np.mean(np.argmax(y_w, 1) == np.argmax(y_r, 1)))
            ok = agree_ref >= MIN_AGREEMENT and (agree >= MIN_AGREEMENT or not need_opt) and shrink >= MIN_SHRINK
            if not ok:
                failures.append(label)
            print("%-4s %-44s fp32 %.4f  int8: ORT %.4f Whittle %.4f  top-1 agreement with ORT %.4f%s, with ORT "
                  "reference %.4f  %.2fx smaller" % ("ok" if ok else "FAIL", label, fp32_acc[name], acc_o, acc_w, agree,
                                                     "" if need_opt else " (not required)", agree_ref, shrink))
    if failures:
        print("ort_int8_check: %d configuration(s) failed: %s" % (len(failures), "; ".join(failures)))
        return 1
    print("ort_int8_check: all %d configurations agree >= %.0f %% and are >= %.1fx smaller" % (
        len(CONFIGS), 100 * MIN_AGREEMENT, MIN_SHRINK))
    return 0


if __name__ == "__main__":
    sys.exit(main())
