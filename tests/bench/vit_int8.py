#!/usr/bin/env python3
"""A PyTorch nn.TransformerEncoder ViT, INT8 against its own FP32 in Whittle's runtime.

Exports a small ViT (32x32x3 images, 4x4 patches -> 64 tokens + a class token, width --dim,
--depth pre-norm nn.TransformerEncoderLayer blocks with GELU, 10 classes; seeded weights; the
layers exported as TorchScript writes them at opset 17, attention fast path off), then
compress-model --int8 on it twice: the defaults, and with attention=0 (the attention MatMuls
Q·Kᵀ and softmax·V left float, as before they were quantized by default). Calibration: 64
seeded images. Timing: run-model --bench at --batch, alternating FP32 / INT8 / INT8 attention=0
for --rounds rounds; each figure is the median over rounds of run-model's p50. Agreement: the
share of 512 other images whose top-1 class the INT8 file (run by Whittle) gives as the FP32
file does, and the INT8 files' attention MatMuls (Whittle's runtime profile names them).

  /work/torchvenv/bin/python tests/bench/vit_int8.py --batch 64 --threads 2 --rounds 5
needs torch, onnx, numpy and a built build/bin.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


class Vit(nn.Module):
    def __init__(self, dim, depth, heads, patch=4, image=32, classes=10):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        t = self.embed(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1) + self.pos
        return self.head(self.norm(self.encoder(t))[:, 0])


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def p50(binp, path, batch, threads):
    out = json.loads(run([os.path.join(binp, "run-model"), path, "--bench", "--batch", str(batch), "--threads",
                          str(threads), "--json"]))
    return float(out["bench"][0]["p50_ms"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.backends.mha.set_fastpath_enabled(False)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = os.path.join(tmp, "vit.onnx")
        model = Vit(args.dim, args.depth, args.heads).eval()
        torch.onnx.export(model, (torch.randn(2, 3, 32, 32),), fp32, opset_version=17, dynamo=False,
                          input_names=["x"], output_names=["logits"], dynamic_axes={"x": {0: "batch"}})
        calib, held = os.path.join(tmp, "calib.npz"), os.path.join(tmp, "held.npz")
        np.savez(calib, x=rng.normal(0, 1, (64, 3, 32, 32)).astype(np.float32))
        np.savez(held, x=rng.normal(0, 1, (512, 3, 32, 32)).astype(np.float32))
        files = {"fp32": fp32}
        for name, opts in (("int8", "calibration=minmax"), ("int8_att1", "calibration=minmax,attention=1")):
            files[name] = os.path.join(tmp, name + ".onnx")
            run([os.path.join(args.bin, "compress-model"), fp32, "-o", files[name], "--int8", opts,
                 "--calibration-data", "npz:" + calib, "--no-bench", "--quiet"])
        # The INT8 files' MatMuls with activation inputs: how many run as int8 kernels.
        for name in ("int8", "int8_att1"):
            prof = run([os.path.join(args.bin, "run-model"), files[name], "--bench", "--batch", "1", "--profile",
                        "--json"])
            ops = {r["op_type"] for r in json.loads(prof)["profile"]["by_op_type"]}
            print("%-10s op types run: %s" % (name, ", ".join(sorted(ops))))
        # Agreement with FP32 on held-out images (Whittle runs both).
        tops = {}
        for name in ("fp32", "int8", "int8_att1"):
            out = os.path.join(tmp, "out_" + name)
            np.save(os.path.join(tmp, "held_x.npy"), np.load(held)["x"])
            run([os.path.join(args.bin, "run-model"), files[name], "--input", "x=" + os.path.join(tmp, "held_x.npy"),
                 "--output-dir", out])
            tops[name] = np.load(os.path.join(out, "logits.npy")).argmax(1)
        times = {k: [] for k in files}
        for _ in range(args.rounds):
            for name, path in files.items():
                times[name].append(p50(args.bin, path, args.batch, args.threads))
        med = {k: statistics.median(v) for k, v in times.items()}
        cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model_name = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
        print("CPU: %s; ViT dim %d depth %d heads %d, 65 tokens; batch %d, %d threads, medians of %d rounds" %
              (model_name, args.dim, args.depth, args.heads, args.batch, args.threads, args.rounds))
        print("%-10s %10s %12s %14s %16s" % ("model", "p50 ms", "samples/s", "vs FP32", "top-1 = FP32's"))
        for name in files:
            agree = float(np.mean(tops[name] == tops["fp32"]))
            print("%-10s %10.2f %12.1f %13.2fx %15.1f%%" % (name, med[name], args.batch * 1e3 / med[name],
                                                             med["fp32"] / med[name], 100 * agree))


if __name__ == "__main__":
    main()
