#!/usr/bin/env python3
"""Issue 41's must-hold refusals, measured: each hostile input is refused by the release CLI with
exit code 1 and a one-line error, in under a second and under 200 MB peak RSS (the child's own
rusage, from os.wait4), under the CLIs' default memory budget (80 % of physical memory).

    python3 tests/tools/hostile_limits.py BUILD/bin [--keep DIR]

The inputs are written here with the standard library only (protobuf bytes by hand):
  activation_2e31   ConstantOfShape [2^31, 4] float -> ReduceSum: a 32 GiB activation
  input_dim_2e31    the mutation 28 -> 2^31 of an image input [N, 1, 2^31, 28], run with --bench
  init_dims_2e40    an initializer declaring [2^20, 2^20] floats over 16 bytes of data
  npz_shape_bytes   an npz whose x.npy declares [100000, 100000] float32 over 64 bytes (--eval-data)
  nested_if_10000   an If nested 10,000 deep (each then_branch holds the next If), 1.2 MB
Prints one row per case and exits non-zero when any case is not refused within the limits.
"""
import io
import os
import subprocess
import sys
import tempfile
import time
import zipfile

MAX_SECONDS = 1.0
MAX_RSS_MB = 200


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field_bytes(num, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def field_int(num, v):
    return varint(num << 3) + varint(v & 0xFFFFFFFFFFFFFFFF)


def value_info(name, elem, dims=None):
    shape = b""
    if dims is not None:
        for d in dims:
            shape += field_bytes(1, field_int(1, d) if isinstance(d, int) else field_bytes(2, d))
        shape = field_bytes(2, shape)
    return field_bytes(1, name) + field_bytes(2, field_bytes(1, field_int(1, elem) + shape))


def tensor(name, elem, dims, raw):
    t = b"".join(field_int(1, d) for d in dims) + field_int(2, elem) + field_bytes(8, name)
    return t + field_bytes(9, raw)


def node(op, inputs, outputs, name, attrs=b""):
    n = b"".join(field_bytes(1, i) for i in inputs) + b"".join(field_bytes(2, o) for o in outputs)
    return n + field_bytes(3, name) + field_bytes(4, op) + attrs


def model(graph, opset=17):
    return field_int(1, 8) + field_bytes(8, field_bytes(1, "") + field_int(2, opset)) + field_bytes(7, graph)


def activation_2e31():
    shape = tensor("shape", 7, [2], (2**31).to_bytes(8, "little") + (4).to_bytes(8, "little"))
    keep = field_bytes(5, field_bytes(1, "keepdims") + field_int(20, 2) + field_int(3, 0))
    g = (field_bytes(1, node("ConstantOfShape", ["shape"], ["big"], "fill"))
         + field_bytes(1, node("ReduceSum", ["big"], ["s"], "sum", keep))
         + field_bytes(1, node("Add", ["x", "s"], ["y"], "add"))
         + field_bytes(2, "g") + field_bytes(5, shape)
         + field_bytes(11, value_info("x", 1, [1])) + field_bytes(12, value_info("y", 1, [1])))
    return model(g)


def input_dim_2e31():
    g = (field_bytes(1, node("Relu", ["image"], ["y"], "relu")) + field_bytes(2, "g")
         + field_bytes(11, value_info("image", 1, ["batch", 1, 2**31, 28]))
         + field_bytes(12, value_info("y", 1, ["batch", 1, 2**31, 28])))
    return model(g)


def init_dims_2e40():
    huge = tensor("huge", 1, [2**20, 2**20], bytes(16))
    g = (field_bytes(1, node("Add", ["x", "huge"], ["y"], "add")) + field_bytes(2, "g") + field_bytes(5, huge)
         + field_bytes(11, value_info("x", 1, [1])) + field_bytes(12, value_info("y", 1)))
    return model(g)


def nested_if(depth):
    leaf = field_bytes(2, "leaf") + field_bytes(12, value_info("y", 1))
    g = leaf
    for i in range(depth):
        then_attr = field_bytes(1, "then_branch") + field_int(20, 5) + field_bytes(6, g)
        else_attr = field_bytes(1, "else_branch") + field_int(20, 5) + field_bytes(6, leaf)
        n = node("If", ["cond"], ["y"], f"if{i}", field_bytes(5, then_attr) + field_bytes(5, else_attr))
        g = (field_bytes(1, n) + field_bytes(2, f"g{i}") + field_bytes(11, value_info("cond", 9))
             + field_bytes(12, value_info("y", 1)))
    return model(g)


def npz_shape_exceeds_bytes():
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + bytes(64)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("x.npy", npy)
    return buf.getvalue()


def run(cmd):
    """Runs cmd; returns (exit code, stderr+stdout text, seconds, peak RSS in MB of that child)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, out.decode(errors="replace"), time.monotonic() - t0, usage.ru_maxrss / 1024.0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    bindir = sys.argv[1]
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    work = keep or tempfile.mkdtemp(prefix="whittle_hostile_")
    os.makedirs(work, exist_ok=True)
    mlp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "mlp.onnx")
    files = {
        "activation_2e31.onnx": activation_2e31(),
        "input_dim_2e31.onnx": input_dim_2e31(),
        "init_dims_2e40.onnx": init_dims_2e40(),
        "npz_shape_bytes.npz": npz_shape_exceeds_bytes(),
        "nested_if_10000.onnx": nested_if(10000),
    }
    for name, data in files.items():
        with open(os.path.join(work, name), "wb") as f:
            f.write(data)
    rm = os.path.join(bindir, "run-model")
    p = lambda n: os.path.join(work, n)  # noqa: E731
    cases = [
        ("activation 2^31 x 4", [rm, p("activation_2e31.onnx"), "--bench", "--batch", "1"], "memory budget"),
        ("input dim 2^31", [rm, p("input_dim_2e31.onnx"), "--bench", "--batch", "1"], "memory budget"),
        ("initializer dims 2^40", [rm, p("init_dims_2e40.onnx"), "--bench"], "huge"),
        ("npz shape > bytes", [rm, mlp, "--eval-data", "npz:" + p("npz_shape_bytes.npz")], "x.npy"),
        ("nested If 10,000 deep", [rm, p("nested_if_10000.onnx"), "--bench"], "subgraphs nest more than"),
    ]
    failed = 0
    print(f"{'case':24} {'exit':>4} {'seconds':>8} {'RSS MB':>7}  error")
    for label, cmd, want in cases:
        code, out, secs, rss = run(cmd)
        lines = out.strip("\n").split("\n")
        ok = code == 1 and len(lines) == 1 and want in out and secs < MAX_SECONDS and rss < MAX_RSS_MB
        failed += not ok
        print(f"{label:24} {code:>4} {secs:>8.3f} {rss:>7.1f}  {'ok' if ok else 'FAIL'}: {lines[0][:150]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
