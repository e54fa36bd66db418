#!/usr/bin/env python3
"""INT8 side by side: Whittle INT8 vs Whittle FP32, and Whittle INT8 vs ONNX Runtime running the
model that ONNX Runtime's own quantize_static produces — accuracy on the Fashion-MNIST test set
and batch throughput at each thread count.

For each model: compress-model --int8 (defaults: static, per-channel, QDQ, mse calibration on
--calibration-samples training images) makes Whittle's INT8 file; tests/tools/ort_quantize_reference.py
(quant_pre_process + quantize_static, QDQ, per-channel, MinMax, same images) makes ORT's. Timing
runs alternate (Whittle FP32, Whittle INT8, ORT FP32, ORT INT8, ...) for --rounds rounds of
--seconds each; each figure is the median p50 latency over rounds, shown as samples/s.

  scripts/install-check-deps.sh       # onnxruntime + onnx in build/check-venv
  build/check-venv/bin/python tests/bench/int8_vs_ort.py models/mlp.onnx models/cnn.onnx \
      --batch 64 --threads 1,2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from ort_int8_check import load_idx  # noqa: E402  (same IDX reader as the cross-check test)


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_accuracy(path, x, labels):
    sess = ort_session(path, 2)
    y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    return float(np.mean(np.argmax(y, 1) == labels))


def ort_latency_ms(path, x, threads, seconds, warmup):
    sess = ort_session(path, threads)
    name = sess.get_inputs()[0].name
    for _ in range(warmup):
        sess.run(None, {name: x})
    lat = []
    start = time.perf_counter()
    while len(lat) < 20 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        sess.run(None, {name: x})
        lat.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(lat)


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("int8_vs_ort: %s failed: %s" % (" ".join(cmd), r.stderr.strip()))
    return json.loads(r.stdout)


def whittle_accuracy(bindir, path):
    return run_json([os.path.join(bindir, "run-model"), path, "--eval-data", "fashion-mnist:test", "--json"])["accuracy"]


def whittle_latency_ms(bindir, path, batch, threads, seconds, warmup):
    j = run_json([os.path.join(bindir, "run-model"), path, "--bench", "--batch", str(batch), "--threads", str(threads),
                  "--min-time", str(seconds), "--warmup", str(warmup), "--json"])
    return j["bench"][0]["p50_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--calibration-samples", type=int, default=500)
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--int8", default="", help="extra --int8 options for compress-model")
    args = ap.parse_args()

    x_test = load_idx(args.data, "t10k-images-idx3-ubyte.gz")
    labels = load_idx(args.data, "t10k-labels-idx1-ubyte.gz")
    xb = x_test[:args.batch].copy()
    threads = [int(t) for t in args.threads.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="whittle_int8_vs_ort_") as tmp:
        for m in args.models:
            name = os.path.splitext(os.path.basename(m))[0]
            w8 = os.path.join(tmp, name + "_whittle_int8.onnx")
            o8 = os.path.join(tmp, name + "_ort_int8.onnx")
            cmd = [os.path.join(args.bin, "compress-model"), m, "-o", w8, "--no-bench", "--quiet", "--int8",
                   args.int8 or "format=qdq", "--calibration-data", "fashion-mnist:train",
                   "--calibration-samples", str(args.calibration_samples)]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            subprocess.run([sys.executable, os.path.join(HERE, "..", "tools", "ort_quantize_reference.py"), m, o8,
                            "--samples", str(args.calibration_samples), "--data", args.data],
                           check=True, stderr=subprocess.DEVNULL)
            acc = {
                "fp32": whittle_accuracy(args.bin, m),
                "w_int8": whittle_accuracy(args.bin, w8),
                "ort_fp32": ort_accuracy(m, x_test, labels),
                "ort_int8": ort_accuracy(o8, x_test, labels),
                "ort_on_w_int8": ort_accuracy(w8, x_test, labels),
            }
            size = {k: os.path.getsize(p) for k, p in (("fp32", m), ("w_int8", w8), ("ort_int8", o8))}
            for t in threads:
                lat = {k: [] for k in ("w_fp32", "w_int8", "ort_fp32", "ort_int8")}
                for _ in range(args.rounds):
                    lat["w_fp32"].append(whittle_latency_ms(args.bin, m, args.batch, t, args.seconds, args.warmup))
                    lat["w_int8"].append(whittle_latency_ms(args.bin, w8, args.batch, t, args.seconds, args.warmup))
                    lat["ort_fp32"].append(ort_latency_ms(m, xb, t, args.seconds, args.warmup))
                    lat["ort_int8"].append(ort_latency_ms(o8, xb, t, args.seconds, args.warmup))
                tput = {k: args.batch * 1e3 / statistics.median(v) for k, v in lat.items()}
                rows.append((name, t, acc, size, tput))
                print("%s threads=%d done" % (name, t), file=sys.stderr)

    print("onnxruntime %s; batch %d; medians of %d alternating rounds of %.1f s; accuracy on %d test images" % (
        ort.__version__, args.batch, args.rounds, args.seconds, len(labels)))
    print("| model | threads | Whittle FP32 | Whittle INT8 | INT8/FP32 | ORT FP32 | ORT INT8 (its quantize_static) "
          "| Whittle INT8 / ORT INT8 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, t, acc, size, tp in rows:
        print("| %s | %d | %.0f/s | %.0f/s | %.2fx | %.0f/s | %.0f/s | %.2fx |" % (
            name, t, tp["w_fp32"], tp["w_int8"], tp["w_int8"] / tp["w_fp32"], tp["ort_fp32"], tp["ort_int8"],
            tp["w_int8"] / tp["ort_int8"]))
    print()
    print("| model | FP32 acc | Whittle INT8 acc (Whittle) | same file in ORT | ORT quantize_static acc (ORT) "
          "| FP32 bytes | Whittle INT8 bytes | ORT INT8 bytes |")
    print("|---|---|---|---|---|---|---|---|")
    seen = set()
    for name, t, acc, size, tp in rows:
        if name in seen:
            continue
        seen.add(name)
        print("| %s | %.2f%% | %.2f%% | %.2f%% | %.2f%% | %d | %d (%.2fx) | %d (%.2fx) |" % (
            name, 100 * acc["fp32"], 100 * acc["w_int8"], 100 * acc["ort_on_w_int8"], 100 * acc["ort_int8"],
            size["fp32"], size["w_int8"], size["fp32"] / size["w_int8"], size["ort_int8"],
            size["fp32"] / size["ort_int8"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
