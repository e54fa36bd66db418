#!/usr/bin/env python3
"""ONNX Runtime's own static INT8 quantization of a model, as the reference Whittle is compared
with (accuracy, speed, and the QDQ patterns our runtime must fuse).

  ort_quantize_reference.py IN.onnx OUT.onnx [--format qdq|qoperator] [--per-channel 1|0]
      [--samples 200] [--activations u8|s8] [--calibration minmax|entropy|percentile]
      [--no-preprocess] [--data /usr/share/datasets/fashion-mnist]

Calibration reads the first N Fashion-MNIST training images from the IDX files with numpy
(scaled to [0,1], as Whittle's loaders do). Pre-processing (ORT's quant_pre_process: shape
inference and graph optimisation, which folds BatchNormalization into Conv) is on by default
because that is what ORT's documentation asks users to do before quantize_static.
Not a product dependency: a cross-check script for tests and benchmarks.
"""
import argparse
import gzip
import os
import sys
import tempfile

import numpy as np
import onnx
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                      QuantType, quantize_static)


def read_idx_images(path, limit):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, n, rows, cols = np.frombuffer(data[:16], dtype=">i4")
    if magic != 2051:
        raise ValueError(f"{path}: not an IDX image file (magic {magic})")
    n = min(int(n), limit)
    pix = np.frombuffer(data[16:16 + n * rows * cols], dtype=np.uint8)
    return pix.reshape(n, 1, rows, cols).astype(np.float32) / 255.0


class Reader(CalibrationDataReader):
    def __init__(self, input_name, images, batch):
        self.batches = [images[i:i + batch] for i in range(0, len(images), batch)]
        self.input_name = input_name
        self.i = 0

    def get_next(self):
        if self.i >= len(self.batches):
            return None
        self.i += 1
        return {self.input_name: self.batches[self.i - 1]}

    def rewind(self):
        self.i = 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--format", choices=["qdq", "qoperator"], default="qdq")
    ap.add_argument("--per-channel", type=int, default=1)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--activations", choices=["u8", "s8"], default="u8")
    ap.add_argument("--calibration", choices=["minmax", "entropy", "percentile"], default="minmax")
    ap.add_argument("--no-preprocess", action="store_true")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()

    images = read_idx_images(os.path.join(args.data, "train-images-idx3-ubyte.gz"), args.samples)
    src = args.input
    tmp = None
    if not args.no_preprocess:
        from onnxruntime.quantization.shape_inference import quant_pre_process
        tmp = tempfile.NamedTemporaryFile(suffix=".onnx", delete=False)
        tmp.close()
        quant_pre_process(args.input, tmp.name, skip_symbolic_shape=True)
        src = tmp.name
    input_name = onnx.load(src).graph.input[0].name
    method = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
              "percentile": CalibrationMethod.Percentile}[args.calibration]
    quantize_static(
        src, args.output, Reader(input_name, images, 50),
        quant_format=QuantFormat.QDQ if args.format == "qdq" else QuantFormat.QOperator,
        per_channel=bool(args.per_channel),
        activation_type=QuantType.QUInt8 if args.activations == "u8" else QuantType.QInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=method)
    if tmp:
        os.unlink(tmp.name)
    m = onnx.load(args.output)
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(f"{args.output}: {os.path.getsize(args.output)} bytes, ops {ops}", file=sys.stderr)


if __name__ == "__main__":
    main()
