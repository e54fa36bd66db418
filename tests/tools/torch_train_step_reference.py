#!/usr/bin/env python3
"""PyTorch's loss and parameter gradients for one distillation step of the bundled models — the
reference that tests/runtime/training/train_step_test.cc checks Whittle's training graph against
(loss and every gradient within 1e-4 relative). The test does not need PyTorch: this script wrote
tests/data/train_step/<model>/ once (x.npy, labels.npy, loss.npy and one grad_<param>.npy per
trainable initializer); rerun it after retraining a bundled model:

  python3 -m venv /tmp/torch-venv && /tmp/torch-venv/bin/pip install torch onnx numpy
  /tmp/torch-venv/bin/python tests/tools/torch_train_step_reference.py

The ONNX graph is interpreted op by op with torch.nn.functional (Conv, Relu, MaxPool, Flatten,
Gemm): the same weights, no exporter in between. Loss: (1 - alpha) * CE(labels) + alpha * T^2 *
KL(teacher || student at T), batch means; the teacher is the other bundled model.
"""
import gzip
import os

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = "/usr/share/datasets/fashion-mnist"
BATCH, T, ALPHA = 32, 4.0, 0.5


def idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def run(model, x, params):
    env = {model.graph.input[0].name: x}
    env.update(params)
    for n in model.graph.node:
        a = attrs(n)
        i = [env[name] for name in n.input if name]
        if n.op_type == "Conv":
            pads = a.get("pads", [0, 0, 0, 0])
            assert pads[0] == pads[2] and pads[1] == pads[3]
            y = F.conv2d(i[0], i[1], i[2] if len(i) > 2 else None, stride=a.get("strides", [1, 1]),
                         padding=pads[:2], dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))
        elif n.op_type == "Relu":
            y = F.relu(i[0])
        elif n.op_type == "MaxPool":
            assert not any(a.get("pads", [0]))
            y = F.max_pool2d(i[0], a["kernel_shape"], a.get("strides", a["kernel_shape"]))
        elif n.op_type == "Flatten":
            y = i[0].reshape(i[0].shape[0], -1)
        elif n.op_type == "Gemm":
            A = i[0].t() if a.get("transA", 0) else i[0]
            B = i[1].t() if a.get("transB", 0) else i[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(i) > 2:
                y = y + a.get("beta", 1.0) * i[2]
        else:
            raise SystemExit(f"op {n.op_type} not interpreted")
        env[n.output[0]] = y
    return env[model.graph.output[0].name]


def main():
    torch.set_default_dtype(torch.float64)  # the reference in double, compared in float32
    images = idx(f"{DATA}/train-images-idx3-ubyte.gz")[:BATCH]
    labels = idx(f"{DATA}/train-labels-idx1-ubyte.gz")[:BATCH].astype(np.int64)
    x32 = (images.astype(np.float32) / np.float32(255)).reshape(BATCH, 1, 28, 28)
    x = torch.from_numpy(x32.astype(np.float64))
    y = torch.from_numpy(labels)
    for student, teacher in (("mlp", "cnn"), ("cnn", "mlp")):
        sm = onnx.load(os.path.join(ROOT, "models", f"{student}.onnx"))
        tm = onnx.load(os.path.join(ROOT, "models", f"{teacher}.onnx"))
        sp = {i.name: torch.tensor(numpy_helper.to_array(i).astype(np.float64), requires_grad=True)
              for i in sm.graph.initializer}
        tp = {i.name: torch.tensor(numpy_helper.to_array(i).astype(np.float64)) for i in tm.graph.initializer}
        with torch.no_grad():
            p_teacher = F.softmax(run(tm, x, tp) / T, dim=1)
        z = run(sm, x, sp)
        ce = F.cross_entropy(z, y)
        kl = F.kl_div(F.log_softmax(z / T, dim=1), p_teacher, reduction="batchmean")
        loss = (1 - ALPHA) * ce + ALPHA * T * T * kl
        loss.backward()
        out = os.path.join(ROOT, "tests", "data", "train_step", student)
        os.makedirs(out, exist_ok=True)
        np.save(os.path.join(out, "x.npy"), x32)
        np.save(os.path.join(out, "labels.npy"), labels)
        np.save(os.path.join(out, "loss.npy"), np.array(loss.item(), np.float64))
        for name, p in sp.items():
            np.save(os.path.join(out, f"grad_{name}.npy"), p.grad.numpy().astype(np.float32))
        print(student, "loss", loss.item(), "params", len(sp))


if __name__ == "__main__":
    main()
