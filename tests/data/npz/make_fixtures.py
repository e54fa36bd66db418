#!/usr/bin/env python3
"""Writes the .npz fixtures for tests/lib/data/npz_test.cc with real NumPy.

Run from anywhere: python3 tests/data/npz/make_fixtures.py
The values are fixed so the test can recompute them:
  ids  = arange(15, dtype=int64).reshape(3, 5)
  mask = (arange(15, dtype=int64) % 2).reshape(3, 5)
  x    = (arange(6, dtype=float32) * 0.5 - 1).reshape(3, 2)
np.savez stores the members, np.savez_compressed deflates them. Both open every member with
zipfile's force_zip64=True, which puts ZIP64 extra fields in the local headers only (the central
directory stays 32-bit for small archives), and zipfile stamps each member 1980-01-01, so reruns
write identical bytes.
zeros_bomb.npz is a real decompression bomb: one deflated member, x = zeros((4096, 4096), float32),
64 MiB from about 65 kB (deflate's ratio on zeros is about 1000:1), for the memory-budget test.
"""
import os
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def arrays():
    return {
        "ids": np.arange(15, dtype=np.int64).reshape(3, 5),
        "mask": (np.arange(15, dtype=np.int64) % 2).reshape(3, 5),
        "x": (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(3, 2),
    }


def main():
    np.savez(os.path.join(HERE, "savez.npz"), **arrays())
    np.savez_compressed(os.path.join(HERE, "savez_compressed.npz"), **arrays())
    np.savez_compressed(os.path.join(HERE, "zeros_bomb.npz"), x=np.zeros((4096, 4096), dtype=np.float32))
    for name in ("savez.npz", "savez_compressed.npz", "zeros_bomb.npz"):
        path = os.path.join(HERE, name)
        with zipfile.ZipFile(path) as z:
            members = [(i.filename, i.compress_type) for i in z.infolist()]
        print(f"{name}: {os.path.getsize(path)} bytes, members (name, method): {members}")


if __name__ == "__main__":
    main()
