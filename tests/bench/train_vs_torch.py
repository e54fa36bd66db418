#!/usr/bin/env python3
"""Training throughput side by side: finetune-model vs PyTorch eager on the CPU, same student,
same teacher, same batch, same threads, same loss (distillation at T=4 mixed with cross-entropy,
SGD with momentum), on Fashion-MNIST. Runs alternate (Whittle, PyTorch, ...) for --rounds rounds;
each figure is the median samples/s of its rounds (Whittle: finetune-model's own per-epoch
figure, which excludes loading; PyTorch: the timed loop over the same number of samples).

  python3 -m venv /tmp/torch-venv && /tmp/torch-venv/bin/pip install torch onnx numpy
  /tmp/torch-venv/bin/python tests/bench/train_vs_torch.py models/cnn.onnx models/mlp.onnx \
      --batch 64,256 --threads 1,2 --samples 8192 --bin build/bin

The PyTorch side interprets the ONNX graph with torch.nn.functional
(tests/tools/torch_train_step_reference.py), float32, torch.set_num_threads(threads).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from torch_train_step_reference import DATA, idx, run  # noqa: E402

T, ALPHA = 4.0, 0.5


def torch_rate(student, teacher, x, y, batch, threads):
    torch.set_num_threads(threads)
    sm, tm = onnx.load(student), onnx.load(teacher)
    sp = {i.name: torch.tensor(numpy_helper.to_array(i), requires_grad=True) for i in sm.graph.initializer}
    tp = {i.name: torch.tensor(numpy_helper.to_array(i)) for i in tm.graph.initializer}
    opt = torch.optim.SGD(sp.values(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    n = x.shape[0]
    t0 = time.perf_counter()
    for b0 in range(0, n, batch):
        xb, yb = x[b0:b0 + batch], y[b0:b0 + batch]
        with torch.no_grad():
            pt = F.softmax(run(tm, xb, tp) / T, dim=1)
        z = run(sm, xb, sp)
        loss = (1 - ALPHA) * F.cross_entropy(z, yb) + ALPHA * T * T * F.kl_div(
            F.log_softmax(z / T, dim=1), pt, reduction="batchmean")
        opt.zero_grad()
        loss.backward()
        opt.step()
    return n / (time.perf_counter() - t0)


def whittle_rate(bin_dir, student, teacher, samples, batch, threads):
    out = subprocess.run([os.path.join(bin_dir, "finetune-model"), student, "--teacher", teacher,
                          "--train-data", "fashion-mnist:train", "--train-limit", str(samples),
                          "-o", "/tmp/train_vs_torch.onnx", "--epochs", "1", "--batch", str(batch),
                          "--threads", str(threads), "--alpha", str(ALPHA), "--temperature", str(T),
                          "--json", "-q"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["epochs"][0]["samples_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="students; each is its own teacher unless --teacher")
    ap.add_argument("--teacher", default=None)
    ap.add_argument("--batch", default="64,256")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--samples", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build", "bin"))
    a = ap.parse_args()
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model_name = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    print(f"CPU: {model_name}; torch {torch.__version__}; medians of {a.rounds} alternating rounds, "
          f"{a.samples} samples per round")
    images = idx(f"{DATA}/train-images-idx3-ubyte.gz")[:a.samples]
    labels = idx(f"{DATA}/train-labels-idx1-ubyte.gz")[:a.samples].astype(np.int64)
    x = torch.from_numpy((images.astype(np.float32) / np.float32(255)).reshape(-1, 1, 28, 28))
    y = torch.from_numpy(labels)
    print("| model | batch | threads | Whittle samples/s | PyTorch samples/s | Whittle/PyTorch |")
    print("|---|---|---|---|---|---|")
    for m in a.models:
        teacher = a.teacher or m
        for batch in [int(b) for b in a.batch.split(",")]:
            for threads in [int(t) for t in a.threads.split(",")]:
                w, p = [], []
                for _ in range(a.rounds):
                    w.append(whittle_rate(a.bin, m, teacher, a.samples, batch, threads))
                    p.append(torch_rate(m, teacher, x, y, batch, threads))
                mw, mp = statistics.median(w), statistics.median(p)
                print(f"| {os.path.basename(m)} | {batch} | {threads} | {mw:.0f} | {mp:.0f} | {mw / mp:.2f} |",
                      flush=True)


if __name__ == "__main__":
    main()
