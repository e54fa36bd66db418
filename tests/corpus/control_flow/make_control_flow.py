#!/usr/bin/env python3
"""Control-flow corpus: real exporter-written ONNX models with If / Loop / Scan, and ONNX Runtime's
outputs for a few input sets (<name>_ref.npz next to each <name>.onnx).

  * silero_vad.onnx, silero_vad_16k_op15.onnx: copied unchanged from the PyPI wheel silero-vad 6.2.3
    (MIT); taken from the installed `silero_vad` package when missing here, checked by sha256.
  * the other models are re-created here, seeded, with torch.onnx.export: the TorchScript exporter
    (dynamo=False) on torch.jit.script-ed modules, and the dynamo exporter on torch.cond /
    torch.ops.higher_order.scan / while_loop.

Needs torch, onnx, onnxruntime, numpy, onnxscript (for the dynamo exporter), and silero-vad only if the
silero files are missing:
    python make_control_flow.py [OUT_DIR]          # default: this file's folder
    python make_control_flow.py --describe [FILES]  # print the control-flow tree of models

npz keys: in<k>_<input name>, out<k>_<output name> for input set k = 0, 1, ...
"""
import hashlib
import os
import shutil
import sys
from typing import List

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))

SILERO = {  # file in the silero-vad 6.2.3 wheel (silero_vad/data/) -> sha256
    "silero_vad.onnx": "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
    "silero_vad_16k_op15.onnx": "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49",
}


# ----------------------------------------------------------------------------- models (TorchScript)
class GruCell(nn.Module):
    """GRU cell written out (no aten::gru_cell), so the Loop body holds Gemm/MatMul, Split, Sigmoid, Tanh."""

    def __init__(self, i: int, h: int):
        super().__init__()
        self.ih = nn.Linear(i, 3 * h)
        self.hh = nn.Linear(h, 3 * h)

    def forward(self, x, h):
        gi = self.ih(x)
        gh = self.hh(h)
        ir, iz, inn = gi.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r = torch.sigmoid(ir + hr)
        z = torch.sigmoid(iz + hz)
        n = torch.tanh(inn + r * hn)
        return (1 - z) * n + z * h


class GruLoop(nn.Module):
    """for t in range(x.size(0)): carried h, per-step output collected in a list and stacked."""

    def __init__(self):
        super().__init__()
        self.cell = GruCell(8, 32)
        self.scale = nn.Parameter(torch.randn(32))

    def forward(self, x, h0):
        h = h0
        outs: List[torch.Tensor] = []
        for t in range(x.size(0)):
            h = self.cell(x[t], h)
            outs.append(h * self.scale)
        return torch.stack(outs), h


class GreedyDecode(nn.Module):
    """Greedy decoding: Loop with a data-dependent break (eos = token 0), an If inside the body."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 16)
        self.cell = GruCell(16, 32)
        self.out = nn.Linear(32, 8)

    def forward(self, h0, max_len):
        h = h0
        tok = torch.ones(1, dtype=torch.long)
        toks: List[torch.Tensor] = []
        for i in range(int(max_len)):
            h = self.cell(self.emb(tok), h)
            if h.sum() > 0:
                h = h * 0.5
            else:
                h = torch.relu(h) + h.abs().mean()
            tok = self.out(h).argmax(-1)
            toks.append(tok)
            if bool(tok[0] == 0):
                break
        return torch.cat(toks), h


def greedy_margins(m: GreedyDecode, h0, max_len: int):
    """Eager replay of GreedyDecode.forward: (length, smallest |h.sum()|, smallest top-1/top-2 logit gap)."""
    with torch.no_grad():
        h, tok, n, ms, mg = h0, torch.ones(1, dtype=torch.long), 0, 1e9, 1e9
        for _ in range(max_len):
            h = m.cell(m.emb(tok), h)
            ms = min(ms, abs(float(h.sum())))
            h = h * 0.5 if h.sum() > 0 else torch.relu(h) + h.abs().mean()
            logits = m.out(h)[0]
            top = torch.topk(logits, 2).values
            mg = min(mg, float(top[0] - top[1]))
            tok = logits.argmax(-1, keepdim=True)
            n += 1
            if int(tok[0]) == 0:
                break
        return n, ms, mg


class BranchyIf(nn.Module):
    """if x.sum() > 0: (Linear, Relu, nested if y.mean() > 0.3: *2 else sigmoid - x.mean()) else tanh(Linear)*scale."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(16, 32)
        self.scale = nn.Parameter(torch.rand(32) + 0.5)

    def forward(self, x):
        if x.sum() > 0:
            y = torch.relu(self.a(x))
            if y.mean() > 0.3:
                y = y * 2.0
            else:
                y = torch.sigmoid(y) - x.mean()
        else:
            y = torch.tanh(self.b(x)) * self.scale
        return y


