#!/usr/bin/env python3
"""The accuracy-aware search's chosen models in ONNX Runtime.

compress-model --target size|latency --max-drop PP picks per-layer mixes of int8, int4, SVD,
pruning and codebooks; written with --portable they use standard ONNX ops only. For each
configuration below (or for --model files already written), run the chosen model in ONNX Runtime
and in Whittle's runtime (run-model) on Fashion-MNIST test images and require the same top-1 on at
least 99.5 % of them, and a file smaller than the original. Run by ctest as `ort_search_check`
with the interpreter from scripts/install-check-deps.sh; `--model FILE` checks a model you chose.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

MIN_AGREEMENT = 0.995
SEARCH = ["--calibration-data", "fashion-mnist:train", "--calibration-samples", "200",
          "--eval-data", "fashion-mnist:test", "--eval-limit", "1000", "--search-evals", "4",
          "--no-bench", "--portable", "--report-json", "-"]
CONFIGS = [
    ("mlp", ["--target", "size", "--max-drop", "1.0", "--passes", "int8,int4,svd,prune,cluster"]),
    ("cnn", ["--target", "size", "--max-drop", "1.0", "--passes", "int8,int4,svd,cluster"]),
]


def load_images(data_dir, n):
    with gzip.open(os.path.join(data_dir, "t10k-images-idx3-ubyte.gz"), "rb") as f:
        raw = f.read()
    count, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    n = min(n, count)
    x = np.frombuffer(raw, dtype=np.uint8, offset=16, count=n * rows * cols)
    return (x.astype(np.float32) / 255.0).reshape(n, 1, rows, cols)


def whittle_top1(bindir, model, x, tmp):
    x_path = os.path.join(tmp, "x.npy")
    np.save(x_path, x)
    out_dir = tempfile.mkdtemp(dir=tmp)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    subprocess.run([os.path.join(bindir, "run-model"), model, "--input", name + "=" + x_path, "--output-dir", out_dir],
                   check=True, stdout=subprocess.DEVNULL)
    out_name = sess.get_outputs()[0].name
    y_w = np.load(os.path.join(out_dir, out_name + ".npy"))
    y_o = sess.run(None, {name: x})[0]
    return np.argmax(y_w.reshape(len(x), -1), 1), np.argmax(y_o.reshape(len(x), -1), 1)


def check(bindir, model, original, x, tmp, label):
    w, o = whittle_top1(bindir, model, x, tmp)
    agree = float(np.mean(w == o))
    size, size0 = os.path.getsize(model), os.path.getsize(original)
    ok = agree >= MIN_AGREEMENT and size < size0
    print("%-4s %-60s top-1 agreement whittle/ort %.4f on %d images, %d -> %d bytes (%.1fx)" % (
        "ok" if ok else "FAIL", label, agree, len(x), size0, size, size0 / size))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="directory with compress-model and run-model")
    ap.add_argument("--models", help="directory with the bundled models (runs the searches above)")
    ap.add_argument("--model", action="append", default=[],
                    help="ORIGINAL.onnx=CHOSEN.onnx: check a model the search already chose (repeatable)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    x = load_images(args.data, args.samples)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="whittle_ortsearch_") as tmp:
        for pair in args.model:
            original, chosen = pair.split("=", 1)
            failures += not check(args.bin, chosen, original, x, tmp, chosen)
        if args.models:
            for i, (name, flags) in enumerate(CONFIGS):
                src = os.path.join(args.models, name + ".onnx")
                out = os.path.join(tmp, "%s_%d.onnx" % (name, i))
                r = subprocess.run([os.path.join(args.bin, "compress-model"), src, "-o", out] + flags + SEARCH,
                                   check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                report = json.loads(r.stdout)
                chosen = [p for p in report["search"]["points"] if p["chosen"]]
                label = "%s %s: %s" % (name, " ".join(flags[:4]), chosen[0]["config"] if chosen else "none")
                if not chosen or chosen[0]["drop"] > float(flags[3]):
                    print("FAIL %s: no chosen configuration within the budget" % label)
                    failures += 1
                    continue
                failures += not check(args.bin, out, src, x, tmp, label[:60])
    if failures:
        print("ort_search_check: %d model(s) failed" % failures)
        return 1
    print("ort_search_check: every chosen model agrees with ONNX Runtime on >= %.1f %% of the images" %
          (100 * MIN_AGREEMENT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
