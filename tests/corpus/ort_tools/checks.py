#!/usr/bin/env python3
"""Numerical checks of com.microsoft contrib-op semantics against onnxruntime's CPU kernels.

Part 1: single-node graphs built with onnx.helper, run by ORT (CPUExecutionProvider, optimizations disabled),
        compared with the NumPy references in contrib_ref.py (and, where a behaviour was in doubt, with the
        competing hypotheses, to show which one ORT implements).
Part 2: every *.onnx here evaluated end to end by onnx.reference.ReferenceEvaluator with contrib_ref.py plugged
        in for the contrib ops, compared with the ORT outputs stored in the matching .npz.

Run: python tests/corpus/ort_tools/checks.py      (exit status 1 if any check fails)
"""
import glob
import math
import os
import sys
import traceback

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contrib_ref as R  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = []
rng = np.random.default_rng(123)
NP2TP = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.int32: TP.INT32, np.int64: TP.INT64,
         np.float16: TP.FLOAT16, np.bool_: TP.BOOL}


def check(name, ok, detail=""):
    RESULTS.append((name, bool(ok), detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"  [{detail}]" if detail else ""))


def close(name, got, want, atol=1e-5, rtol=1e-4, extra=""):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        check(name, False, f"shape {got.shape} != {want.shape} {extra}")
        return False
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
    ok = np.allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol)
    check(name, ok, f"max|d|={err:.3g} {extra}".strip())
    return ok


def run_node(op, inputs, outputs, domain="com.microsoft", **attrs):
    """inputs: list of (name, array) or None for an omitted optional input;
    outputs: list of (name, numpy dtype) or None for a skipped optional output.
    Returns the list of output arrays (None for skipped ones), or raises the ORT error."""
    in_names, vis, feeds = [], [], {}
    for i, item in enumerate(inputs):
        if item is None:
            in_names.append("")
            continue
        name, arr = item
        in_names.append(name)
        vis.append(helper.make_tensor_value_info(name, NP2TP[arr.dtype.type], list(arr.shape)))
        feeds[name] = arr
    out_names = ["" if o is None else o[0] for o in outputs]
    while out_names and out_names[-1] == "":
        out_names.pop()
    ovis = [helper.make_tensor_value_info(o[0], NP2TP[np.dtype(o[1]).type], None) for o in outputs if o is not None]
    node = helper.make_node(op, in_names, out_names, domain=domain, **attrs)
    g = helper.make_graph([node], "g", vis, ovis)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    m = helper.make_model(g, opset_imports=opsets, ir_version=8)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    res = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
    return [None if o is None else res[o[0]] for o in outputs]


def expect_error(name, fn, must_contain=""):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0][:160]
        check(name, must_contain.lower() in str(e).lower(), "error: " + msg)
        return
    check(name, False, "no error raised")


