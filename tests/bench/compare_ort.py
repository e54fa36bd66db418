#!/usr/bin/env python3
"""Side-by-side FP32 throughput of Whittle's runtime (run-model --bench --json) and ONNX Runtime
on the same model, batch sizes and thread counts. Runs alternate (ORT, Whittle, ORT, ...) for
--rounds rounds and reports the median of each; ratio = Whittle throughput / ORT throughput, and
the range of the per-round ratios (how far one comparison alone could have been off).

  pip install onnxruntime numpy
  python3 tests/bench/compare_ort.py models/mlp.onnx models/cnn.onnx --batch 1,64 --threads 1,2

The first line names the CPU (lscpu's model name) and the widest vector ISA it has, and the
WHITTLE_ISA / ONEDNN_MAX_CPU_ISA caps in effect: a ratio says nothing without them.

--avx2-only holds both runtimes to AVX2 + FMA on an AVX-512 CPU: the script builds
tests/bench/avx2_cpuid.c (an LD_PRELOAD shim that makes CPUID report no AVX-512, AMX or
AVX-VNNI; it needs the CPU's `cpuid_fault` flag) and re-runs itself under it with
ONEDNN_MAX_CPU_ISA=AVX2 and WHITTLE_ISA=avx2, so ONNX Runtime's MLAS, oneDNN and Whittle all
take their AVX2 kernels. Code compiled for a newer -march (WHITTLE_NATIVE builds) still runs
as compiled: build with -DWHITTLE_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=haswell for a strict
comparison.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort


NP_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
            "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def make_feeds(path, batch, shapes):
    """One array per model input, [batch, ...]: see the module doc."""
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for inp in sess.get_inputs():
        dims = [batch]
        for k, d in enumerate(inp.shape[1:], start=1):
            if isinstance(d, int):
                dims.append(d)
            elif inp.name in shapes:
                dims.append(shapes[inp.name][k])
            else:
                sys.exit(f"{path}: input '{inp.name}' {inp.shape} has a free dim {k}; "
                         f"give --input-shape {inp.name}=D0,D1,...")
        dtype = NP_TYPES.get(inp.type)
        if dtype is None:
            sys.exit(f"{path}: input '{inp.name}' has type {inp.type}, which this script cannot make")
        if dtype in (np.float32, np.float64):
            feeds[inp.name] = rng.random(dims).astype(dtype)
        else:
            feeds[inp.name] = (np.ones if "mask" in inp.name.lower() else np.zeros)(dims, dtype)
    return feeds


def ort_latency_ms(path, feeds, threads, seconds, warmup):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        sess.run(None, feeds)
    lat = []
    start = time.perf_counter()
    while len(lat) < 20 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        sess.run(None, feeds)
        lat.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(lat)


def whittle_latency_ms(run_model, path, feeds, batch, threads, seconds, warmup, data_dir):
    args = []
    for name, x in feeds.items():
        f = os.path.join(data_dir, f"input{len(args) // 2}.npy")
        np.save(f, x)
        args += ["--input", f"{name}={f}"]
    out = subprocess.run([run_model, path, "--bench", "--batch", str(batch), "--threads", str(threads),
                          "--min-time", str(seconds), "--warmup", str(warmup), "--json"] + args,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["bench"][0]["p50_ms"]


def cpu_line():
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    if "avx512_vnni" in flags:
        isa += " + VNNI"
    if os.environ.get("WHITTLE_AVX2_ONLY") == "1":
        isa += ", held to AVX2 + FMA (CPUID masked by tests/bench/avx2_cpuid.c for both runtimes)"
    caps = ", ".join(f"{k}={os.environ[k]}" for k in ("WHITTLE_ISA", "ONEDNN_MAX_CPU_ISA", "WHITTLE_CONV")
                     if k in os.environ) or "no caps"
    return f"CPU: {model} ({os.cpu_count()} logical), {isa}; Whittle: {caps}"


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def reexec_avx2_only():
    """Re-runs this script with CPUID masked to AVX2 (see the module doc); returns only if it is."""
    if os.environ.get("WHITTLE_AVX2_ONLY") == "1":
        return
    if "cpuid_fault" not in open("/proc/cpuinfo").read():
        sys.exit("--avx2-only: this CPU or kernel has no CPUID faulting (no cpuid_fault in /proc/cpuinfo)")
    out_dir = os.path.join(REPO, "build")
    os.makedirs(out_dir, exist_ok=True)
    shim = os.path.join(out_dir, "avx2_cpuid.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim, os.path.join(REPO, "tests/bench/avx2_cpuid.c")],
                   check=True)
    env = dict(os.environ, LD_PRELOAD=shim, AVX2_CPUID_QUIET="1", WHITTLE_AVX2_ONLY="1",
               ONEDNN_MAX_CPU_ISA="AVX2", WHITTLE_ISA="avx2")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", default="1,64")
    ap.add_argument("--threads", default="2", help="comma-separated thread counts")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--run-model", default="build/bin/run-model")
    ap.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                    help="dims of an input with free non-batch dims (dim 0 is the batch); repeatable")
    ap.add_argument("--avx2-only", action="store_true",
                    help="hold ONNX Runtime, oneDNN and Whittle to AVX2 + FMA (CPUID masked; see above)")
    args = ap.parse_args()
    if args.avx2_only:
        reexec_avx2_only()
    shapes = {}
    for spec in args.input_shape:
        name, _, dims = spec.partition("=")
        try:
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            sys.exit(f"--input-shape expects NAME=D0,D1,..., got '{spec}'")
    data_dir = tempfile.mkdtemp(prefix="compare_ort_")
    print(cpu_line())
    print(f"onnxruntime {ort.__version__}, medians of {args.rounds} alternating rounds")
    print(f"{'model':<24} {'threads':>7} {'batch':>6} {'ORT samples/s':>15} {'Whittle samples/s':>18} {'ratio':>7}"
          f"  {'ratio range':>11}")
    for m in args.models:
        for t in [int(x) for x in args.threads.split(",")]:
            for b in [int(x) for x in args.batch.split(",")]:
                o, w = [], []
                feeds = make_feeds(m, b, shapes)
                for _ in range(args.rounds):
                    o.append(ort_latency_ms(m, feeds, t, args.seconds, args.warmup))
                    w.append(whittle_latency_ms(args.run_model, m, feeds, b, t, args.seconds, args.warmup, data_dir))
                ot = b * 1e3 / statistics.median(o)
                wt = b * 1e3 / statistics.median(w)
                # Per-round ratios (each Whittle run against the ORT run just before it): their
                # spread is the noise a single comparison would have had.
                per_round = sorted(oi / wi for oi, wi in zip(o, w))
                print(f"{m:<24} {t:>7} {b:>6} {ot:>15.1f} {wt:>18.1f} {wt / ot:>7.2f}"
                      f"  {per_round[0]:>5.2f}-{per_round[-1]:<5.2f}", flush=True)
    shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