# ----------------------------------------------------------------------------- models (dynamo)
class ScanRnn(nn.Module):
    """torch.ops.higher_order.scan over dim 0: carry h, scan output 2*h."""

    def __init__(self):
        super().__init__()
        self.wx = nn.Linear(8, 16)
        self.wh = nn.Linear(16, 16, bias=False)

    def forward(self, x, h0):
        from torch._higher_order_ops.scan import scan

        def step(h, xt):
            hn = torch.tanh(self.wx(xt) + self.wh(h))
            return hn, hn * 2.0

        h_final, ys = scan(step, h0, x)
        return h_final, ys


class CondNested(nn.Module):
    """torch.cond(x.sum() > 0, then: Linear + torch.cond(y.mean() > 0, relu*2, sigmoid), else: tanh(Linear))."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        def inner_t(y):
            return torch.relu(y) * 2.0

        def inner_f(y):
            return torch.sigmoid(y)

        def tf(x):
            y = self.a(x)
            return torch.cond(y.mean() > 0.0, inner_t, inner_f, (y,))

        def ff(x):
            return torch.tanh(self.b(x))

        return torch.cond(x.sum() > 0, tf, ff, (x,))


class WhileLoop(nn.Module):
    """while_loop(i < n and max|h| < 10): i += 1, h = tanh(Linear(h))*1.5 + h."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(16, 16)

    def forward(self, x, n):
        from torch._higher_order_ops.while_loop import while_loop

        def cond_fn(i, h):
            return (i < n) & (h.abs().max() < 10.0)

        def body_fn(i, h):
            return i + 1, torch.tanh(self.l(h)) * 1.5 + h

        i0 = torch.zeros((), dtype=torch.int64)
        i, h = while_loop(cond_fn, body_fn, (i0, x))
        return i, h


