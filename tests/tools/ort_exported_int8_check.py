#!/usr/bin/env python3
"""`compress-model --int8` on models as exporters write them, run in ONNX Runtime:
  - weights in Constant nodes, opset 11 with HardSigmoid (tests/corpus/paddle_style_lcnet_op11.onnx),
  - an int32 input (tests/corpus/byte_classifier_int32_op13.onnx, calibrated from an int32 .npy),
  - Keras ReLU6 as tf2onnx writes it, Conv -> Clip(0, 6) (tests/corpus/keras_mobilenet_tf2onnx_op17.onnx):
    the Clip must be kept before the output QuantizeLinear, which Whittle's runtime folds into its
    int8 conv's integer clamp,
  - the bundled transformer and residual CNN (torch.onnx.export; calibrated on Fashion-MNIST).
Each quantized file must pass the ONNX checker, quantize every weight layer it reports, and give
the same top-1 in ONNX Runtime as in Whittle on >= 99 % of 500 inputs.

    build/check-venv/bin/python tests/tools/ort_exported_int8_check.py --bin build/bin --root .
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort


def whittle_top1(bin_dir, model, x, name, tmp):
    np.save(os.path.join(tmp, "x.npy"), x)
    out = os.path.join(tmp, "out")
    subprocess.run([os.path.join(bin_dir, "run-model"), model, "--input", "%s=%s" % (name, os.path.join(tmp, "x.npy")),
                    "--output-dir", out], check=True, capture_output=True)
    files = sorted(f for f in os.listdir(out) if f.endswith(".npy"))
    return np.load(os.path.join(out, files[0])).argmax(-1)


def check(bin_dir, model, name, calib, x, tmp, min_clip_fused=0):
    qpath = os.path.join(tmp, "q.onnx")
    np.save(os.path.join(tmp, "calib.npy"), calib)
    r = subprocess.run([os.path.join(bin_dir, "compress-model"), model, "-o", qpath, "--int8", "--calibration-data",
                        "npy:" + os.path.join(tmp, "calib.npy"), "--no-bench", "--report-json", "-"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return False, "compress-model failed: " + r.stderr.strip()
    report = json.loads(r.stdout)
    layers = report["passes"][0]["layers"]
    quantized = sum(1 for l in layers if l["action"] != "skipped")
    weight_skips = [l["node"] for l in layers if l["action"] == "skipped" and "not a constant" not in l["reason"]]
    clip_fused = sum(1 for l in layers if "Clip fused before the output QuantizeLinear" in l.get("detail", ""))
    onnx.checker.check_model(qpath)
    sess = ort.InferenceSession(qpath, providers=["CPUExecutionProvider"])
    ort_top1 = sess.run(None, {name: x})[0].argmax(-1)
    wh_top1 = whittle_top1(bin_dir, qpath, x, name, tmp)
    agree = float((ort_top1 == wh_top1).mean())
    before, after = report["summary"]["before"]["file_bytes"], report["summary"]["after"]["file_bytes"]
    ok = agree >= 0.99 and quantized > 0 and not weight_skips and clip_fused >= min_clip_fused
    return ok, "%d layer(s) quantized%s, %d with a Clip fused (need %d), file %.2fx smaller, ORT/Whittle top-1 agreement %.1f %%" % (
        quantized, "" if not weight_skips else " (weight layers skipped: %s)" % ", ".join(weight_skips),
        clip_fused, min_clip_fused, before / after, 100 * agree)


def fashion(root, n, offset):
    import gzip
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
        data = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    return (data[offset:offset + n].astype(np.float32) / 255.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    corpus = os.path.join(args.root, "tests", "corpus")
    models = os.path.join(args.root, "models")
    cases = [
        ("Constant weights, opset 11, HardSigmoid", os.path.join(corpus, "paddle_style_lcnet_op11.onnx"), "x",
         rng.standard_normal((200, 3, 32, 32)).astype(np.float32), rng.standard_normal((500, 3, 32, 32)).astype(np.float32)),
        ("int32 input", os.path.join(corpus, "byte_classifier_int32_op13.onnx"), "bytes",
         rng.integers(0, 256, (200, 64)).astype(np.int32), rng.integers(0, 256, (500, 64)).astype(np.int32)),
        ("Keras ReLU6 (tf2onnx Conv -> Clip)", os.path.join(corpus, "keras_mobilenet_tf2onnx_op17.onnx"), "image",
         rng.standard_normal((200, 32, 32, 3)).astype(np.float32), rng.standard_normal((500, 32, 32, 3)).astype(np.float32), 2),
        ("bundled transformer (torch.onnx.export)", os.path.join(models, "transformer.onnx"), "image",
         fashion(args.root, 200, 0), fashion(args.root, 500, 5000)),
        ("bundled residual CNN (torch.onnx.export)", os.path.join(models, "resnet.onnx"), "image",
         fashion(args.root, 200, 0), fashion(args.root, 500, 5000)),
    ]
    failures = 0
    for what, model, name, calib, x, *min_clip in cases:
        with tempfile.TemporaryDirectory() as tmp:
            ok, msg = check(args.bin, model, name, calib, x, tmp, *min_clip)
        failures += not ok
        print("%s %-42s %s" % ("ok  " if ok else "FAIL", what, msg))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
