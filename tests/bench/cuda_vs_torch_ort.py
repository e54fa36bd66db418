#!/usr/bin/env python3
"""GPU inference side by side on one machine: run-model --device cuda vs PyTorch eager vs ONNX
Runtime's CUDA provider, the same ONNX models, batch 1/64/1024, float32.

Every runner does what a service does per request: host input up, the model, host output down, and
waits for it. Whittle: run-model --bench (--warmup 10, timed runs for --min-time seconds, median
latency). PyTorch eager: the ONNX graph interpreted op by op with torch / torch.nn.functional on
the GPU (tests/tools/torch_train_step_reference.py's interpreter in float32; weights uploaded once;
the exporter's shape arithmetic stays on the host, as in exported PyTorch code),
torch.inference_mode(). ONNX Runtime: InferenceSession with
CUDAExecutionProvider only (the row says n/a when that provider is missing or falls back). Rounds
alternate the runners; each figure is the median over rounds of each round's median latency.

  python3 tests/bench/cuda_vs_torch_ort.py models/{mlp,cnn,transformer,resnet}.onnx \\
      --bin build/bin --batch 1,64,1024 --rounds 3
(scripts/cuda-device-check.sh step 8 runs it on the GPU machine.)
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from torch_train_step_reference import const, run  # noqa: E402


class TorchModel:
    """An ONNX graph run op by op in PyTorch eager mode (tests/tools/torch_train_step_reference.py's
    interpreter), float32, on `device`."""

    def __init__(self, path, device):
        import torch
        self.torch, self.device = torch, device
        self.model = onnx.load(path)
        self.params = {t.name: const(t, torch.float32, device) for t in self.model.graph.initializer}

    def __call__(self, x):
        return run(self.model, x, self.params, self.torch.float32, self.device)


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
        if hasattr(onnxruntime, "preload_dlls"):
            # cuDNN, cuBLAS and the CUDA runtime from the nvidia-* wheels beside torch (ORT >= 1.21).
            onnxruntime.preload_dlls()
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
            sess = ort.InferenceSession(path, providers=[("CUDAExecutionProvider", {"use_tf32": 0})])
            if sess.get_providers()[0] != "CUDAExecutionProvider":
                print(f"{os.path.basename(path)}: ONNX Runtime fell back to {sess.get_providers()} (see its warning above)")
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
                if not np.allclose(got, want, atol=1e-3, rtol=1e-3):
                    print(f"{os.path.basename(path)} batch {batch}: ORT and PyTorch differ by up to "
                          f"{float(np.max(np.abs(got - want))):.2e}")
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
