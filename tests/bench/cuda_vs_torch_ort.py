#!/usr/bin/env python3
"""GPU inference side by side on one machine: run-model --device cuda vs PyTorch eager vs ONNX
Runtime's CUDA provider, the same ONNX models, batch 1/64/1024, float32.

Every runner does what a service does per request: host input up, the model, host output down, and
waits for it. Whittle: run-model --bench (--warmup 10, timed runs for --min-time seconds, median
latency). PyTorch eager: the ONNX graph interpreted op by op with torch / torch.nn.functional on
the GPU (float32 weights uploaded once; the exporter's shape arithmetic stays on the host, as in
exported PyTorch code), torch.inference_mode(). ONNX Runtime: InferenceSession with
CUDAExecutionProvider only (the row says n/a when that provider is missing or falls back). Rounds
alternate the runners; each figure is the median over rounds of each round's median latency.

  python3 tests/bench/cuda_vs_torch_ort.py models/{mlp,cnn,transformer,resnet}.onnx \\
      --bin build/bin --batch 1,64,1024 --rounds 3
(scripts/cuda-device-check.sh step 7 runs it on the GPU machine.)
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np
import onnx
from onnx import numpy_helper


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class TorchModel:
    """An ONNX graph run op by op in PyTorch eager mode, float32, on `device`."""

    def __init__(self, path, device):
        import torch
        self.torch, self.device = torch, device
        self.model = onnx.load(path)
        self.params = {}
        for t in self.model.graph.initializer:
            self.params[t.name] = self.tensor(numpy_helper.to_array(t))

    def tensor(self, a):
        torch = self.torch
        if a.dtype.kind == "f":  # float data on the GPU in float32
            return torch.from_numpy(np.array(a, np.float32)).to(self.device)
        return torch.from_numpy(np.array(a, np.int64))  # shape arithmetic stays on the host

    def __call__(self, x):
        torch, F = self.torch, self.torch.nn.functional
        env = {self.model.graph.input[0].name: x}
        env.update(self.params)
        for n in self.model.graph.node:
            a = attrs(n)
            i = [env[name] for name in n.input if name]
            op = n.op_type
            if op == "Conv":
                pads = a.get("pads", [0, 0, 0, 0])
                y = F.conv2d(i[0], i[1], i[2] if len(i) > 2 else None, stride=a.get("strides", [1, 1]),
                             padding=pads[:2], dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))
            elif op == "Relu":
                y = F.relu(i[0])
            elif op == "MaxPool":
                y = F.max_pool2d(i[0], a["kernel_shape"], a.get("strides", a["kernel_shape"]),
                                 a.get("pads", [0, 0, 0, 0])[:2])
            elif op == "GlobalAveragePool":
                y = i[0].mean(dim=(2, 3), keepdim=True)
            elif op == "Flatten":
                y = torch.flatten(i[0], a.get("axis", 1))
            elif op == "Gemm":
                w = i[1].t() if a.get("transB", 0) else i[1]
                y = F.linear(i[0], w.t()) if len(i) < 3 else torch.addmm(i[2], i[0], w)
            elif op == "Constant":
                y = self.tensor(numpy_helper.to_array(a["value"]))
            elif op == "Shape":
                y = torch.tensor(list(i[0].shape), dtype=torch.int64)
            elif op == "Gather":
                ax = a.get("axis", 0) % i[0].dim()
                idx = i[1].to(i[0].device)
                y = torch.index_select(i[0], ax, idx.reshape(-1) % i[0].shape[ax]).reshape(
                    i[0].shape[:ax] + idx.shape + i[0].shape[ax + 1:])
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
                dims = [i[0].shape[k] if int(d) == 0 else int(d) for k, d in enumerate(i[1].tolist())]
                y = i[0].reshape(dims)
            elif op == "Transpose":
                y = i[0].permute(a["perm"])
            elif op == "MatMul":
                y = torch.matmul(i[0], i[1])
            elif op in ("Add", "Sub", "Mul"):
                y = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul}[op](i[0], i[1])
            elif op == "Div":
                y = torch.div(i[0], i[1], rounding_mode="trunc") if not i[0].is_floating_point() else i[0] / i[1]
            elif op == "Cast":
                y = i[0].to(torch.float32 if a["to"] == onnx.TensorProto.FLOAT else torch.int64)
            elif op == "LayerNormalization":
                ax = a.get("axis", -1) % i[0].dim()
                y = F.layer_norm(i[0], i[0].shape[ax:], i[1], i[2] if len(i) > 2 else None, a.get("epsilon", 1e-5))
            elif op == "Split":
                for name, part in zip(n.output, torch.split(i[0], [int(v) for v in i[1].tolist()], a.get("axis", 0))):
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
                raise SystemExit(f"cuda_vs_torch_ort: op {op} is not interpreted")
            env[n.output[0]] = y
        return env[self.model.graph.output[0].name]


def timed(fn, min_time, warmup=10):
    for _ in range(warmup):
        fn()
    lat, start = [], time.perf_counter()
    while len(lat) < 20 or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        lat.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(lat)


def whittle_ms(bin_dir, path, batch, min_time):
    out = subprocess.run([os.path.join(bin_dir, "run-model"), path, "--device", "cuda", "--bench", "--batch",
                          str(batch), "--min-time", str(min_time), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["bench"][0]["p50_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--bin", default="build/bin", help="folder of run-model")
    ap.add_argument("--batch", default="1,64,1024")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds of timed runs per figure")
    ap.add_argument("--device", default="cuda", help="PyTorch's device (cpu: a smoke test of this script)")
    a = ap.parse_args()
    import torch
    ort = None
    try:
        import onnxruntime
        if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
            ort = onnxruntime
    except ImportError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu_name = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    print(f"GPU: {gpu}; CPU: {cpu_name}; torch {torch.__version__}; onnxruntime "
          f"{ort.__version__ + ' (CUDA provider)' if ort else 'with no CUDA provider: n/a'}; "
          f"median latency ms (host in -> host out), medians of {a.rounds} alternating rounds")
    print("| model | batch | Whittle ms | PyTorch eager ms | ORT CUDA ms | PyTorch time / Whittle time | ORT time / Whittle time |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(1)
    for path in a.models:
        tm = TorchModel(path, a.device)
        sess = None
        if ort:
            sess = ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
            if sess.get_providers()[0] != "CUDAExecutionProvider":
                sess = None
        for batch in [int(b) for b in a.batch.split(",")]:
            x = rng.random((batch, 1, 28, 28), dtype=np.float32)
            in_name = tm.model.graph.input[0].name

            def torch_run():
                with torch.inference_mode():
                    y = tm(torch.from_numpy(x).to(a.device)).cpu()
                return y

            want = torch_run().numpy()
            if sess is not None:
                got = sess.run(None, {in_name: x})[0]
                assert np.allclose(got, want, atol=1e-3, rtol=1e-3), f"{path}: ORT and PyTorch disagree"
            w, p, o = [], [], []
            for _ in range(a.rounds):
                w.append(whittle_ms(a.bin, path, batch, a.min_time))
                p.append(timed(torch_run, a.min_time))
                if sess is not None:
                    o.append(timed(lambda: sess.run(None, {in_name: x}), a.min_time))
            wm, pm = statistics.median(w), statistics.median(p)
            om = statistics.median(o) if o else None
            print(f"| {os.path.basename(path)} | {batch} | {wm:.4f} | {pm:.4f} | "
                  f"{f'{om:.4f}' if om else 'n/a'} | {pm / wm:.2f}x | {f'{om / wm:.2f}x' if om else 'n/a'} |",
                  flush=True)


if __name__ == "__main__":
    main()
