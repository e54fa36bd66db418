#!/usr/bin/env python3
"""Writes issue 42's large test model with onnx.helper: LAYERS x (Gemm DIM x DIM + Relu) with seeded
random float32 weights, stored as ONNX external data (MODEL.onnx + MODEL.onnx.data). The default,
10 layers of 8192 x 8192, is 2.68 GB of weights: a benchmark and a memory check, never CI.

    python3 tests/large/make_gemm_model.py OUT.onnx [--layers 10] [--dim 8192] [--seed 0]

Needs numpy and onnx (the checkers' venv: scripts/install-check-deps.sh). Writes the data file one
layer at a time, so it needs about one layer's memory, not the model's.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--dim", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    data_name = os.path.basename(a.out) + ".data"
    data_path = os.path.join(os.path.dirname(os.path.abspath(a.out)), data_name)
    inits, nodes = [], []
    offset = 0
    scale = 1.0 / np.sqrt(a.dim)
    with open(data_path + ".tmp", "wb") as f:
        for i in range(a.layers):
            for name, shape in ((f"w{i}", (a.dim, a.dim)), (f"b{i}", (a.dim,))):
                arr = (rng.standard_normal(shape, dtype=np.float32) * (scale if name[0] == "w" else 0.1)).astype("<f4")
                pad = (-offset) % 64
                f.write(b"\0" * pad)
                offset += pad
                raw = arr.tobytes()
                f.write(raw)
                t = TensorProto()
                t.name = name
                t.data_type = TensorProto.FLOAT
                t.dims.extend(shape)
                t.data_location = TensorProto.EXTERNAL
                for k, v in (("location", data_name), ("offset", str(offset)), ("length", str(len(raw)))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
                inits.append(t)
                offset += len(raw)
            x = "x" if i == 0 else f"r{i - 1}"
            nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"g{i}"], name=f"gemm{i}", transB=1))
            nodes.append(helper.make_node("Relu", [f"g{i}"], [f"r{i}" if i + 1 < a.layers else "y"], name=f"relu{i}"))
    graph = helper.make_graph(
        nodes, "large_gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", a.dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", a.dim])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="whittle-tests")
    with open(a.out + ".tmp", "wb") as f:
        f.write(model.SerializeToString())
    os.replace(data_path + ".tmp", data_path)
    os.replace(a.out + ".tmp", a.out)
    print(f"{a.out}: {a.layers} x Gemm {a.dim}x{a.dim}, {offset / 1e9:.2f} GB in {data_name}")


if __name__ == "__main__":
    main()
