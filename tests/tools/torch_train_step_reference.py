#!/usr/bin/env python3
"""PyTorch's loss and parameter gradients for one distillation step of the bundled models — the
reference that tests/runtime/training/train_step_test.cc checks Whittle's training graph against
(loss and every gradient within 1e-4 relative). The test does not need PyTorch: this script wrote
tests/data/train_step/<model>/ once (x.npy, labels.npy, loss.npy and one grad_<param>.npy per
trainable initializer; for the transformer a strided sample of it and grad_norm_<param>.npy); rerun it after retraining a bundled model:

  python3 -m venv /tmp/torch-venv && /tmp/torch-venv/bin/pip install torch onnx numpy
  /tmp/torch-venv/bin/python tests/tools/torch_train_step_reference.py

The ONNX graph is interpreted op by op with torch.nn.functional (Conv, Relu, MaxPool, Flatten,
Gemm, and the transformer's LayerNormalization, MatMul, Softmax, Erf, Pow, ReduceMean, Split and
the exporter's shape arithmetic: Shape, Gather, Unsqueeze, Concat, Reshape, Cast...): the same
weights, no exporter in between. The transformer (student, the MLP its teacher) uses the first
4 images only, and its gradients are stored sampled (see SAMPLE) with their L2 norms. Loss: (1 - alpha) * CE(labels) + alpha * T^2 *
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
TRANSFORMER_BATCH = 4  # a few samples: its reference stays small


def idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def const(t, dtype=torch.float64, device="cpu"):
    """An ONNX tensor as torch: floats in `dtype` on `device` (the reference: double on the CPU),
    integers int64 on the host (shape arithmetic)."""
    a = numpy_helper.to_array(t)
    if a.dtype.kind == "f":
        return torch.from_numpy(np.array(a, np.float64)).to(device=device, dtype=dtype)
    return torch.from_numpy(np.array(a, np.int64))


def gather(data, idx, axis):
    idx = idx.to(data.device)
    n = data.shape[axis]
    if idx.dim() == 0:
        return data.select(axis, int(idx) % n)
    flat = data.index_select(axis, idx.reshape(-1) % n)
    return flat.reshape(data.shape[:axis] + idx.shape + data.shape[axis + 1:])


def reshape(x, shape):
    dims = [x.shape[k] if int(d) == 0 else int(d) for k, d in enumerate(shape.tolist())]  # allowzero=0
    return x.reshape(dims)


def run(model, x, params, dtype=torch.float64, device="cpu"):
    """The model's first output for input x, params (name -> tensor) its initializers; dtype and
    device: those of float constants and casts (tests/bench/cuda_vs_torch_ort.py runs float32 on
    the GPU)."""
    env = {model.graph.input[0].name: x}
    env.update(params)
    for n in model.graph.node:
        a = attrs(n)
        i = [env[name] for name in n.input if name]
        op = n.op_type
        if op == "Conv":
            pads = a.get("pads", [0, 0, 0, 0])
            assert pads[0] == pads[2] and pads[1] == pads[3]
            y = F.conv2d(i[0], i[1], i[2] if len(i) > 2 else None, stride=a.get("strides", [1, 1]),
                         padding=pads[:2], dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))
        elif op == "Relu":
            y = F.relu(i[0])
        elif op == "MaxPool":
            assert not any(a.get("pads", [0]))
            y = F.max_pool2d(i[0], a["kernel_shape"], a.get("strides", a["kernel_shape"]))
        elif op == "GlobalAveragePool":
            y = i[0].mean(dim=(2, 3), keepdim=True)
        elif op == "Flatten":
            y = i[0].reshape(i[0].shape[0], -1)
        elif op == "Gemm":
            A = i[0].t() if a.get("transA", 0) else i[0]
            B = i[1].t() if a.get("transB", 0) else i[1]
            alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
            if alpha == 1.0 and beta == 1.0:  # one kernel, as an exported nn.Linear runs
                y = torch.addmm(i[2], A, B) if len(i) > 2 else A @ B
            else:
                y = alpha * (A @ B)
                if len(i) > 2:
                    y = y + beta * i[2]
        # The transformer's ops (torch.onnx.export, opset 17), shape arithmetic included.
        elif op == "Constant":
            y = const(a["value"], dtype, device)
        elif op == "Shape":
            y = torch.tensor(list(i[0].shape), dtype=torch.int64)
        elif op == "Gather":
            y = gather(i[0], i[1], a.get("axis", 0) % i[0].dim())
        elif op == "Unsqueeze":
            y = i[0]
            for ax in sorted(int(v) % (i[0].dim() + len(i[1])) for v in i[1].tolist()):
                y = y.unsqueeze(ax)
        elif op == "Squeeze":
            y = i[0]
            for ax in sorted((int(v) % i[0].dim() for v in i[1].tolist()), reverse=True):
                y = y.squeeze(ax)
        elif op == "Concat":
            y = torch.cat(i, dim=a["axis"])
        elif op == "Reshape":
            assert not a.get("allowzero", 0)
            y = reshape(i[0], i[1])
        elif op == "Transpose":
            y = i[0].permute(a["perm"])
        elif op == "MatMul":
            y = torch.matmul(i[0], i[1])
        elif op in ("Add", "Sub", "Mul"):
            y = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul}[op](i[0], i[1])
        elif op == "Div":
            y = torch.div(i[0], i[1], rounding_mode="trunc") if not i[0].is_floating_point() else i[0] / i[1]
        elif op == "Cast":
            y = i[0].to(dtype if a["to"] == onnx.TensorProto.FLOAT else torch.int64)
            assert a["to"] in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64)
        elif op == "LayerNormalization":
            ax = a.get("axis", -1) % i[0].dim()
            y = F.layer_norm(i[0], i[0].shape[ax:], i[1], i[2] if len(i) > 2 else None, a.get("epsilon", 1e-5))
        elif op == "Split":
            parts = torch.split(i[0], [int(v) for v in i[1].tolist()], dim=a.get("axis", 0))
            for name, part in zip(n.output, parts):
                env[name] = part
            continue
        elif op == "Pow":
            y = torch.pow(i[0], i[1])
        elif op == "Softmax":
            y = F.softmax(i[0], dim=a.get("axis", -1))
        elif op == "Erf":
            y = torch.erf(i[0])
        elif op == "ReduceMean":
            y = i[0].mean(dim=a["axes"], keepdim=bool(a.get("keepdims", 1)))
        else:
            raise SystemExit(f"op {n.op_type} not interpreted")
        env[n.output[0]] = y
    return env[model.graph.output[0].name]


# Stored gradients: every element of params up to SAMPLE elements, else every stride-th element
# of the flattened gradient (stride = ceil(numel / SAMPLE)), plus each gradient's L2 norm, so the
# transformer's reference stays small.
SAMPLE = 512


def main():
    torch.set_default_dtype(torch.float64)  # the reference in double, compared in float32
    images = idx(f"{DATA}/train-images-idx3-ubyte.gz")[:BATCH]
    labels = idx(f"{DATA}/train-labels-idx1-ubyte.gz")[:BATCH].astype(np.int64)
    x32 = (images.astype(np.float32) / np.float32(255)).reshape(BATCH, 1, 28, 28)
    for student, teacher, batch, sampled in (("mlp", "cnn", BATCH, False), ("cnn", "mlp", BATCH, False),
                                             ("transformer", "mlp", TRANSFORMER_BATCH, True)):
        xs = x32[:batch]
        x = torch.from_numpy(xs.astype(np.float64))
        y = torch.from_numpy(labels[:batch])
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
        np.save(os.path.join(out, "x.npy"), xs)
        np.save(os.path.join(out, "labels.npy"), labels[:batch])
        np.save(os.path.join(out, "loss.npy"), np.array(loss.item(), np.float64))
        for name, p in sp.items():
            g = p.grad.numpy()
            if sampled:
                stride = -(-g.size // SAMPLE)
                np.save(os.path.join(out, f"grad_{name}.npy"), g.reshape(-1)[::stride].astype(np.float32))
                np.save(os.path.join(out, f"grad_norm_{name}.npy"), np.array(np.linalg.norm(g), np.float64))
            else:
                np.save(os.path.join(out, f"grad_{name}.npy"), g.astype(np.float32))
        print(student, "loss", loss.item(), "params", len(sp))


if __name__ == "__main__":
    main()
