#!/usr/bin/env python3
"""compress-model --portable outside Whittle: each pass that writes ai.whittle ops (--cluster; the
other Whittle-only forms as they are added to PASSES) is run twice on a bundled model, once as
Whittle writes it and once with --portable. The portable file must hold only standard ONNX ops,
pass the ONNX checker and give in ONNX Runtime the outputs Whittle's runtime gives for the
ai.whittle file (logits within 1e-4 relative to the largest, on 64 test images).

    build/check-venv/bin/python tests/tools/ort_portable_check.py --bin build/bin --root .
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_finetune_check import run, whittle_logits  # noqa: E402
from ort_int8_check import load_idx  # noqa: E402

# (model, pass flags)
PASSES = [
    ("mlp", ["--cluster", "k=16"]),
    ("cnn", ["--cluster", "k=32"]),
    ("cnn", ["--binarize"]),
    ("cnn", ["--binarize", "activations=binary,include=/conv2/Conv"]),
    ("mlp", ["--circulant", "block=8"]),  # the DFT form (opset raised 13 -> 17)
    ("mlp", ["--circulant", "block=8", "--portable-dense"]),
    ("transformer", ["--circulant", "block=16"]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    x = np.ascontiguousarray(load_idx("/usr/share/datasets/fashion-mnist", "t10k-images-idx3-ubyte.gz")[:64])
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model, flags in PASSES:
            src = os.path.join(a.root, "models", model + ".onnx")
            own, portable = os.path.join(tmp, "own.onnx"), os.path.join(tmp, "portable.onnx")
            pass_flags = [f for f in flags if f != "--portable-dense"]
            base = [os.path.join(a.bin, "compress-model"), src, "--no-bench", "-q"] + pass_flags
            run(base + ["-o", own])
            run(base + ["-o", portable, "--portable"] + [f for f in flags if f == "--portable-dense"])
            m = onnx.load(portable)
            onnx.checker.check_model(m)
            custom = [n.op_type for n in m.graph.node if n.domain not in ("", "ai.onnx")]
            own_ops = [n.op_type for n in onnx.load(own).graph.node if n.domain == "ai.whittle"]
            want = whittle_logits(a.bin, own, x, tmp)
            s = ort.InferenceSession(portable, providers=["CPUExecutionProvider"])
            got = s.run(None, {s.get_inputs()[0].name: x})[0]
            rel = float(np.abs(got - want).max() / np.abs(want).max())
            ok = not custom and own_ops and rel <= 1e-4
            failed += not ok
            print(f"{model} {' '.join(flags)}: {len(own_ops)} ai.whittle ops lowered, ORT vs Whittle max rel {rel:.2e}"
                  f"{'' if ok else '  FAILED' + (' (custom ops left: ' + ','.join(custom) + ')' if custom else '')}")
    if failed:
        raise SystemExit(f"{failed} configuration(s) failed")


if __name__ == "__main__":
    main()
