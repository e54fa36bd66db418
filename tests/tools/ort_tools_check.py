#!/usr/bin/env python3
"""The graphs ONNX Runtime's transformer optimizer wrote (tests/corpus/ort_tools: com.microsoft
Attention, SkipLayerNormalization, EmbedLayerNormalization, BiasGelu, FastGelu, Gelu, QuickGelu,
FusedMatMul, FusedGemm, BiasSplitGelu, BiasAdd, SkipSimplifiedLayerNormalization and the default
domain's SimplifiedLayerNormalization; with --also tests/corpus/ort_quant, the files ORT's quantizers
and optimizer wrote: DynamicQuantizeMatMul, MatMulIntegerToFloat, QGemm, QLinearAdd/Mul/Sigmoid/
LeakyRelu/Concat/AveragePool/GlobalAveragePool/Softmax, QAttention, QEmbedLayerNormalization,
DynamicQuantizeLSTM, and MatMulNBits from ORT's 4-bit weight quantizer) in Whittle, which reads each
contrib op as its standard-ONNX definition (lib/onnx/contrib_ops.h), MatMulNBits as its own kernel:

- run-model on the inputs stored beside each file equals the outputs ONNX Runtime 1.32 gave when it
  made them (NAME.npz, out:<name>; for geglu_unet_ort_opt, whose BiasSplitGelu/BiasAdd have no CPU
  kernel in ORT, the unfused source graph's), and ONNX Runtime here on the same inputs:
  max |a - b| <= 1e-4 * max(|b|, 1);
- compress-model --int8 mode=dynamic writes each file's model again, as standard ops only (except
  MatMulNBits, which Whittle keeps: 4-bit weights expanded to float would undo what the op is for,
  docs/design-notes.md), which ONNX Runtime loads and runs;
- with --top1-samples N, each --also (int8) file gives ORT's top-1 (last axis, every position of every
  output) on N inputs made from the stored ones;
- on a CPU where ORT's uint8 x int8 GEMM saturates (no VNNI: ort_saturation.py), a file with int8
  weights is held to ORT's stored outputs (made on a VNNI CPU) alone: where ORT here or its top-1
  disagrees, that is shown for information, marked, and not counted;
- bert_tt_ort_opt with its ai.onnx opset set to 12 (its standard ops are the same at 12) gives the
  same outputs: the expansions' forms before opset 17 (LayerNormalization written out) and 13 (axes
  as attributes, Split sizes as an attribute);
- single Attention nodes ORT's files do not hold: V wider than Q/K (qkv_hidden_sizes, the unfused
  expansion), an explicit scale, a 2-D int32 mask declared on the graph input, with and without bias;
- decoder Attention nodes (unidirectional=1, a past and the present returned, 2-D and [2B] masks)
  equal ORT's outputs and present;
- a contrib op form Whittle does not read (Attention with do_rotary=1) is refused at load with
  a one-line error naming the node and why.
Usage: ort_tools_check.py --bin DIR --corpus tests/corpus/ort_tools [--also DIR ...]
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from ort_saturation import ort_u8s8_saturates

MAX_REL = 1e-4
NO_ORT_KERNEL = {"geglu_unet_ort_opt"}  # BiasSplitGelu/BiasAdd: CUDA-only in ONNX Runtime
KEPT_CONTRIB = {"MatMulNBits"}  # compress-model writes these back as they are (a kernel, not an expansion)


def rel(a, b):
    return float(np.abs(a.astype(np.float64) - b).max() / max(float(np.abs(b).max()), 1.0))


def run_whittle(binp, path, feeds, tmp):
    cmd = [os.path.join(binp, "run-model"), path, "--output-dir", tmp]
    for k, v in feeds.items():
        f = os.path.join(tmp, "in_%d.npy" % len(cmd))
        np.save(f, v)
        cmd += ["--input", "%s=%s" % (k, f)]
    return subprocess.run(cmd, capture_output=True, text=True)


def many_samples(model, feeds, n, rng):
    """n samples built from the stored ones along each input's 'batch' dim: float inputs tiled with
    noise of a tenth of their spread, integer ones (ids) drawn from the stored values but masks
    (attention_mask, values 0/1) tiled as they are."""
    out = {}
    for i in model.graph.input:
        if i.name not in feeds:
            continue
        v = feeds[i.name]
        dims = [d.dim_param for d in i.type.tensor_type.shape.dim]
        axis = dims.index("batch") if "batch" in dims else 0
        reps = -(-n // v.shape[axis])
        t = np.take(np.concatenate([v] * reps, axis=axis), np.arange(n), axis=axis)
        if v.dtype.kind == "f":
            t = (t + rng.normal(0, 0.1 * float(v.std()) + 1e-3, t.shape)).astype(v.dtype)
        elif set(np.unique(v)) - {0, 1}:
            t = rng.choice(v.ravel(), t.shape).astype(v.dtype)
        out[i.name] = t
    return out


def top1_agreement(binp, path, feeds, tmp):
    """Whittle's and ONNX Runtime's (one thread) top-1 over the last axis at every position of every
    output: (positions, positions that differ) or an error string."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
    r = run_whittle(binp, path, feeds, tmp)
    if r.returncode != 0:
        return r.stderr.strip()
    total = differ = 0
    for name, w in want.items():
        if w.ndim < 2 or w.shape[-1] < 2:
            continue
        safe = "".join(c if c.isalnum() or c in "_-." else "_" for c in name)
        got = np.load(os.path.join(tmp, safe + ".npy"))
        if got.shape != w.shape:
            return "output %s has shape %s, ORT's %s" % (name, got.shape, w.shape)
        total += w[..., 0].size
        differ += int((got.argmax(-1) != w.argmax(-1)).sum())
    return total, differ