def f32(*shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


# ====================================================================== activations
def checks_activations():
    x = f32(2, 3, 16, scale=3.0)
    b = f32(16)
    (y,) = run_node("Gelu", [("X", x)], [("Y", np.float32)])
    close("Gelu == 0.5x(1+erf(x/sqrt2))", y, R.gelu_erf(x), atol=2e-6)
    check("Gelu is NOT the tanh approximation", np.abs(y - R.gelu_tanh(x)).max() > 1e-4,
          f"max|erf-tanh|={np.abs(y - R.gelu_tanh(x)).max():.2g}")
    (y,) = run_node("BiasGelu", [("A", x), ("B", b)], [("C", np.float32)])
    close("BiasGelu == gelu_erf(A + B), B broadcast on last dim", y, R.gelu_erf(x + b), atol=2e-6)
    (y,) = run_node("FastGelu", [("X", x)], [("Y", np.float32)])
    close("FastGelu(X) == 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))", y, R.gelu_tanh(x), atol=2e-6)
    (y,) = run_node("FastGelu", [("X", x), ("bias", b)], [("Y", np.float32)])
    close("FastGelu(X, bias) == tanh-gelu(X + bias)", y, R.gelu_tanh(x + b), atol=2e-6)
    (y,) = run_node("QuickGelu", [("X", x)], [("Y", np.float32)])
    close("QuickGelu default alpha=1.702: x*sigmoid(1.702x)", y, R.QuickGelu(x), atol=2e-6)
    (y,) = run_node("QuickGelu", [("X", x)], [("Y", np.float32)], alpha=0.5)
    close("QuickGelu alpha=0.5", y, R.QuickGelu(x, 0.5), atol=2e-6)
    # BiasGelu with a bias that is not 1-D / not last-dim sized
    expect_error("BiasGelu rejects a bias whose length != last dim", lambda: run_node(
        "BiasGelu", [("A", x), ("B", f32(8))], [("C", np.float32)]))
    expect_error("FastGelu rejects a bias whose length != last dim", lambda: run_node(
        "FastGelu", [("X", x), ("bias", f32(8))], [("Y", np.float32)]))
    # double support of BiasGelu/FastGelu on CPU
    xd = x.astype(np.float64)
    try:
        (y,) = run_node("Gelu", [("X", xd)], [("Y", np.float64)])
        check("Gelu has a CPU double kernel", True)
    except Exception as e:  # noqa: BLE001
        check("Gelu float64 on CPU (informational: not implemented)", "NOT_IMPLEMENTED" in str(e),
              str(e).splitlines()[0][:100])


# ====================================================================== layer norms
def checks_skip_layer_norm():
    B, S, H = 2, 5, 16
    x, sk, g, be, bi = f32(B, S, H), f32(B, S, H), f32(H), f32(H), f32(H)
    outs = run_node("SkipLayerNormalization", [("input", x), ("skip", sk), ("gamma", g), ("beta", be), ("bias", bi)],
                    [("out", np.float32), ("mean", np.float32), ("inv", np.float32), ("sum", np.float32)],
                    epsilon=1e-5)
    want = R.SkipLayerNormalization(x, sk, g, be, bi, 1e-5)
    close("SLN output = LN(input+skip+bias)*gamma+beta", outs[0], want[0])
    close("SLN mean output shape [B,S,1] and value", outs[1], want[1])
    close("SLN inv_std_var output = 1/sqrt(var+eps), shape [B,S,1]", outs[2], want[2])
    close("SLN input_skip_bias_sum output (incl. bias)", outs[3], want[3])
    # only output 0 and 3 (skip mean/inv) -- what the optimizer writes for CLIP / T5
    outs = run_node("SkipLayerNormalization", [("input", x), ("skip", sk), ("gamma", g), ("beta", be)],
                    [("out", np.float32), None, None, ("sum", np.float32)])
    want = R.SkipLayerNormalization(x, sk, g, be, None)
    close("SLN outputs (0, '', '', 3), no bias", outs[3], want[3])
    # no beta, no bias
    (o,) = run_node("SkipLayerNormalization", [("input", x), ("skip", sk), ("gamma", g)], [("out", np.float32)])
    close("SLN without beta/bias", o, R.SkipLayerNormalization(x, sk, g)[0])
    # beta omitted but bias present
    (o,) = run_node("SkipLayerNormalization", [("input", x), ("skip", sk), ("gamma", g), None, ("bias", bi)],
                    [("out", np.float32)])
    close("SLN with beta='' and bias", o, R.SkipLayerNormalization(x, sk, g, None, bi)[0])
    # skip broadcast
    for shp in [(1, S, H), (S, H)]:
        s2 = f32(*shp)
        try:
            (o,) = run_node("SkipLayerNormalization", [("input", x), ("skip", s2), ("gamma", g), ("beta", be)],
                            [("out", np.float32)])
            close(f"SLN skip broadcast {shp}", o, R.SkipLayerNormalization(x, s2, g, be)[0])
        except Exception as e:  # noqa: BLE001
            check(f"SLN skip broadcast {shp}", False, str(e)[:100])
    # 2-D input
    try:
        (o,) = run_node("SkipLayerNormalization", [("input", x[0]), ("skip", sk[0]), ("gamma", g), ("beta", be)],
                        [("out", np.float32)])
        close("SLN accepts 2-D input [N, H]", o, R.SkipLayerNormalization(x[0], sk[0], g, be)[0])
    except Exception as e:  # noqa: BLE001
        check("SLN 2-D input rejected (informational)", True, str(e).splitlines()[0][:100])
    # default epsilon = 1e-12: data with tiny variance discriminates eps
    xs = (1.0 + 1e-4 * rng.standard_normal((1, 2, H))).astype(np.float32)
    z = np.zeros_like(xs)
    (o,) = run_node("SkipLayerNormalization", [("input", xs), ("skip", z), ("gamma", np.ones(H, np.float32))],
                    [("out", np.float32)])
    d12 = np.abs(o - R.SkipLayerNormalization(xs, z, np.ones(H, np.float32), epsilon=1e-12)[0]).max()
    d5 = np.abs(o - R.SkipLayerNormalization(xs, z, np.ones(H, np.float32), epsilon=1e-5)[0]).max()
    check("SLN default epsilon is 1e-12 (not 1e-5)", d12 < 2e-2 and d5 > 0.5, f"d(1e-12)={d12:.2g} d(1e-5)={d5:.2g}")
    # gamma length mismatch
    expect_error("SLN rejects gamma of wrong length", lambda: run_node(
        "SkipLayerNormalization", [("input", x), ("skip", sk), ("gamma", f32(H - 1))], [("out", np.float32)]))


def checks_simplified_norms():
    B, S, H = 2, 5, 16
    x, sk, g, bi = f32(B, S, H), f32(B, S, H), f32(H), f32(H)
    outs = run_node("SkipSimplifiedLayerNormalization", [("input", x), ("skip", sk), ("gamma", g), ("bias", bi)],
                    [("out", np.float32), ("mean", np.float32), ("inv", np.float32), ("sum", np.float32)],
                    epsilon=1e-6)
    want = R.SkipSimplifiedLayerNormalization(x, sk, g, bi, 1e-6)
    close("SSLN output = (x/rms(x))*gamma, x=input+skip+bias (no mean subtraction, no beta)", outs[0], want[0])
    check("SSLN 'mean' output is produced with shape [B,S,1] (contents not meaningful)",
          outs[1] is not None and outs[1].shape == (B, S, 1), f"shape {None if outs[1] is None else outs[1].shape}")
    close("SSLN inv_std_var = 1/sqrt(mean(x^2)+eps)", outs[2], want[2])
    close("SSLN input_skip_bias_sum", outs[3], want[3])
    (o,) = run_node("SkipSimplifiedLayerNormalization", [("input", x), ("skip", sk), ("gamma", g)],
                    [("out", np.float32)])
    close("SSLN without bias", o, R.SkipSimplifiedLayerNormalization(x, sk, g)[0])
    # 4-input form must not take a beta: input 3 is bias
    # ai.onnx-domain SimplifiedLayerNormalization (ORT-only op in the default domain)
    o, inv = run_node("SimplifiedLayerNormalization", [("X", x), ("scale", g)],
                      [("Y", np.float32), ("inv", np.float32)], domain="")
    want = R.SimplifiedLayerNormalization(x, g)
    close("SimplifiedLayerNormalization (domain '') default eps 1e-5, axis -1", o, want[0])
    close("SimplifiedLayerNormalization inv_std_var shape [B,S,1]", inv, want[1])
    g2 = f32(S, H)
    (o,) = run_node("SimplifiedLayerNormalization", [("X", x), ("scale", g2)], [("Y", np.float32)], domain="",
                    axis=1, epsilon=1e-3)
    close("SimplifiedLayerNormalization axis=1 normalizes over dims [1, rank)", o,
          R.SimplifiedLayerNormalization(x, g2, axis=1, epsilon=1e-3)[0])
    xs = (1.0 + 1e-4 * rng.standard_normal((1, 2, H))).astype(np.float32)
    xs = xs - xs.mean(-1, keepdims=True)  # rms ~ 1e-4 so eps matters
    one = np.ones(H, np.float32)
    (o,) = run_node("SkipSimplifiedLayerNormalization", [("input", xs), ("skip", np.zeros_like(xs)), ("gamma", one)],
                    [("out", np.float32)])
    d12 = np.abs(o - R.SkipSimplifiedLayerNormalization(xs, 0 * xs, one, epsilon=1e-12)[0]).max()
    check("SSLN default epsilon is 1e-12", d12 < 2e-2, f"d={d12:.2g}")


def checks_embed_layer_norm():
    B, S, H, V, P, G = 2, 6, 16, 30, 10, 2
    ids = rng.integers(0, V, (B, S)).astype(np.int32)
    seg = rng.integers(0, G, (B, S)).astype(np.int32)
    we, pe, se, g, be = f32(V, H), f32(P, H), f32(G, H), f32(H), f32(H)
    mask = np.array([[1, 1, 0, 1, 0, 0], [2, 1, 1, 1, 1, 0]], np.int32)
    full = [("ids", ids), ("seg", seg), ("we", we), ("pe", pe), ("se", se), ("g", g), ("b", be), ("mask", mask)]
    outs = run_node("EmbedLayerNormalization", full,
                    [("out", np.float32), ("mask_index", np.int32), ("sum", np.float32)], epsilon=1e-5)
    want = R.EmbedLayerNormalization(ids, seg, we, pe, se, g, be, mask, None, 1e-5)
    close("ELN output = LN(word[ids]+pos[s]+seg[segids])*gamma+beta", outs[0], want[0])
    check("ELN mask_index dtype int32, shape [B]", outs[1].dtype == np.int32 and outs[1].shape == (B,),
          f"{outs[1].dtype} {outs[1].shape}")
    check("ELN mask_index = count of mask entries == 1 (not first-zero position, not sum)",
          list(outs[1]) == [3, 4], f"got {list(outs[1])}; first-zero would be [2,5], sum [3,6]")
    close("ELN embedding_sum = word+pos+segment (before LN)", outs[2], want[2])
    # without mask: mask_index all zero
    outs = run_node("EmbedLayerNormalization", full[:7], [("out", np.float32), ("mask_index", np.int32)])
    check("ELN without mask input: mask_index output is zeros", list(outs[1]) == [0, 0], f"got {list(outs[1])}")
    close("ELN default epsilon 1e-12", outs[0], R.EmbedLayerNormalization(ids, seg, we, pe, se, g, be)[0])
    # no segment (DistilBERT style): inputs 1 and 4 empty
    ins = [("ids", ids), None, ("we", we), ("pe", pe), None, ("g", g), ("b", be)]
    expect_error("ELN node declaring only 1 output fails ORT type inference (declare mask_index too)",
                 lambda: run_node("EmbedLayerNormalization", ins, [("out", np.float32)]), "out of range")
    (o, _) = run_node("EmbedLayerNormalization", ins, [("out", np.float32), ("mask_index", np.int32)])
    close("ELN without segment_ids/segment_embedding", o, R.EmbedLayerNormalization(ids, None, we, pe, None, g, be)[0])
    # explicit position_ids (input 8), both [B,S] and [1,S]
    for shp in [(B, S), (1, S)]:
        pid = rng.integers(0, P, shp).astype(np.int32)
        ins = full[:7] + [None, ("pid", pid)]
        try:
            (o, _, s) = run_node("EmbedLayerNormalization", ins,
                                 [("out", np.float32), ("mask_index", np.int32), ("sum", np.float32)])
            w = R.EmbedLayerNormalization(ids, seg, we, pe, se, g, be, None, pid)
            close(f"ELN position_ids {shp}", o, w[0])
            close(f"ELN embedding_sum with position_ids {shp}", s, w[2])
        except Exception as e:  # noqa: BLE001
            check(f"ELN position_ids {shp}", False, str(e).splitlines()[0][:120])
    # errors
    bad = ids.copy(); bad[0, 0] = V
    expect_error("ELN out-of-range input id -> error", lambda: run_node(
        "EmbedLayerNormalization", [("ids", bad)] + full[1:7], [("out", np.float32), ("mi", np.int32)]),
        "out of range")
    expect_error("ELN sequence longer than position table -> error", lambda: run_node(
        "EmbedLayerNormalization", [("ids", np.zeros((1, P + 1), np.int32)), ("seg", np.zeros((1, P + 1), np.int32))]
        + full[2:7], [("out", np.float32), ("mi", np.int32)]))
    expect_error("ELN int64 input_ids are rejected (T1 is int32 only)", lambda: run_node(
        "EmbedLayerNormalization", [("ids", ids.astype(np.int64)), ("seg", seg.astype(np.int64))] + full[2:7],
        [("out", np.float32), ("mi", np.int32)]))


# ====================================================================== matmuls
def checks_fused_matmul():
    A, Bm = f32(2, 3, 4, 5), f32(2, 3, 5, 6)
    (y,) = run_node("FusedMatMul", [("A", A), ("B", Bm)], [("Y", np.float32)], alpha=0.25)
    close("FusedMatMul alpha * A@B (numpy matmul broadcasting)", y, 0.25 * np.matmul(A, Bm))
    At, Bt = np.swapaxes(A, -1, -2).copy(), np.swapaxes(Bm, -1, -2).copy()
    (y,) = run_node("FusedMatMul", [("A", At), ("B", Bt)], [("Y", np.float32)], transA=1, transB=1)
    close("FusedMatMul transA/transB swap the last two dims", y, np.matmul(A, Bm))
    W = f32(6, 5)
    (y,) = run_node("FusedMatMul", [("A", A), ("B", W)], [("Y", np.float32)], transB=1, alpha=2.0)
    close("FusedMatMul rank-4 x rank-2 with transB", y, 2.0 * np.matmul(A, W.T))
    # transBatch: A given as [d0, d1..d(r-2), d(r-1)] is used as moveaxis(A, 0, -2)
    A3 = f32(4, 2, 5)           # logical A = [2, 4, 5]
    B3 = f32(2, 5, 3)
    (y,) = run_node("FusedMatMul", [("A", A3), ("B", B3)], [("Y", np.float32)], transBatchA=1)
    close("FusedMatMul transBatchA (rank 3): A -> moveaxis(A, 0, -2)", y, np.matmul(np.moveaxis(A3, 0, -2), B3))
    A4 = f32(4, 2, 3, 5)        # logical [2, 3, 4, 5]
    B4 = f32(2, 3, 5, 6)
    (y,) = run_node("FusedMatMul", [("A", A4), ("B", B4)], [("Y", np.float32)], transBatchA=1)
    close("FusedMatMul transBatchA (rank 4): A -> moveaxis(A, 0, -2)", y, np.matmul(np.moveaxis(A4, 0, -2), B4))
    B5 = f32(5, 2, 3, 6)        # logical [2, 3, 5, 6]
    (y,) = run_node("FusedMatMul", [("A", A4), ("B", B5)], [("Y", np.float32)], transBatchA=1, transBatchB=1)
    close("FusedMatMul transBatchA+transBatchB", y, np.matmul(np.moveaxis(A4, 0, -2), np.moveaxis(B5, 0, -2)))
    A6 = f32(5, 2, 3, 4)        # transBatchA then transA: moveaxis -> [2,3,5,4] -> swap -> [2,3,4,5]
    (y,) = run_node("FusedMatMul", [("A", A6), ("B", B4)], [("Y", np.float32)], transBatchA=1, transA=1)
    close("FusedMatMul transBatchA+transA (moveaxis first, then swap last two)", y,
          np.matmul(np.swapaxes(np.moveaxis(A6, 0, -2), -1, -2), B4))
    close("contrib_ref.FusedMatMul matches the above", y, R.FusedMatMul(A6, B4, transBatchA=1, transA=1))
    # 1-D operands
    v = f32(5)
    (y,) = run_node("FusedMatMul", [("A", A), ("B", v)], [("Y", np.float32)], alpha=3.0)
    close("FusedMatMul with 1-D B (numpy semantics)", y, 3.0 * np.matmul(A, v))


def checks_fused_gemm():
    A, Bm, C = f32(3, 4), f32(5, 4), f32(5)
    for act, kw, fn in [("Tanh", {}, np.tanh), ("Relu", {}, lambda t: np.maximum(t, 0)),
                        ("LeakyRelu", {"activation_alpha": 0.2}, lambda t: np.where(t >= 0, t, 0.2 * t))]:
        (y,) = run_node("FusedGemm", [("A", A), ("B", Bm), ("C", C)], [("Y", np.float32)], transB=1, alpha=0.5,
                        beta=2.0, activation=act, **kw)
        close(f"FusedGemm = {act}(alpha*A@B^T + beta*C)", y, fn(0.5 * A @ Bm.T + 2.0 * C))


# ====================================================================== attention
def att_inputs(B=2, S=5, Din=16, D=16, Dv=None, N=4):
    Dv = D if Dv is None else Dv
    return f32(B, S, Din), f32(Din, 2 * D + Dv, scale=0.5), f32(2 * D + Dv, scale=0.2)


def run_att(x, w, b, mask=None, past=None, abias=None, want_present=False, **attrs):
    ins = [("input", x), ("weights", w), None if b is None else ("bias", b),
           None if mask is None else ("mask_index", mask), None if past is None else ("past", past),
           None if abias is None else ("attention_bias", abias)]
    while ins and ins[-1] is None:
        ins.pop()
    outs = [("output", np.float32)] + ([("present", np.float32)] if want_present else [])
    return run_node("Attention", ins, outs, **attrs)


def checks_attention():
    N = 4
    x, w, b = att_inputs(N=N)
    B, S = x.shape[:2]
    (y,) = run_att(x, w, b, num_heads=N)
    close("Attention no mask: softmax(QK^T/sqrt(H))V, out [B,S,N*H]", y, R.Attention(x, w, b, num_heads=N)[0])
    (y,) = run_att(x, w, None, num_heads=N)
    close("Attention without bias input", y, R.Attention(x, w, None, num_heads=N)[0])
    # 2-D raw mask with a left pad and a hole
    m2 = np.array([[0, 1, 1, 0, 1], [1, 1, 1, 1, 1]], np.int32)
    (y,) = run_att(x, w, b, m2, num_heads=N)
    close("Attention 2-D [B,T] 0/1 key mask", y, R.Attention(x, w, b, m2, num_heads=N)[0])
    # values other than 0/1
    m2b = np.array([[0, 2, -1, 5, 1], [1, 0, 3, 1, -7]], np.int32)
    (y,) = run_att(x, w, b, m2b, num_heads=N)
    gt0 = R.Attention(x, w, b, (m2b > 0).astype(np.int32), num_heads=N)[0]
    ne0 = R.Attention(x, w, b, (m2b != 0).astype(np.int32), num_heads=N)[0]
    check("Attention 2-D mask: a key is kept iff mask > 0 (negatives mask)",
          np.allclose(y, gt0, atol=1e-5) and not np.allclose(y, ne0, atol=1e-5),
          f"|y-gt0|={np.abs(y - gt0).max():.2g} |y-ne0|={np.abs(y - ne0).max():.2g}")
    # mask is ADDED to the scaled scores (not a replacement): tiny mask_filter_value shows it
    (y,) = run_att(x, w, b, m2, num_heads=N, mask_filter_value=-1.0)
    add = R.Attention(x, w, b, m2, num_heads=N, mask_filter_value=-1.0)[0]
    close("Attention mask_filter_value is added to the masked scores", y, add)
    (y,) = run_att(x, w, b, m2, num_heads=N)
    close("Attention default mask_filter_value = -10000", y,
          R.Attention(x, w, b, m2, num_heads=N, mask_filter_value=-10000.0)[0])
    (y,) = run_att(x, w, b, m2, num_heads=N, mask_filter_value=float("-inf"))
    close("Attention mask_filter_value=-inf works for partly-masked rows", y,
          R.Attention(x, w, b, m2, num_heads=N, mask_filter_value=-1e30)[0])
    # a fully masked row: constant shift -> same as unmasked
    m0 = np.array([[0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    (y,) = run_att(x, w, b, m0, num_heads=N)
    y_nomask = R.Attention(x, w, b, None, num_heads=N)[0]
    close("Attention fully-masked row: all scores shifted by -10000 (ref with f32 rounding)", y,
          R.Attention(x, w, b, m0, num_heads=N)[0])
    close("  ... i.e. ~= unmasked attention, NOT zeros (diff only from f32 rounding of s-10000)", y[0], y_nomask[0],
          atol=3e-3, rtol=0)
    # 1-D [B]: end positions
    m1 = np.array([3, 5], np.int32)
    (y,) = run_att(x, w, b, m1, num_heads=N)
    close("Attention 1-D [B] mask_index: keys j >= len[b] masked", y, R.Attention(x, w, b, m1, num_heads=N)[0])
    close("  ... same as 2-D right-padded mask", y,
          R.Attention(x, w, b, np.array([[1, 1, 1, 0, 0], [1] * 5], np.int32), num_heads=N)[0])
    m1b = np.array([0, 9], np.int32)
    (y,) = run_att(x, w, b, m1b, num_heads=N)
    close("Attention 1-D len 0 -> all keys masked (~= unmasked); len > T -> nothing masked", y,
          R.Attention(x, w, b, m1b, num_heads=N)[0])
    close("  ... len > T row equals the unmasked row exactly", y[1], y_nomask[1])
    # 1-D [2B]: end then start
    m1s = np.array([4, 5, 1, 2], np.int32)
    (y,) = run_att(x, w, b, m1s, num_heads=N)
    close("Attention 1-D [2B] = [end_0..end_B-1, start_0..start_B-1]: keep start<=j<end", y,
          R.Attention(x, w, b, np.array([[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]], np.int32), num_heads=N)[0])
    # 3-D [B,S,T]
    m3 = rng.integers(-1, 3, (B, S, S)).astype(np.int32)   # values -1, 0, 1, 2
    (y,) = run_att(x, w, b, m3, num_heads=N)
    close("Attention 3-D [B,S,T] mask (kept iff > 0)", y, R.Attention(x, w, b, m3, num_heads=N)[0])
    # dummy [B,1] / [1,1]
    for shp in [(B, 1), (1, 1)]:
        (y,) = run_att(x, w, b, np.zeros(shp, np.int32), num_heads=N)
        close(f"Attention mask shape {shp} is ignored (dummy), even when 0", y, y_nomask)
    # 4-D Megatron
    M = 7
    m4 = np.tril(np.ones((M, M), np.int32))[None, None].repeat(B, 0)
    m4[1, 0, :, 1] = 0
    try:
        (y,) = run_att(x, w, b, m4, num_heads=N)
        close("Attention 4-D [B,1,M,M] mask (rows 0..S, cols 0..T)", y, R.Attention(x, w, b, m4, num_heads=N)[0])
    except Exception as e:  # noqa: BLE001
        check("Attention 4-D mask on CPU (informational: rejected)", True, str(e).splitlines()[0][:120])
    m3b = np.array([3, 5, 0, 4, 9, 0, 1, 2], np.int32)   # B=2: 3B+2 = 8
    (y,) = run_att(x, w, b, m3b, num_heads=N)
    close("Attention 1-D [3B+2]: CPU uses only the first B entries (key lengths)", y,
          R.Attention(x, w, b, m3b[:B], num_heads=N)[0])
    expect_error("Attention rejects other 1-D lengths (e.g. 2B+1)",
                 lambda: run_att(x, w, b, np.array([3, 5, 0, 0, 0], np.int32), num_heads=N), "1D data")
    # wrong shapes
    expect_error("Attention rejects 2-D mask [B, T+1]", lambda: run_att(x, w, b, np.ones((B, S + 1), np.int32),
                                                                         num_heads=N))
    expect_error("Attention rejects int64 mask (M is int32)", lambda: run_att(x, w, b, m2.astype(np.int64),
                                                                                num_heads=N))
    # unidirectional
    (y,) = run_att(x, w, b, num_heads=N, unidirectional=1)
    close("Attention unidirectional=1: key j > query i masked", y, R.Attention(x, w, b, num_heads=N,
                                                                                unidirectional=1)[0])
    (y,) = run_att(x, w, b, m2, num_heads=N, unidirectional=1, mask_filter_value=-1.0)
    want_mfv = R.Attention(x, w, b, m2, num_heads=N, unidirectional=1, mask_filter_value=-1.0)[0]
    close("Attention causal part ignores mask_filter_value (future keys get float lowest)", y, want_mfv)
    causal_mfv = R.Attention(x, w, b, m2, num_heads=N, mask_filter_value=-1.0)[0]  # (not causal at all)
    # a row whose only non-future key is padded still attends to it (causal beats padding)
    m_first = np.array([[0, 1, 1, 1, 1], [1] * 5], np.int32)
    (y,) = run_att(x, w, b, m_first, num_heads=N, unidirectional=1, mask_filter_value=-1e30)
    H0 = w.shape[1] // 3 // N
    v0 = (x[0, 0].astype(np.float64) @ w[:, 2 * N * H0:] + b[2 * N * H0:])
    close("Attention unidirectional row 0 with key 0 padded (mfv=-1e30) -> attends only key 0 (=V[0])",
          y[0, 0], v0, atol=1e-4)
    # scale
    (y,) = run_att(x, w, b, m2, num_heads=N, scale=0.1)
    close("Attention scale attribute replaces 1/sqrt(H)", y, R.Attention(x, w, b, m2, num_heads=N, scale=0.1)[0])
    (y,) = run_att(x, w, b, m2, num_heads=N, scale=0.0)
    close("Attention scale=0.0 means default 1/sqrt(H)", y, R.Attention(x, w, b, m2, num_heads=N)[0])
    # qkv_hidden_sizes with a different V width and input_hidden != hidden
    xq, wq, bq = att_inputs(Din=12, D=16, Dv=24, N=N)
    (y,) = run_att(xq, wq, bq, m2, num_heads=N, qkv_hidden_sizes=[16, 16, 24])
    close("Attention qkv_hidden_sizes [16,16,24], D_in=12 -> out [B,S,24]", y,
          R.Attention(xq, wq, bq, m2, num_heads=N, qkv_hidden_sizes=[16, 16, 24])[0])
    # weight layout: columns [Q | K | V], head n uses columns n*H..(n+1)*H within each
    # attention_bias (input 5)
    for shp in [(B, N, S, S), (1, N, S, S), (B, 1, S, S), (1, 1, S, S)]:
        ab = f32(*shp)
        try:
            (y,) = run_att(x, w, b, m2, abias=ab, num_heads=N)
            close(f"Attention attention_bias {shp} added to scaled scores", y,
                  R.Attention(x, w, b, m2, attention_bias=ab, num_heads=N)[0])
        except Exception as e:  # noqa: BLE001
            check(f"Attention attention_bias {shp}", False, str(e).splitlines()[0][:120])
    # past / present
    Pl = 3
    H = w.shape[1] // 3 // N
    past = f32(2, B, N, Pl, H)
    mp = np.ones((B, Pl + S), np.int32); mp[1, 0] = 0
    y, pres = run_att(x, w, b, mp, past=past, want_present=True, num_heads=N, unidirectional=1)
    wy, wp = R.Attention(x, w, b, mp, past=past, num_heads=N, unidirectional=1)
    close("Attention with past: output (causal offset by P, mask [B,P+S])", y, wy)
    close("Attention present = concat(past, new K/V) [2,B,N,P+S,H]", pres, wp)
    y, pres = run_att(x, w, b, num_heads=N, want_present=True)
    close("Attention present without past = new K/V [2,B,N,S,H]", pres, R.Attention(x, w, b, num_heads=N)[1])
    # num_heads must divide
    expect_error("Attention hidden size not divisible by num_heads -> error", lambda: run_att(x, w, b, num_heads=5))


# ====================================================================== end to end on the models
def make_ref_ops():
    from onnx.reference.op_run import OpRun

    def wrap(op_type, fn, domain="com.microsoft", multi=False):
        def _run(self, *inputs, **kw):
            attrs = {a.name: helper.get_attribute_value(a) for a in self.onnx_node.attribute}
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
            inputs = [None if (i < len(self.onnx_node.input) and self.onnx_node.input[i] == "") else t
                      for i, t in enumerate(inputs)]
            res = fn(*inputs, **attrs)
            if not isinstance(res, tuple):
                res = (res,)
            res = tuple(np.zeros((0,), np.float32) if r is None else r for r in res)
            return res[:len(self.onnx_node.output)]
        return type(op_type, (OpRun,), {"op_domain": domain, "_run": _run})

    def gather_elements(data, indices, axis=0):   # onnx.reference's GatherElements fails on these graphs
        return np.take_along_axis(data, np.where(indices < 0, indices + data.shape[axis], indices), axis=axis)

    ops = [wrap(k, v) for k, v in R.OPS.items()]
    ops.append(wrap("SimplifiedLayerNormalization", R.SimplifiedLayerNormalization, domain=""))
    ops.append(wrap("GatherElements", gather_elements, domain=""))
    return ops


def checks_optimizer_mask_semantics():
    """MaskIndexEnd (the bert default) turns the 2-D mask into a count of ones, used as an END position: the
    optimized graph equals the source only for right padding; the raw-mask variant is exact for any mask."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hf_bert_ids_mask_op17.onnx")
    if not os.path.exists(src):
        check("corpus BERT present", False, src)
        return
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    def run(p, feeds):
        return ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    ids = rng.integers(0, 200, (3, 8)).astype(np.int64)
    masks = {"right-padded": [[1] * 8, [1] * 5 + [0] * 3, [1] * 2 + [0] * 6],
             "left-padded": [[1] * 8, [0] * 3 + [1] * 5, [0] * 6 + [1] * 2],
             "holes": [[1] * 8, [1, 0, 1, 0, 1, 1, 0, 1], [1, 1, 0, 0, 1, 1, 1, 1]]}
    for kind, mk in masks.items():
        feeds = {"input_ids": ids, "attention_mask": np.array(mk, np.int64)}
        ref = run(src, feeds)
        d_end = np.abs(run(os.path.join(HERE, "bert_ort_opt.onnx"), feeds) - ref).max()
        d_raw = np.abs(run(os.path.join(HERE, "bert_ort_rawmask.onnx"), feeds) - ref).max()
        expect_equal = kind == "right-padded"
        check(f"optimizer MaskIndexEnd graph {'==' if expect_equal else '!='} source for {kind} masks",
              (d_end < 1e-4) == expect_equal, f"max|d|={d_end:.3g}")
        check(f"optimizer raw-mask graph == source for {kind} masks", d_raw < 1e-4, f"max|d|={d_raw:.3g}")


def checks_models():
    from onnx.reference import ReferenceEvaluator
    ops = make_ref_ops()
    paths = sorted(p for p in glob.glob(os.path.join(HERE, "*.onnx")) if not p.endswith(".src.onnx"))
    if not paths:
        check("models present", False, "run make_ort_optimized.py first")
    for p in paths:
        name = os.path.basename(p)[:-5]
        data = np.load(p[:-5] + ".npz")
        m = onnx.load(p)
        feeds = {i.name: data[i.name] for i in m.graph.input}
        if not any(o.domain == "com.microsoft" for o in m.opset_import):
            # the optimizer's opt_level=0 output (geglu_unet_ort_opt) has no com.microsoft opset import
            check(f"model {name}: (note) file lacks a com.microsoft opset_import", True)
            m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        try:
            ev = ReferenceEvaluator(m, new_ops=ops)
            got = ev.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            check(f"model {name}: NumPy reference runs", False, repr(e)[:200])
            traceback.print_exc()
            continue
        for o, g in zip(m.graph.output, got):
            close(f"model {name}: reference of '{o.name}' vs stored ORT output", g, data["out:" + o.name],
                  atol=2e-4, rtol=1e-3)


if __name__ == "__main__":
    print("onnxruntime", ort.__version__, "onnx", onnx.__version__)
    for fn in [checks_activations, checks_skip_layer_norm, checks_simplified_norms, checks_embed_layer_norm,
               checks_fused_matmul, checks_fused_gemm, checks_attention, checks_optimizer_mask_semantics,
               checks_models]:
        print(f"\n--- {fn.__name__}")
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            check(fn.__name__ + " crashed", False, repr(e)[:200])
    n_fail = sum(1 for _, ok, _ in RESULTS if not ok)
    print(f"\n{len(RESULTS) - n_fail} passed, {n_fail} failed")
    sys.exit(1 if n_fail else 0)
