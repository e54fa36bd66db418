#!/usr/bin/env python3
"""whittle.Session.run with its input read in place against the same values copied (docs/python.md).

The same array values at their own (aligned) address, which the module reads in place, and at an
odd address (np.frombuffer(..., offset=1)), which it copies; the two alternated, medians printed.
Run from the repository root with the module importable (pip install ., or PYTHONPATH=build/python
with GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4096 for the build tree's module):
  python3 tests/bench/python_input_copy.py
"""
import statistics
import time

import numpy as np

import whittle

for model, n in [("mlp", 1), ("mlp", 4096), ("cnn", 1), ("cnn", 256)]:
    s = whittle.Session(f"models/{model}.onnx")
    x = np.random.default_rng(0).random((n, 1, 28, 28), dtype=np.float32)
    odd = np.frombuffer(bytearray(x.nbytes + 1), dtype=np.float32, count=x.size, offset=1).reshape(x.shape)
    odd[...] = x
    times = {"in place": [], "copied": []}
    for _ in range(200 if n < 1000 else 40):
        for kind, a in (("in place", x), ("copied", odd)):
            t0 = time.perf_counter()
            s.run(a)
            times[kind].append(time.perf_counter() - t0)
    a, b = statistics.median(times["in place"]), statistics.median(times["copied"])
    print(f"{model} batch {n} ({x.nbytes / 1e6:.2f} MB): in place {a * 1e6:.1f} us, copied {b * 1e6:.1f} us, "
          f"copied / in place {b / a:.3f}; input_bytes (in place, copied) {s.input_bytes}")