def has_int8_weights(path):
    """Whether the file holds an int8 initializer or Constant (weights of a uint8 x int8 GEMM)."""
    m = onnx.load(path, load_external_data=False)
    graphs, found = [m.graph], False
    while graphs and not found:
        g = graphs.pop()
        found = any(t.data_type == TensorProto.INT8 for t in g.initializer)
        for n in g.node:
            found |= n.op_type == "Constant" and any(a.t.data_type == TensorProto.INT8 for a in n.attribute if a.name == "value")
            graphs += [a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--also", nargs="*", default=[], help="more folders of the same layout (NAME.onnx + NAME.npz)")
    ap.add_argument("--top1-samples", type=int, default=0,
                    help="for the --also folders' (int8) files: Whittle's top-1 = ORT's on this many inputs")
    args = ap.parse_args()
    paths, int8_paths = [], set()
    for folder in [args.corpus] + args.also:
        found = sorted(p for p in glob.glob(os.path.join(folder, "*.onnx")) if not p.endswith(".src.onnx"))
        paths += found
        if folder != args.corpus:
            int8_paths.update(found)
    if not paths:
        sys.exit("no models in " + args.corpus)
    failures = 0
    for path in paths:
        name = os.path.basename(path)[:-5]
        data = np.load(path[:-5] + ".npz")
        feeds = {k: data[k] for k in data.files if not k.startswith("out:")}
        stored = {k[4:]: data[k] for k in data.files if k.startswith("out:")}
        live = {}
        if name not in NO_ORT_KERNEL:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            # One thread, as the stored outputs were made: ORT's DynamicQuantizeLSTM quantizes h per
            # batch chunk when it splits the batch across threads, so its result depends on the count.
            so.intra_op_num_threads = 1
            s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            live = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
        with tempfile.TemporaryDirectory() as tmp:
            r = run_whittle(args.bin, path, feeds, tmp)
            if r.returncode != 0:
                print("FAIL %-28s run-model: %s" % (name, r.stderr.strip()))
                failures += 1
                continue
            # ORT here is no reference for a file with int8 weights where its u8s8 GEMM saturates: a
            # disagreement with it is shown, not counted (the stored outputs still are).
            ort_unreliable = path in int8_paths and ort_u8s8_saturates() and has_int8_weights(path)
            unreliable_note = " (info: ORT's u8s8 GEMM saturates on this CPU, not counted)"
            for out, want in stored.items():
                safe = "".join(c if c.isalnum() or c in "_-." else "_" for c in out)
                got = np.load(os.path.join(tmp, safe + ".npy"))
                errs = [rel(got, want)] + ([rel(got, live[out])] if out in live else [])
                ok = got.shape == want.shape and errs[0] <= MAX_REL
                shown = ok and max(errs) > MAX_REL and ort_unreliable
                ok = ok and (max(errs) <= MAX_REL or ort_unreliable)
                failures += not ok
                print("%s %-28s %-18s vs stored ORT %.2e%s%s" % ("ok  " if ok else "FAIL", name, out[:18], errs[0],
                      ", vs ORT here %.2e" % errs[1] if len(errs) > 1 else " (no ORT CPU kernel: the source graph's)",
                      unreliable_note if shown else ""))
            if path in int8_paths and args.top1_samples:
                res = top1_agreement(args.bin, path, many_samples(onnx.load(path), feeds, args.top1_samples,
                                                                  np.random.default_rng(11)), tmp)
                ok = not isinstance(res, str) and res[0] > 0 and res[1] == 0
                shown = not ok and not isinstance(res, str) and res[0] > 0 and ort_unreliable
                failures += not ok and not shown
                print("%s %-28s top-1 on %d inputs: %s%s" % (
                    "ok  " if ok else "info" if shown else "FAIL", name, args.top1_samples,
                    res if isinstance(res, str) else "%d of %d positions differ from ORT's" % (res[1], res[0]),
                    unreliable_note if shown else ""))
            small = os.path.join(tmp, "int8.onnx")
            r = subprocess.run([os.path.join(args.bin, "compress-model"), path, "-o", small, "--int8", "mode=dynamic",
                                "--no-bench", "--quiet"], capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL %-28s compress-model --int8: %s" % (name, r.stderr.strip()))
                failures += 1
                continue
            m = onnx.load(small)
            contrib = sorted({n.op_type for n in m.graph.node if n.domain == "com.microsoft"} - KEPT_CONTRIB)
            kept = sorted({n.op_type for n in m.graph.node if n.domain == "com.microsoft"} & KEPT_CONTRIB)
            s = ort.InferenceSession(small, providers=["CPUExecutionProvider"])
            outs = s.run(None, feeds)
            ok = not contrib and all(o.shape == stored[k].shape for o, k in zip(outs, [o.name for o in s.get_outputs()]))
            failures += not ok
            print("%s %-28s compress-model --int8 mode=dynamic: runs in ORT%s%s" %
                  ("ok  " if ok else "FAIL", name, "" if not kept else " (keeps %s)" % ", ".join(kept),
                   "" if not contrib else ", but keeps contrib ops %s" % contrib))

    # The pre-opset-17/13 expansions on the same graph.
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(args.corpus, "bert_tt_ort_opt")
        m = onnx.load(src + ".onnx")
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = 12
        path = os.path.join(tmp, "bert_tt_op12.onnx")
        onnx.save(m, path)
        data = np.load(src + ".npz")
        r = run_whittle(args.bin, path, {k: data[k] for k in data.files if not k.startswith("out:")}, tmp)
        if r.returncode != 0:
            print("FAIL bert_tt_ort_opt at opset 12: %s" % r.stderr.strip())
            failures += 1
        else:
            err = rel(np.load(os.path.join(tmp, "last_hidden_state.npy")), data["out:last_hidden_state"])
            failures += not err <= MAX_REL
            print("%s bert_tt_ort_opt at opset 12: vs stored ORT %.2e" % ("ok  " if err <= MAX_REL else "FAIL", err))

    # Single Attention nodes: both expansions (V as wide as Q/K, which the runtime fuses; V wider).
    rng = np.random.default_rng(5)
    for sizes, scale, bias in (([16, 16, 16], None, True), ([16, 16, 32], 0.3, True), ([16, 16, 16], 0.5, False)):
        with tempfile.TemporaryDirectory() as tmp:
            width = sum(sizes)
            w = rng.normal(0, 0.3, 12 * width).astype(np.float32)
            b = rng.normal(0, 0.3, width).astype(np.float32) if bias else np.zeros(width, np.float32)

            def save(with_bias, path):
                inits = [helper.make_tensor("w", TensorProto.FLOAT, [12, width], w)]
                if with_bias:
                    inits.append(helper.make_tensor("b", TensorProto.FLOAT, [width], b))
                attrs = {"num_heads": 4, "qkv_hidden_sizes": sizes}
                if scale is not None:
                    attrs["scale"] = scale
                node = helper.make_node("Attention", ["x", "w", "b" if with_bias else "", "mask"], ["y"], name="attention",
                                        domain="com.microsoft", **attrs)
                g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 12]),
                                                    helper.make_tensor_value_info("mask", TensorProto.INT32, [2, 5])],
                                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
                onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                              helper.make_opsetid("com.microsoft", 1)], ir_version=8), path)

            path, ref_path = os.path.join(tmp, "attention.onnx"), os.path.join(tmp, "attention_ref.onnx")
            save(bias, path)
            save(True, ref_path)  # ORT 1.31 crashes on an absent bias: its reference takes a zero one
            feeds = {"x": rng.normal(0, 1, (2, 5, 12)).astype(np.float32),
                     "mask": np.array([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]], np.int32)}
            want = ort.InferenceSession(ref_path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            r = run_whittle(args.bin, path, feeds, tmp)
            label = "Attention sizes %s scale %s bias %s" % (sizes, scale, bias)
            if r.returncode != 0:
                print("FAIL %s: %s" % (label, r.stderr.strip()))
                failures += 1
                continue
            err = rel(np.load(os.path.join(tmp, "y.npy")), want)
            failures += not err <= MAX_REL
            print("%s %s: vs ORT %.2e" % ("ok  " if err <= MAX_REL else "FAIL", label, err))

    # Decoder attention: causal (unidirectional=1), a past of 3 steps and the present it returns,
    # a 2-D mask over past and new keys, a 1-D [2B] mask (end, then start positions).
    for causal, past_len, mask_kind in ((1, 0, "2d"), (1, 3, None), (1, 3, "2d"), (0, 3, "1d2b"), (1, 0, None)):
        with tempfile.TemporaryDirectory() as tmp:
            B, S, N, h = 2, 4, 2, 4
            D = N * h
            w = rng.normal(0, 0.4, (D, 3 * D)).astype(np.float32)
            b = rng.normal(0, 0.2, 3 * D).astype(np.float32)
            T = past_len + S
            feeds = {"x": rng.normal(0, 1, (B, S, D)).astype(np.float32)}
            ins = ["x", "w", "b", "", ""]
            vis = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, D])]
            if mask_kind == "2d":
                feeds["mask"] = np.array([[1] * T, [0] + [1] * (T - 1)], np.int32)
            elif mask_kind == "1d2b":
                feeds["mask"] = np.array([T, T - 1, 0, 2], np.int32)
            if mask_kind:
                ins[3] = "mask"
                vis.append(helper.make_tensor_value_info("mask", TensorProto.INT32, list(feeds["mask"].shape)))
            outs = ["y"]
            if past_len:
                feeds["past"] = rng.normal(0, 1, (2, B, N, past_len, h)).astype(np.float32)
                ins[4] = "past"
                vis.append(helper.make_tensor_value_info("past", TensorProto.FLOAT, [2, B, N, past_len, h]))
                outs.append("present")
            while ins[-1] == "":
                ins.pop()
            node = helper.make_node("Attention", ins, outs, name="decoder_attention", domain="com.microsoft",
                                    num_heads=N, unidirectional=causal)
            g = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                     for o in outs],
                                  [helper.make_tensor("w", TensorProto.FLOAT, [D, 3 * D], w),
                                   helper.make_tensor("b", TensorProto.FLOAT, [3 * D], b)])
            path = os.path.join(tmp, "decoder_attention.onnx")
            onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                          helper.make_opsetid("com.microsoft", 1)], ir_version=8), path)
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
            label = "Attention unidirectional=%d past %d mask %s" % (causal, past_len, mask_kind)
            r = run_whittle(args.bin, path, feeds, tmp)
            if r.returncode != 0:
                print("FAIL %s: %s" % (label, r.stderr.strip()))
                failures += 1
                continue
            errs = [rel(np.load(os.path.join(tmp, o + ".npy")), wv) for o, wv in zip(outs, want)]
            ok = max(errs) <= MAX_REL
            failures += not ok
            print("%s %s: vs ORT %s" % ("ok  " if ok else "FAIL", label,
                                        ", ".join("%s %.2e" % (o, e) for o, e in zip(outs, errs))))

    # A form not read: refused at load, one line, naming the node and the reason.
    with tempfile.TemporaryDirectory() as tmp:
        w = helper.make_tensor("w", TensorProto.FLOAT, [8, 24], np.zeros(8 * 24, np.float32))
        node = helper.make_node("Attention", ["x", "w"], ["y"], name="rotary_attention", domain="com.microsoft",
                                num_heads=2, do_rotary=1)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
        path = os.path.join(tmp, "causal.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("com.microsoft", 1)], ir_version=8), path)
        r = run_whittle(args.bin, path, {"x": np.zeros((1, 4, 8), np.float32)}, tmp)
        err = r.stderr.strip()
        ok = r.returncode != 0 and "rotary_attention" in err and "do_rotary=1 is not supported" in err and \
            len(err.splitlines()) == 1
        failures += not ok
        print("%s refused: %s" % ("ok  " if ok else "FAIL", err))
    print("%d model(s), %d failure(s)" % (len(paths), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
