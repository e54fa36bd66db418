#!/usr/bin/env python3
"""Trains the bundled Fashion-MNIST models and exports them to ONNX.

All four are exported by torch.onnx.export as users' models are (dynamic
batch; the exporter's own node names, BatchNormalization folded into Conv,
Shape-derived reshape targets): an MLP and a CNN (opset 13), a patch
transformer (LayerNorm, erf-GELU, multi-head attention, opset 17) and a compact
residual CNN (~38 k parameters, opset 13).

The MLP and CNN are also written node by node with onnx.helper from the same
weights to tests/data/{mlp,cnn}_handbuilt.onnx (BatchNormalization a separate
node, Gemm transB=1, named nodes fc1, block1.conv, ...): the tests that address
layers by name or need an unfolded BatchNormalization use those.

Usage (from the repository root; needs the Debian package dataset-fashion-mnist
and torch, onnx, onnxruntime, numpy from PyPI):
    python3 models/train.py [--out models] [--data /usr/share/datasets/fashion-mnist]
    python3 models/train.py --models mlp,cnn --from-handbuilt   # re-export, no training

Outputs: {mlp,cnn,transformer,resnet}.onnx, models.json (accuracies and
checks), and <name>_logits_256.npy (PyTorch float32 logits for the first 256
test images, which the tests compare the runtime against). --models picks a
subset (the others keep their files and models.json entries). --from-handbuilt
loads the MLP/CNN weights from tests/data/*_handbuilt.onnx instead of training.
"""

import argparse
import gzip
import io
import json
import os
import random
import struct
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import nn

OPSET = 13
IR_VERSION = 8
SEED = 20240611


