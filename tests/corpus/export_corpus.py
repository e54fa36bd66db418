#!/usr/bin/env python3
"""Exports the test corpus: architectures users actually have, written by real exporters with
random weights (runtime equivalence with ONNX Runtime needs no training). Every file is what
torch.onnx.export writes — the TorchScript exporter at opsets 11/13/17 and the dynamo exporter
at opset 18 — plus graphs in the style of Paddle2ONNX (weights in Constant nodes, -1 batch dims),
which tests cannot produce with Paddle itself here (no PaddlePaddle on PyPI for this Python).

Needs torch (pip; not a dependency of Whittle or of its tests, which read the committed files):
    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch onnx onnxscript
    /tmp/tv/bin/python tests/corpus/export_corpus.py tests/corpus
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import helper, numpy_helper, TensorProto

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
from train import PatchTransformer as TrainedPatchTransformer, ResNet  # noqa: E402  (the bundled architectures)


def PatchTransformer():
    return TrainedPatchTransformer(dim=32, heads=4, depth=2, patch=7, hidden=64)


torch.manual_seed(0)
torch.backends.mha.set_fastpath_enabled(False)  # export the layers, not the fused inference kernel
np.random.seed(0)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 64), nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class MobileBlock(nn.Module):
    """Depthwise-separable block with squeeze-excitation and HardSwish/HardSigmoid (MobileNetV3,
    PP-LCNet)."""

    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.dw = nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False)
        self.bn1 = nn.BatchNorm2d(c_in)
        self.se1 = nn.Conv2d(c_in, max(4, c_in // 4), 1)
        self.se2 = nn.Conv2d(max(4, c_in // 4), c_in, 1)
        self.pw = nn.Conv2d(c_in, c_out, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)

    def forward(self, x):
        x = F.hardswish(self.bn1(self.dw(x)))
        s = F.hardsigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(x, 1)))))
        return F.hardswish(self.bn2(self.pw(x * s)))


class MobileNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 2, 1)
        self.blocks = nn.Sequential(MobileBlock(16, 24, 2), MobileBlock(24, 32, 1), MobileBlock(32, 48, 2))
        self.fc = nn.Linear(48, 10)

    def forward(self, x):
        x = self.blocks(F.hardswish(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class TorchMha(nn.Module):
    """nn.TransformerEncoderLayer (the fused attention path as exporters write it) on token ids:
    int64 input, Embedding (Gather), key padding by position."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.enc = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, activation="gelu")
        self.fc = nn.Linear(32, 5)

    def forward(self, ids):
        return self.fc(self.enc(self.emb(ids)).mean(dim=1))


class LstmClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 24, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(48, 16, batch_first=True)
        self.fc = nn.Linear(16, 6)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, h = self.gru(y)
        return self.fc(h[-1])


class TinyUNet(nn.Module):
    """Segmenter shape: strided convs down, ConvTranspose and Upsample (nearest, bilinear) up,
    skip concatenations, InstanceNorm, PixelShuffle (DepthToSpace)."""

    def __init__(self):
        super().__init__()
        self.d1 = nn.Conv2d(3, 8, 3, 2, 1)
        self.n1 = nn.InstanceNorm2d(8, affine=True)
        self.d2 = nn.Conv2d(8, 16, 3, 2, 1)
        self.u1 = nn.ConvTranspose2d(16, 8, 4, 2, 1)
        self.c1 = nn.Conv2d(16, 8, 3, 1, 1)
        self.c2 = nn.Conv2d(8, 12, 3, 1, 1)
        self.ps = nn.PixelShuffle(2)
        self.out = nn.Conv2d(3 + 3, 2, 1)

    def forward(self, x):
        a = F.relu(self.n1(self.d1(x)))
        b = F.relu(self.d2(a))
        u = F.relu(self.c1(torch.cat([self.u1(b), a], 1)))
        u = F.interpolate(u, scale_factor=2, mode="bilinear", align_corners=False)
        v = F.interpolate(F.relu(self.c2(u)), scale_factor=0.5, mode="nearest")
        v = self.ps(v)
        return self.out(torch.cat([v, x], 1))


class GroupNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 16, 3, 1, 1)
        self.g = nn.GroupNorm(4, 16)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        x = F.silu(self.g(self.c(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ByteClassifier(nn.Module):
    """A file-type classifier over the first 64 bytes of a file, as Keras-style models take them:
    int32 byte values -> embedding -> Conv1d -> global max pool -> dense."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(256, 16)
        self.conv = nn.Conv1d(16, 32, 5, padding=2)
        self.fc1, self.fc2 = nn.Linear(32, 32), nn.Linear(32, 8)

    def forward(self, b):
        x = self.emb(b.long()).transpose(1, 2)
        x = torch.amax(F.relu(self.conv(x)), dim=2)
        return self.fc2(F.relu(self.fc1(x)))


class CspMishNet(nn.Module):
    """A YOLOv4-style CSPDarknet stage: Conv-BatchNorm-Mish units, a cross-stage-partial split
    whose one half goes through two residual blocks, a Concat, then a pooled linear head. The
    dynamo exporter writes nn.Mish as the opset-18 Mish op."""

    @staticmethod
    def unit(c_in, c_out, k, stride=1):
        return nn.Sequential(nn.Conv2d(c_in, c_out, k, stride, k // 2, bias=False), nn.BatchNorm2d(c_out), nn.Mish())

    def __init__(self):
        super().__init__()
        self.stem = self.unit(3, 16, 3)
        self.down = self.unit(16, 32, 3, 2)
        self.part1, self.part2 = self.unit(32, 16, 1), self.unit(32, 16, 1)
        self.blocks = nn.ModuleList([nn.Sequential(self.unit(16, 16, 1), self.unit(16, 16, 3)) for _ in range(2)])
        self.merge = self.unit(32, 32, 1)
        self.fc = nn.Linear(32, 5)
        # Trained-looking scales (PyTorch's default init and fresh BatchNorm statistics leave the
        # outputs almost constant, which would hide a wrong activation): He-initialised convs and
        # random BatchNorm statistics and affines, folded into the convs by the exporter.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                with torch.no_grad():
                    m.running_mean.normal_(0, 0.2)
                    m.running_var.uniform_(0.5, 1.5)
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.normal_(0, 0.2)

    def forward(self, x):
        x = self.down(self.stem(x))
        a, b = self.part1(x), self.part2(x)
        for blk in self.blocks:
            b = b + blk(b)
        x = self.merge(torch.cat([a, b], 1))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def export(model, args, path, opset, names, dynamic, dynamo=False, hw=False):
    model.eval()
    with torch.no_grad():
        if dynamo:
            torch.onnx.export(model, args, path, opset_version=opset, dynamo=True, input_names=names[0],
                              output_names=names[1],
                              dynamic_shapes=[{0: torch.export.Dim("batch", min=1, max=1024)}])
        else:
            torch.onnx.export(model, args, path, opset_version=opset, dynamo=False, input_names=names[0],
                              output_names=names[1],
                              dynamic_axes={n: ({0: "batch", 2: "height", 3: "width"} if hw and n in names[0] else {0: "batch"})
                                            for n in names[0] + names[1]})
    m = onnx.load(path, load_external_data=True)
    onnx.save(m, path)  # one file, weights inline
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    onnx.checker.check_model(path)
    print("wrote", path, os.path.getsize(path), "bytes, opset", [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")])


def paddle_style(out):
    """A PP-LCNet-like head as Paddle2ONNX writes it: every weight a Constant node, batch dim -1,
    opset 11 with HardSigmoid/HardSwish, Conv + BN folded into Conv, GlobalAveragePool."""
    rng = np.random.default_rng(1)
    nodes, c = [], 0

    def const(name, arr):
        nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr.astype(np.float32), name)))
        return name

    x = "x"
    ch = 3
    for i, (co, stride, groups) in enumerate([(16, 2, 1), (16, 1, 16), (32, 1, 1), (32, 2, 32), (64, 1, 1)]):
        w = const(f"conv{i}_weights", rng.normal(0, 0.3, (co, ch // groups, 3 if groups > 1 or i == 0 else 1,
                                                        3 if groups > 1 or i == 0 else 1)))
        b = const(f"conv{i}_bias", rng.normal(0, 0.1, (co,)))
        k = 3 if groups > 1 or i == 0 else 1
        y = f"c{i}"
        nodes.append(helper.make_node("Conv", [x, w, b], [y], strides=[stride, stride], pads=[k // 2] * 4,
                                      group=groups, name=f"conv2d_{i}"))
        a = f"a{i}"
        if i % 2 == 0:
            nodes.append(helper.make_node("HardSigmoid", [y], [a + "_g"], alpha=0.2, beta=0.5))
            nodes.append(helper.make_node("Mul", [y, a + "_g"], [a]))
        else:
            nodes.append(helper.make_node("Relu", [y], [a]))
        x, ch = a, co
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(np.array([-1, 64], dtype=np.int64), "shape")))
    nodes.append(helper.make_node("Reshape", ["gap", "shape"], ["flat"]))
    fc_w = const("fc_weights", rng.normal(0, 0.2, (64, 10)))
    fc_b = const("fc_bias", rng.normal(0, 0.1, (10,)))
    nodes.append(helper.make_node("MatMul", ["flat", fc_w], ["mm"], name="linear_0"))
    nodes.append(helper.make_node("Add", ["mm", fc_b], ["logits"]))
    nodes.append(helper.make_node("Softmax", ["logits"], ["prob"], axis=1))
    g = helper.make_graph(nodes, "paddle_style",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, 32, 32])],
                          [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [-1, 10])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], producer_name="PaddlePaddle-style (hand-written)")
    m.ir_version = 6
    onnx.checker.check_model(m)
    path = os.path.join(out, "paddle_style_lcnet_op11.onnx")
    onnx.save(m, path)
    print("wrote", path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    img = torch.randn(2, 1, 28, 28)
    rgb = torch.randn(2, 3, 32, 32)
    io = (["input"], ["output"])
    export(Mlp(), (img,), os.path.join(out, "mlp_op13.onnx"), 13, io, True)
    export(ResNet(), (img,), os.path.join(out, "resnet_op11.onnx"), 11, io, True)
    export(ResNet(), (img,), os.path.join(out, "resnet_op18_dynamo.onnx"), 18, io, True, dynamo=True)
    export(MobileNet(), (rgb,), os.path.join(out, "mobilenet_op13.onnx"), 13, io, True)
    export(PatchTransformer(), (img,), os.path.join(out, "patch_transformer_op17.onnx"), 17, io, True)
    export(PatchTransformer(), (img,), os.path.join(out, "patch_transformer_op18_dynamo.onnx"), 18, io, True, dynamo=True)
    export(TorchMha(), (torch.randint(0, 100, (2, 12)),), os.path.join(out, "torch_encoder_int64_op17.onnx"), 17,
           (["ids"], ["output"]), True)
    export(MobileNet(), (rgb,), os.path.join(out, "mobilenet_dynamic_hw_op13.onnx"), 13, io, True, hw=True)
    export(LstmClassifier(), (torch.randn(2, 9, 16),), os.path.join(out, "lstm_gru_op14.onnx"), 14, io, True)
    export(TinyUNet(), (rgb,), os.path.join(out, "tiny_unet_op13.onnx"), 13, io, True)
    export(GroupNormNet(), (rgb,), os.path.join(out, "groupnorm_op18_dynamo.onnx"), 18, io, True, dynamo=True)
    export(ByteClassifier(), (torch.randint(0, 256, (2, 64), dtype=torch.int32),),
           os.path.join(out, "byte_classifier_int32_op13.onnx"), 13, (["bytes"], ["output"]), True)
    paddle_style(out)
    # Last, so that the files above keep their weights: LayerNorm written out (ReduceMean, Sub, Pow,
    # Sqrt, Div, Mul, Add) as the TorchScript exporter does below opset 17.
    export(PatchTransformer(), (img,), os.path.join(out, "patch_transformer_op13.onnx"), 13, io, True)
    # Added after the others, so that their weights stay as they were.
    export(CspMishNet(), (rgb,), os.path.join(out, "csp_mish_op18_dynamo.onnx"), 18, io, True, dynamo=True)


if __name__ == "__main__":
    main()
