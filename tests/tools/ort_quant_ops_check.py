#!/usr/bin/env python3
"""ONNX Runtime's quantized com.microsoft ops, one node at a time, in Whittle against ONNX Runtime.

Runs the single-node cases of tests/corpus/ort_quant/checks.py (DynamicQuantizeMatMul,
MatMulIntegerToFloat, QGemm, QLinearAdd/Mul, QLinearSigmoid/LeakyRelu, QLinearConcat,
QLinearGlobalAveragePool, QLinearAveragePool, QLinearSoftmax, QAttention, DynamicQuantizeLSTM,
QEmbedLayerNormalization; both 8-bit types, per-column parameters, transposes, NHWC, ceil_mode,
opset-12 softmax, reverse and bidirectional LSTMs with peepholes and clip, ...) with the
expansion side replaced by Whittle's run-model reading the contrib node itself (lib/onnx/
contrib_quant_ops.cc). Every case keeps the expectation checks.py states for the proposed
expansion: bit-exact where the README says so, at most 1 LSB on a rare element for QLinearAdd,
float closeness for the attention and layer-norm outputs. On a CPU where ORT's uint8 x int8 GEMM
saturates (no VNNI: ort_saturation.py), a case with int8 inputs on which ORT and Whittle disagree
holds Whittle to the NumPy reference instead, and shows ORT's output. Exit 1 on any failure.
Usage: ort_quant_ops_check.py --bin DIR --corpus tests/corpus/ort_quant
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", required=True)
    args = ap.parse_args()
    sys.argv = [sys.argv[0]]
    sys.path.insert(0, os.path.abspath(args.corpus))
    import checks as C  # noqa: E402

    runs = [0]

    def whittle(model, feeds):
        runs[0] += 1
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.onnx")
            onnx.save(model, path)
            cmd = [os.path.join(args.bin, "run-model"), path, "--output-dir", tmp]
            names = {i.name for i in model.graph.input}
            for k, v in feeds.items():
                if k in names:
                    f = os.path.join(tmp, "in_%s.npy" % k)
                    np.save(f, v)
                    cmd += ["--input", "%s=%s" % (k, f)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("run-model: " + r.stderr.strip())
            return [np.load(os.path.join(tmp, o.name + ".npy")) for o in model.graph.output]

    C.EXPANSION_RUNNER = whittle
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from ort_saturation import ort_u8s8_saturates  # noqa: E402
    C.ORT_SATURATES = ort_u8s8_saturates()
    if C.ORT_SATURATES:
        print("ONNX Runtime's uint8 x int8 GEMM saturates on this CPU (no VNNI): where it disagrees with Whittle on a "
              "case with int8 inputs, Whittle is held to the NumPy reference and ORT's output is shown, not counted")
    for fn in [C.checks_dynamic_quantize_matmul, C.checks_matmul_integer_to_float, C.checks_qgemm,
               C.checks_qlinear_binary, C.checks_lut_activations, C.checks_qlinear_concat,
               C.checks_global_average_pool, C.checks_average_pool, C.checks_qlinear_softmax, C.checks_qattention,
               C.checks_dynamic_quantize_lstm, C.checks_qembed_layer_norm, C.checks_larger_shapes]:
        print("\n--- " + fn.__name__)
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            C.check(fn.__name__ + " raised", False, repr(e)[:300])
    failed = [name for name, ok, _ in C.RESULTS if not ok]
    print("\n%d checks (%d Whittle runs), %d failed" % (len(C.RESULTS), runs[0], len(failed)))
    return 1 if failed or runs[0] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