def read_idx_gz(path):
    """Parses a gzipped IDX file (unsigned-byte payload) into a numpy array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndims = data[3]
    header_len = 4 + 4 * ndims
    dims = struct.unpack(">" + "I" * ndims, data[4:header_len])
    expected = int(np.prod(dims, dtype=np.int64))
    payload = np.frombuffer(data, dtype=np.uint8, offset=header_len)
    if payload.size != expected:
        raise ValueError(f"{path}: payload has {payload.size} bytes, header promises {expected}")
    return payload.reshape(dims)


def load_split(data_dir, prefix):
    images = read_idx_gz(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx_gz(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)  # N,1,28,28
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.flatten(x)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = self.pool(torch.relu(self.bn2(self.conv2(x))))
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        return self.fc2(x)


class PatchTransformer(nn.Module):
    """ViT-style classifier: 7x7 patches (16 tokens), 2 pre-norm blocks of multi-head attention
    (6 heads, width 192) and an erf-GELU MLP, mean-pooled head."""

    def __init__(self, dim=192, heads=6, depth=2, patch=7, hidden=384):
        super().__init__()
        self.patch, self.heads = patch, heads
        self.embed = nn.Linear(patch * patch, dim)
        self.pos = nn.Parameter(torch.randn(1, (28 // patch) ** 2, dim) * 0.02)
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(dim), qkv=nn.Linear(dim, 3 * dim), out=nn.Linear(dim, dim),
                ln2=nn.LayerNorm(dim), fc1=nn.Linear(dim, hidden), fc2=nn.Linear(hidden, dim))))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

    def forward(self, x):
        b, p = x.shape[0], self.patch
        x = x.reshape(b, 1, 28 // p, p, 28 // p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, -1, p * p)
        x = self.embed(x) + self.pos
        n, d, h = x.shape[1], x.shape[2], self.heads
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).reshape(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-2, -1) * (d // h) ** -0.5, dim=-1)
            x = x + blk["out"]((a @ v).transpose(1, 2).reshape(b, n, d))
            x = x + blk["fc2"](F.gelu(blk["fc1"](blk["ln2"](x))))
        return self.head(self.norm(x).mean(dim=1))


class ResBlock(nn.Module):
    def __init__(self, c, stride):
        super().__init__()
        c_in = c if stride == 1 else c // 2
        self.c1, self.b1 = nn.Conv2d(c_in, c, 3, stride, 1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)
        self.skip = None if stride == 1 else nn.Sequential(nn.Conv2d(c_in, c, 1, stride, bias=False),
                                                           nn.BatchNorm2d(c))

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + (x if self.skip is None else self.skip(x)))


class ResNet(nn.Module):
    """Compact residual CNN: 3x3 stem, three residual blocks (16, 32/2, 32), global pooling."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(ResBlock(16, 1), ResBlock(32, 2), ResBlock(32, 1))
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def train(model, x, y, epochs, lr, batch_size, log_name):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(SEED)
    n = x.shape[0]
    for epoch in range(epochs):
        model.train()
        t0 = time.time()
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for start in range(0, n, batch_size):
            idx = perm[start:start + batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.item() * idx.numel()
        print(f"[{log_name}] epoch {epoch + 1}/{epochs} loss {total / n:.4f} "
              f"({time.time() - t0:.1f}s)", flush=True)


@torch.no_grad()
def predict(model, x, batch_size=1000):
    model.eval()
    return torch.cat([model(x[i:i + batch_size]) for i in range(0, x.shape[0], batch_size)])


def f32(name, t):
    return numpy_helper.from_array(t.detach().cpu().numpy().astype(np.float32), name)


def gemm(prefix, linear, inp, out, nodes, inits):
    inits += [f32(f"{prefix}.weight", linear.weight), f32(f"{prefix}.bias", linear.bias)]
    nodes.append(helper.make_node("Gemm", [inp, f"{prefix}.weight", f"{prefix}.bias"], [out],
                                  name=prefix, transB=1))


def conv_bn_relu_pool(prefix, conv, bn, inp, out, nodes, inits):
    inits += [f32(f"{prefix}.conv.weight", conv.weight), f32(f"{prefix}.conv.bias", conv.bias),
              f32(f"{prefix}.bn.scale", bn.weight), f32(f"{prefix}.bn.bias", bn.bias),
              f32(f"{prefix}.bn.mean", bn.running_mean), f32(f"{prefix}.bn.var", bn.running_var)]
    nodes.append(helper.make_node(
        "Conv", [inp, f"{prefix}.conv.weight", f"{prefix}.conv.bias"], [f"{prefix}.conv_out"],
        name=f"{prefix}.conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]))
    nodes.append(helper.make_node(
        "BatchNormalization",
        [f"{prefix}.conv_out", f"{prefix}.bn.scale", f"{prefix}.bn.bias", f"{prefix}.bn.mean",
         f"{prefix}.bn.var"], [f"{prefix}.bn_out"],
        name=f"{prefix}.bn", epsilon=float(bn.eps), momentum=0.9))
    nodes.append(helper.make_node("Relu", [f"{prefix}.bn_out"], [f"{prefix}.relu_out"],
                                  name=f"{prefix}.relu"))
    nodes.append(helper.make_node("MaxPool", [f"{prefix}.relu_out"], [out], name=f"{prefix}.pool",
                                  kernel_shape=[2, 2], strides=[2, 2]))


def make_model(graph_name, nodes, inits):
    graph = helper.make_graph(
        nodes, graph_name,
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="whittle-models-train",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def export_mlp(m):
    nodes, inits = [], []
    nodes.append(helper.make_node("Flatten", ["image"], ["flat"], name="flatten", axis=1))
    gemm("fc1", m.fc1, "flat", "fc1_out", nodes, inits)
    nodes.append(helper.make_node("Relu", ["fc1_out"], ["relu1_out"], name="relu1"))
    gemm("fc2", m.fc2, "relu1_out", "fc2_out", nodes, inits)
    nodes.append(helper.make_node("Relu", ["fc2_out"], ["relu2_out"], name="relu2"))
    gemm("fc3", m.fc3, "relu2_out", "logits", nodes, inits)
    return make_model("fashion_mnist_mlp", nodes, inits)


def export_cnn(m):
    nodes, inits = [], []
    conv_bn_relu_pool("block1", m.conv1, m.bn1, "image", "block1_out", nodes, inits)
    conv_bn_relu_pool("block2", m.conv2, m.bn2, "block1_out", "block2_out", nodes, inits)
    nodes.append(helper.make_node("Flatten", ["block2_out"], ["flat"], name="flatten", axis=1))
    gemm("fc1", m.fc1, "flat", "fc1_out", nodes, inits)
    nodes.append(helper.make_node("Relu", ["fc1_out"], ["relu_out"], name="relu"))
    gemm("fc2", m.fc2, "relu_out", "logits", nodes, inits)
    return make_model("fashion_mnist_cnn", nodes, inits)


HANDBUILT_NAMES = {  # module state_dict name -> initializer name in the hand-built graph
    "mlp": {f"fc{i}.{p}": f"fc{i}.{p}" for i in (1, 2, 3) for p in ("weight", "bias")},
    "cnn": dict([(f"fc{i}.{p}", f"fc{i}.{p}") for i in (1, 2) for p in ("weight", "bias")] +
                [(f"{m}{b}.{p}", f"block{b}.{blk}.{q}") for b in (1, 2)
                 for m, blk, pairs in (("conv", "conv", (("weight", "weight"), ("bias", "bias"))),
                                       ("bn", "bn", (("weight", "scale"), ("bias", "bias"),
                                                     ("running_mean", "mean"), ("running_var", "var"))))
                 for p, q in pairs]),
}


def load_handbuilt(name, model, path):
    """Copies the weights of a hand-built graph (tests/data/<name>_handbuilt.onnx) into model."""
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
    state = model.state_dict()
    for key, init in HANDBUILT_NAMES[name].items():
        state[key] = torch.from_numpy(inits[init].copy())
    model.load_state_dict(state)
    model.eval()


def ort_logits(path, x, batch_size=1000):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    # Disable graph rewrites so ORT runs the graph as written (BN unfused).
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    xs = x.numpy()
    return np.concatenate([sess.run(["logits"], {"image": xs[i:i + batch_size]})[0]
                           for i in range(0, xs.shape[0], batch_size)])


def torch_export(opset):
    """An export_fn writing what torch.onnx.export writes (dynamic batch)."""

    def export(model):
        model.eval()
        buf = io.BytesIO()
        with torch.no_grad():
            torch.onnx.export(model, (torch.zeros(1, 1, 28, 28),), buf, opset_version=opset, dynamo=False,
                              input_names=["image"], output_names=["logits"],
                              dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
        return onnx.load_from_string(buf.getvalue())

    return export


def build(name, model, export_fn, epochs, lr, data, out_dir, summary, handbuilt_fn=None, from_handbuilt=False):
    x_train, y_train, x_test, y_test = data
    handbuilt_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                                  f"{name}_handbuilt.onnx")
    t0 = time.time()
    if from_handbuilt:
        load_handbuilt(name, model, handbuilt_path)
    else:
        train(model, x_train, y_train, epochs, lr, 128, name)
    train_s = time.time() - t0
    logits = predict(model, x_test)
    accuracy = (logits.argmax(1) == y_test).double().mean().item()
    onnx_path = os.path.join(out_dir, f"{name}.onnx")
    onnx.save(export_fn(model), onnx_path)
    ort_out = ort_logits(onnx_path, x_test)
    diff = float(np.abs(ort_out - logits.numpy()).max())
    if not diff < 1e-4:
        sys.exit(f"{name}: ONNX Runtime logits differ from PyTorch by {diff} (limit 1e-4)")
    np.save(os.path.join(out_dir, f"{name}_logits_256.npy"),
            logits[:256].numpy().astype(np.float32))
    if handbuilt_fn:
        onnx.save(handbuilt_fn(model), handbuilt_path)
        diff_h = float(np.abs(ort_logits(handbuilt_path, x_test) - logits.numpy()).max())
        if not diff_h < 1e-4:
            sys.exit(f"{name}: the hand-built graph's logits differ from PyTorch by {diff_h} (limit 1e-4)")
    summary[name] = {
        "file": f"{name}.onnx",
        "accuracy": round(accuracy, 4),
        "test_samples": int(x_test.shape[0]),
        "params": int(sum(p.numel() for p in model.parameters())),
        "ort_max_abs_diff": diff,
        "epochs": epochs,
        "train_seconds": round(train_s, 1),
    }
    if from_handbuilt and name in summary_before:
        # Re-exported, not retrained: the training record stays the original one.
        summary[name]["epochs"] = summary_before[name]["epochs"]
        summary[name]["train_seconds"] = summary_before[name]["train_seconds"]
    print(f"[{name}] test accuracy {accuracy:.4f}, ORT max abs diff {diff:.3g}, "
          f"trained in {train_s:.0f}s", flush=True)


summary_before = {}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--data", default=os.environ.get("WHITTLE_FASHION_MNIST_DIR",
                                                         "/usr/share/datasets/fashion-mnist"))
    parser.add_argument("--epochs", type=int, default=None,
                        help="override the epoch count of both models (smoke runs)")
    parser.add_argument("--models", default="mlp,cnn,transformer,resnet",
                        help="comma-separated subset to train and export")
    parser.add_argument("--from-handbuilt", action="store_true",
                        help="mlp/cnn: take the weights from tests/data/<name>_handbuilt.onnx instead of training")
    parser.add_argument("--train-limit", type=int, default=None,
                        help="train on the first N images only (smoke runs)")
    args = parser.parse_args()

    torch.set_num_threads(2)
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    random.seed(SEED)
    torch.use_deterministic_algorithms(True)

    x_train, y_train = load_split(args.data, "train")
    x_test, y_test = load_split(args.data, "t10k")
    if args.train_limit:
        x_train, y_train = x_train[:args.train_limit], y_train[:args.train_limit]
    data = (x_train, y_train, x_test, y_test)
    print(f"train {tuple(x_train.shape)}, test {tuple(x_test.shape)}", flush=True)

    summary = {}
    json_path = os.path.join(args.out, "models.json")
    if os.path.exists(json_path):
        with open(json_path) as f:
            summary = json.load(f)
    wanted = set(args.models.split(","))
    specs = [("mlp", Mlp, torch_export(13), export_mlp, 8, 1e-3), ("cnn", Cnn, torch_export(13), export_cnn, 6, 1e-3),
             ("transformer", PatchTransformer, torch_export(17), None, 8, 1e-3),
             ("resnet", ResNet, torch_export(13), None, 5, 2e-3)]
    global summary_before
    summary_before = dict(summary)
    for i, (name, cls, export_fn, handbuilt_fn, epochs, lr) in enumerate(specs):
        if name not in wanted:
            continue
        if args.from_handbuilt and handbuilt_fn is None:
            sys.exit(f"--from-handbuilt: {name} has no hand-built graph")
        torch.manual_seed(SEED + i)
        build(name, cls(), export_fn, args.epochs or epochs, lr, data, args.out, summary, handbuilt_fn,
              args.from_handbuilt)

    with open(json_path, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