# ----------------------------------------------------------------------------- models (TorchScript, sequences)
# Exports that keep real sequence values at run time (SplitToSequence, SequenceAt, SequenceLength,
# SequenceInsert under an If, a sequence graph output), not only TorchScript's list-append-then-concat
# Loop (which Whittle reads as a scan output). Kept after the dynamo models: the dynamo files' metadata
# holds this file's line numbers.
class ChunkPool(nn.Module):
    """Frames [T, 8] in windows of 5 (torch.split -> SplitToSequence, ceil(T/5) chunks): a recurrent
    summary per window read with chunks[i] (SequenceAt in the Loop body), len(chunks) (SequenceLength),
    and a head on the last window chunks[-1] (SequenceAt -1)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 16)
        self.head = nn.Linear(16, 16)

    def forward(self, x):
        chunks = torch.split(x, 5, 0)
        n = len(chunks)
        h = torch.zeros(16)
        pooled: List[torch.Tensor] = []
        for i in range(n):
            h = torch.tanh(self.lin(chunks[i]).mean(0) + 0.5 * h)
            pooled.append(h)
        last = self.head(torch.relu(self.lin(chunks[-1])))
        return torch.stack(pooled), last, torch.tensor(n)


class CondKeep(nn.Module):
    """Rows of x [T, 8] (torch.split(x, 1) -> SplitToSequence), tanh(Linear) of each kept only if its
    sum is > 0: an If in the Loop body whose then-branch is SequenceInsert and else-branch passes the
    sequence on; returns torch.cat(kept) and kept[0] (SequenceAt on the Loop's sequence)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 16)

    def forward(self, x):
        kept: List[torch.Tensor] = []
        for row in torch.split(x, 1, 0):
            f = torch.tanh(self.lin(row))
            if f.sum() > 0:
                kept.append(f)
        return torch.cat(kept, 0), kept[0]


class SplitHeads(nn.Module):
    """relu(Linear(x)) split into 3 chunks of ceil(T/3) rows (split size computed from Shape), a head per
    chunk returned as a list of tensors (a sequence graph output) and the chunk means stacked."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        y = torch.relu(self.lin(x))
        parts = torch.split(y, (x.size(0) + 2) // 3, 0)
        outs: List[torch.Tensor] = []
        means: List[torch.Tensor] = []
        for p in parts:
            outs.append(self.head(p))
            means.append(p.mean(0))
        return outs, torch.stack(means)


# ----------------------------------------------------------------------------- export
def ts_export(module, args, path, opset, inames, onames, dyn):
    torch.onnx.export(torch.jit.script(module), args, path, dynamo=False, opset_version=opset,
                      input_names=inames, output_names=onames, dynamic_axes=dyn)


def dynamo_export(module, args, path, inames, onames, dyn):
    prog = torch.onnx.export(module, args, dynamo=True, opset_version=18, input_names=inames,
                             output_names=onames, dynamic_shapes=dyn, verbose=False)
    prog.save(path)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def get_silero(out):
    for name, digest in SILERO.items():
        dst = os.path.join(out, name)
        if not os.path.exists(dst):
            from importlib import resources
            src = resources.files("silero_vad.data").joinpath(name)
            with resources.as_file(src) as p:
                shutil.copyfile(p, dst)
        got = sha256(dst)
        if got != digest:
            raise SystemExit(f"{dst}: sha256 {got}, expected {digest} (silero-vad 6.2.3)")


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def write_ref(out, name, feeds_list, chain=None):
    """Runs ORT on each feed dict; chain(k, prev_outputs, feeds) may rewrite feeds from the previous call.
    A sequence output's elements are stored in order as out<k>_<output name>.<i>, i = 0, 1, ..."""
    path = os.path.join(out, name + ".onnx")
    s = session(path)
    onames = [o.name for o in s.get_outputs()]
    data, prev = {}, None
    for k, feeds in enumerate(feeds_list):
        if chain is not None:
            feeds = chain(k, prev, feeds)
        res = s.run(None, feeds)
        prev = dict(zip(onames, res))
        for n, v in feeds.items():
            data[f"in{k}_{n}"] = v
        for n, v in prev.items():
            if isinstance(v, list):  # a sequence output: its elements in order
                for i, e in enumerate(v):
                    data[f"out{k}_{n}.{i}"] = e
            else:
                data[f"out{k}_{n}"] = v
    np.savez(os.path.join(out, name + "_ref.npz"), **data)
    return data


def silero_refs(out, name, with_8k):
    rng = np.random.default_rng(1234)
    feeds = []
    for _ in range(5):
        feeds.append({"chunk": rng.uniform(-1, 1, (1, 512)).astype(np.float32)})
    ctx = {"c": np.zeros((1, 64), np.float32)}

    def chain(k, prev, f):
        if k >= 5:  # the 8 kHz call: OnnxWrapper resets state and context when sr changes
            return f
        x = np.concatenate([ctx["c"], f["chunk"]], axis=1)  # 64 context samples + 512 new ones = 576
        ctx["c"] = x[:, -64:].copy()
        state = np.zeros((2, 1, 128), np.float32) if prev is None else prev["stateN"]
        return {"input": x, "state": state, "sr": np.array(16000, np.int64)}

    if with_8k:
        x8 = np.concatenate([np.zeros((1, 32), np.float32),
                             rng.uniform(-1, 1, (1, 256)).astype(np.float32)], axis=1)  # 32 + 256 = 288
        feeds.append({"input": x8, "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(8000, np.int64)})
    write_ref(out, name, feeds, chain)


def main(out):
    os.makedirs(out, exist_ok=True)
    p = lambda n: os.path.join(out, n + ".onnx")

    # --- silero (copied) -----------------------------------------------------------------------
    get_silero(out)
    silero_refs(out, "silero_vad", with_8k=True)
    silero_refs(out, "silero_vad_16k_op15", with_8k=False)

    # --- GRU loop, TorchScript, opset 17 (sequence-carried list) and opset 12 (scan output) --------
    torch.manual_seed(0)
    gru = GruLoop().eval()
    for opset in (17, 12):
        ts_export(gru, (torch.randn(5, 2, 8), torch.zeros(2, 32)), p(f"gru_loop_op{opset}"), opset,
                  ["x", "h0"], ["ys", "h_final"],
                  {"x": {0: "T", 1: "B"}, "h0": {0: "B"}, "ys": {0: "T", 1: "B"}, "h_final": {0: "B"}})
    rng = np.random.default_rng(1)
    gru_feeds = [{"x": rng.standard_normal((t, b, 8)).astype(np.float32),
                  "h0": (0.5 * rng.standard_normal((b, 32))).astype(np.float32)} for t, b in [(1, 1), (5, 2), (9, 3)]]
    for opset in (17, 12):
        write_ref(out, f"gru_loop_op{opset}", gru_feeds)

    # --- greedy decoding: Loop with break + If in the body ------------------------------------------
    torch.manual_seed(0)
    dec = GreedyDecode().eval()
    with torch.no_grad():
        dec.out.bias[0] += 0.25  # makes eos reachable: some inputs stop early, some run to max_len
    ts_export(dec, (torch.randn(1, 32), torch.tensor(12)), p("greedy_decode_op17"), 17,
              ["h0", "max_len"], ["tokens", "h_final"], {"tokens": {0: "n"}})
    feeds, lens = [], []
    for seed in range(100, 200):  # keep inputs whose branch conditions and argmaxes are far from ties
        torch.manual_seed(seed)
        h0 = torch.randn(1, 32) * 2
        max_len = [12, 12, 5, 12][len(feeds) % 4]
        n, ms, mg = greedy_margins(dec, h0, max_len)
        if ms > 1e-2 and mg > 1e-2 and (n not in lens or len(feeds) == 3):
            feeds.append({"h0": h0.numpy(), "max_len": np.array(max_len, np.int64)})
            lens.append(n)
        if len(feeds) == 4:
            break
    write_ref(out, "greedy_decode_op17", feeds)

    # --- If with a nested If --------------------------------------------------------------------------
    torch.manual_seed(0)
    br = BranchyIf().eval()
    ts_export(br, (torch.randn(2, 16),), p("branchy_if_op17"), 17, ["x"], ["y"], {"x": {0: "B"}, "y": {0: "B"}})
    rng = np.random.default_rng(2)
    feeds, paths = [], set()
    with torch.no_grad():
        for _ in range(200):  # one input per path: (outer then, inner then), (then, else), (else)
            b = int(rng.integers(1, 4))
            x = (rng.standard_normal((b, 16)) + rng.uniform(-1, 1)).astype(np.float32)
            s = float(x.sum())
            ym = float(torch.relu(br.a(torch.from_numpy(x))).mean())
            path = (s > 0, s > 0 and ym > 0.3)
            if abs(s) > 0.1 and abs(ym - 0.3) > 1e-2 and path not in paths:
                paths.add(path)
                feeds.append({"x": x})
            if len(paths) == 3:
                break
    write_ref(out, "branchy_if_op17", feeds)

    # --- dynamo: Scan, nested If, Loop without trip count --------------------------------------------
    B = torch.export.Dim("B", min=1, max=64)
    T = torch.export.Dim("T", min=1, max=256)
    torch.manual_seed(0)
    dynamo_export(ScanRnn().eval(), (torch.randn(5, 2, 8), torch.zeros(2, 16)), p("scan_rnn_op18_dynamo"),
                  ["x", "h0"], ["h_final", "ys"], {"x": {0: T, 1: B}, "h0": {0: B}})
    rng = np.random.default_rng(3)
    write_ref(out, "scan_rnn_op18_dynamo",
              [{"x": rng.standard_normal((t, b, 8)).astype(np.float32),
                "h0": (0.5 * rng.standard_normal((b, 16))).astype(np.float32)} for t, b in [(1, 1), (4, 2), (7, 3)]])

    torch.manual_seed(0)
    cn = CondNested().eval()
    dynamo_export(cn, (torch.randn(3, 16),), p("cond_nested_op18_dynamo"), ["x"], ["y"], {"x": {0: B}})
    rng = np.random.default_rng(4)
    feeds, paths = [], set()
    with torch.no_grad():
        for _ in range(200):
            b = int(rng.integers(1, 4))
            x = (rng.standard_normal((b, 16)) + rng.uniform(-1, 1)).astype(np.float32)
            s = float(x.sum())
            ym = float(cn.a(torch.from_numpy(x)).mean())
            path = (s > 0, s > 0 and ym > 0)
            if abs(s) > 0.1 and abs(ym) > 1e-2 and path not in paths:
                paths.add(path)
                feeds.append({"x": x})
            if len(paths) == 3:
                break
    write_ref(out, "cond_nested_op18_dynamo", feeds)

    torch.manual_seed(0)
    wl = WhileLoop().eval()
    dynamo_export(wl, (torch.randn(3, 16), torch.tensor(5)), p("while_loop_op18_dynamo"), ["x", "n"],
                  ["iters", "h"], {"x": {0: B}, "n": None})
    rng = np.random.default_rng(5)
    write_ref(out, "while_loop_op18_dynamo",
              [{"x": rng.standard_normal((b, 16)).astype(np.float32), "n": np.array(n, np.int64)}
               for b, n in [(1, 3), (2, 50), (3, 0), (2, 8)]])

    # --- real sequence values (TorchScript): SplitToSequence / SequenceAt / SequenceLength, a list
    # appended under an If, a list returned as a sequence output ----------------------------------------
    torch.manual_seed(0)
    ts_export(ChunkPool().eval(), (torch.randn(7, 8),), p("chunk_pool_op17"), 17, ["x"], ["pooled", "last", "n"],
              {"x": {0: "T"}, "pooled": {0: "n"}, "last": {0: "r"}})
    rng = np.random.default_rng(6)
    write_ref(out, "chunk_pool_op17", [{"x": rng.standard_normal((t, 8)).astype(np.float32)} for t in (7, 12)])

    torch.manual_seed(0)
    ck = CondKeep().eval()
    ts_export(ck, (torch.randn(7, 8),), p("cond_keep_op18"), 18, ["x"], ["kept", "first"],
              {"x": {0: "T"}, "kept": {0: "k"}})
    rng = np.random.default_rng(7)
    feeds = []
    with torch.no_grad():
        for _ in range(200):  # every row's sum away from 0; some rows dropped, and row 0 dropped in one call
            t = [7, 12][len(feeds)]
            x = rng.standard_normal((t, 8)).astype(np.float32)
            sums = torch.tanh(ck.lin(torch.from_numpy(x))).sum(1).numpy()
            keep = sums > 0
            if np.abs(sums).min() > 1e-2 and 0 < keep.sum() < t and (len(feeds) == 0 or not keep[0]):
                feeds.append({"x": x})
            if len(feeds) == 2:
                break
    write_ref(out, "cond_keep_op18", feeds)

    torch.manual_seed(0)
    ts_export(SplitHeads().eval(), (torch.randn(7, 8),), p("split_heads_op17"), 17, ["x"], ["parts", "means"],
              {"x": {0: "T"}, "means": {0: "n"}})
    rng = np.random.default_rng(8)
    write_ref(out, "split_heads_op17", [{"x": rng.standard_normal((t, 8)).astype(np.float32)} for t in (7, 12)])

    for f in sorted(os.listdir(out)):
        if f.endswith((".onnx", ".npz")):
            print(f"{os.path.getsize(os.path.join(out, f)):>9}  {f}")


# ----------------------------------------------------------------------------- --describe
def _tstr(vi):
    t = vi.type
    k = t.WhichOneof("value")
    if k is None:
        return "untyped"
    if k == "tensor_type":
        tt = t.tensor_type
        if not tt.HasField("shape"):
            return onnx.TensorProto.DataType.Name(tt.elem_type) + "[?rank]"
        dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?") for d in tt.shape.dim]
        return onnx.TensorProto.DataType.Name(tt.elem_type) + "[" + ",".join(dims) + "]"
    if k == "sequence_type":
        return "seq(" + onnx.TensorProto.DataType.Name(t.sequence_type.elem_type.tensor_type.elem_type) + ")"
    return k


def describe(path):
    m = onnx.load(path)
    print(f"== {os.path.basename(path)}  ir {m.ir_version}  opset {[(o.domain, o.version) for o in m.opset_import]}"
          f"  producer {m.producer_name} {m.producer_version}")
    print("   in ", [(i.name, _tstr(i)) for i in m.graph.input])
    print("   out", [(o.name, _tstr(o)) for o in m.graph.output])

    def walk(g, depth, scopes, label):
        here = {i.name: "input" for i in g.input}
        here.update({i.name: "initializer" for i in g.initializer})
        for n in g.node:
            for o in n.output:
                here[o] = n.op_type
        ind = "   " + "  " * depth
        if depth:
            outer = {}
            for n in g.node:
                for i in n.input:
                    if i and i not in here and i not in outer:
                        where = next((f"{s}:{d[i]}" for s, d in reversed(scopes) if i in d), "UNRESOLVED")
                        outer[i] = where
            print(f"{ind}[{label}] {len(g.node)} nodes, {len(g.initializer)} initializers")
            print(f"{ind}  inputs  {[(i.name, _tstr(i)) for i in g.input]}")
            print(f"{ind}  outputs {[(o.name, _tstr(o)) for o in g.output]}")
            print(f"{ind}  outer-scope refs {outer}")
        for n in g.node:
            gas = [a for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
            if gas:
                attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute if a not in gas}
                print(f"{ind}{n.op_type} '{n.name}' in={list(n.input)} out={list(n.output)} {attrs}")
                for a in gas:
                    walk(a.g, depth + 1, scopes + [(label, here)], f"{n.name}.{a.name}")

    walk(m.graph, 0, [], "main")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--describe":
        files = sys.argv[2:] or sorted(os.path.join(HERE, f) for f in os.listdir(HERE) if f.endswith(".onnx"))
        for f in files:
            describe(f)
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else HERE)
