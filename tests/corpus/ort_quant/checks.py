#!/usr/bin/env python3
"""Numerical checks of ORT 1.32's quantized com.microsoft contrib ops (CPU kernels) against
  (a) the NumPy references in contrib_qref.py, and
  (b) the proposed expansions into standard ONNX ops (qexpand.py), run by ORT as well.

Part 1: single-node graphs built with onnx.helper (ORT CPUExecutionProvider, graph optimizations disabled, one
        thread). For every case it prints ORT-vs-reference and ORT-vs-expansion: for integer outputs the number of
        differing elements and the largest difference in LSB ("bit-exact" when none differ), for float outputs the
        max |difference|.
Part 2: every NAME.onnx written by make_ort_quantized.py (next to this file, or the folder given as argv[1]):
        the file rerun against NAME.npz, and the file with every quantized contrib node replaced by its expansion
        against NAME.npz.

Expectations (a FAIL otherwise): "exact" = no difference at all; "lsb1" = at most 1 LSB on at most 1% of the
elements; ("tol", atol, rtol) = float closeness. Exit status 1 if any check fails.
Run: python checks.py [model dir]
"""
import glob
import os
import sys
import traceback

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import contrib_qref as Q  # noqa: E402
import qexpand as X  # noqa: E402

MODEL_DIR = sys.argv[1] if len(sys.argv) > 1 else HERE
RESULTS = []
rng = np.random.default_rng(2024)
f32 = np.float32
NP2TP = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.int32: TP.INT32, np.int64: TP.INT64,
         np.uint8: TP.UINT8, np.int8: TP.INT8, np.bool_: TP.BOOL}


# ------------------------------------------------------------------------------------------------ plumbing
def check(name, ok, detail=""):
    RESULTS.append((name, bool(ok), detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"  [{detail}]" if detail else ""), flush=True)


def compare(name, got, want, expect="exact"):
    """Integer outputs: count of differing elements and max |LSB| difference. Float: max |difference|."""
    if STANDIN and "ORT vs" in name:  # Whittle's output stands in for ORT's (ort_and_expansion)
        if got is want:  # what was ORT vs Whittle: ORT's own output, shown
            ort_out = STANDIN.get(id(got))
            if ort_out is not None:
                compare(name + SATURATION_NOTE, ort_out, want, "info")
            return True
        name = name.replace("ORT vs", "Whittle (for ORT, whose u8s8 GEMM saturates on this CPU) vs", 1)
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        check(name, False, f"shape {got.shape} != {want.shape}")
        return False
    if got.size == 0:
        check(name, True, "empty")
        return True
    if np.issubdtype(got.dtype, np.integer):
        d = np.abs(got.astype(np.int64) - want.astype(np.int64))
        n, mx = int((d > 0).sum()), int(d.max())
        detail = "bit-exact" if n == 0 else f"{n}/{got.size} differ, max {mx} LSB"
        if expect == "exact":
            ok = n == 0
        elif expect == "lsb1":
            ok = mx <= 1 and n <= max(1, got.size // 100)
        elif expect == "info":
            ok = True
        else:
            ok = mx <= expect[1]
    else:
        d = np.abs(got.astype(np.float64) - want.astype(np.float64))
        mx = float(np.nanmax(d))
        rel = mx / max(float(np.abs(want).max()), 1e-30)
        detail = "bit-exact (max|d| = 0)" if mx == 0 and not np.isnan(d).any() else f"max|d|={mx:.3g} (rel {rel:.2g})"
        if expect == "exact":
            ok = mx == 0
        elif expect == "info":
            ok = True
        else:
            _, atol, rtol = expect
            ok = np.allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol)
    check(name, ok, detail + ("" if expect in ("exact", "info") else f", expect {expect}"))
    return ok


def session(model):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def run_model(model, feeds):
    s = session(model)
    return s.run(None, {k: v for k, v in feeds.items() if k in {i.name for i in s.get_inputs()}})


def node_model(op, inputs, outputs, domain="com.microsoft", **attrs):
    """inputs: list of (name, array) or None (skipped optional input); every array becomes a graph input (so no
    kernel sees constant scales; the const-initializer path is exercised in part 2).
    outputs: list of (name, dtype) or None. Returns (model, feeds)."""
    in_names, vis, feeds = [], [], {}
    for item in inputs:
        if item is None:
            in_names.append("")
            continue
        name, arr = item
        in_names.append(name)
        vis.append(helper.make_tensor_value_info(name, NP2TP[arr.dtype.type], list(arr.shape)))
        feeds[name] = arr
    while in_names and in_names[-1] == "":
        in_names.pop()
    out_names = ["" if o is None else o[0] for o in outputs]
    ovis = [helper.make_tensor_value_info(o[0], NP2TP[np.dtype(o[1]).type], None) for o in outputs if o is not None]
    node = helper.make_node(op, in_names, out_names, name=op + "_0", domain=domain, **attrs)
    g = helper.make_graph([node], "g", vis, ovis)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                          ir_version=8)
    return m, feeds


SECOND_RUNTIME = []   # (op, case, outputs of the expansion under onnx.reference vs ORT's op): see second_runtime()


EXPANSION_RUNNER = None  # (model, feeds) -> outputs: another runtime reading the contrib node itself (Whittle)
# Set by a driver on a CPU where ORT's uint8 x int8 GEMM saturates (no VNNI: tests/tools/ort_saturation.py).
# There, for a case with an int8 input on which ORT and EXPANSION_RUNNER disagree, ORT's output is no
# reference: ort_and_expansion hands back the runner's output in ORT's place, so the NumPy reference
# judges it, and compare() shows ORT's own output for information (STANDIN: id(runner output) -> ORT's).
ORT_SATURATES = False
STANDIN = {}
SATURATION_NOTE = " [ORT's u8s8 GEMM saturates on this CPU: shown, not counted]"


def ort_and_expansion(op, inputs, outputs, variant="exact", **attrs):
    m, feeds = node_model(op, inputs, outputs, **attrs)
    got = run_model(m, feeds)
    if EXPANSION_RUNNER is not None:
        theirs = EXPANSION_RUNNER(m, feeds)
        STANDIN.clear()
        differ = any(np.asarray(g).shape != np.asarray(t).shape or not np.array_equal(g, t) for g, t in zip(got, theirs))
        if ORT_SATURATES and differ and any(np.asarray(v).dtype == np.int8 for v in feeds.values()):
            STANDIN.update({id(t): g for g, t in zip(got, theirs)})
            return theirs, theirs
        return got, theirs
    em = X.expand_model(m, variant)
    assert not any(n.op_type == op and n.domain == "com.microsoft" for n in em.graph.node)
    exp = run_model(em, feeds)
    # the same expansion in a second runtime (onnx.reference), summarised per op at the end
    from onnx.reference import ReferenceEvaluator
    try:
        ref = ReferenceEvaluator(em, new_ops=reference_ops()).run(None, feeds)
        SECOND_RUNTIME.append((op, variant, got, ref))
    except Exception as e:  # noqa: BLE001
        SECOND_RUNTIME.append((op, variant, got, e))
    return got, exp


def second_runtime():
    """Per op: the proposed expansion evaluated by onnx.reference (NumPy kernels: float ops partly in float64)
    against ORT's contrib kernel, over all single-op cases above. Integer outputs: elements differing and max LSB;
    float outputs: max relative difference. This is what a runtime other than ORT should expect."""
    agg = {}
    for op, variant, got, ref in SECOND_RUNTIME:
        a = agg.setdefault((op, variant), {"n": 0, "tot": 0, "lsb": 0, "rel": 0.0, "err": None})
        if isinstance(ref, Exception):
            a["err"] = repr(ref)[:120]
            continue
        for g, r in zip(got, ref):
            g, r = np.asarray(g), np.asarray(r)
            if np.issubdtype(g.dtype, np.integer):
                d = np.abs(g.astype(np.int64) - r.astype(np.int64))
                a["n"] += int((d > 0).sum())
                a["tot"] += d.size
                a["lsb"] = max(a["lsb"], int(d.max()) if d.size else 0)
            else:
                a["rel"] = max(a["rel"], float(np.abs(g.astype(np.float64) - r).max() / max(np.abs(r).max(), 1e-30)))
    for (op, variant), a in sorted(agg.items()):
        if a["err"]:
            check(f"second runtime: {op} ({variant}) expansion under onnx.reference", False, a["err"])
            continue
        ints = f"{a['n']}/{a['tot']} integer outputs differ, max {a['lsb']} LSB; " if a["tot"] else ""
        ok = a["lsb"] <= 1 and a["n"] <= max(1, a["tot"] // 100) and a["rel"] <= 1e-5
        check(f"second runtime: {op} ({variant}) expansion under onnx.reference vs ORT's kernel", ok,
              f"{ints}float max rel {a['rel']:.2g}")


def expect_error(name, fn, must_contain=""):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0][:150]
        check(name, must_contain.lower() in str(e).lower(), "error: " + msg)
        return
    check(name, False, "no error raised")


def q8(shape, dt):
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max + 1, shape).astype(dt)


def arr(v, dt=f32):
    return np.array(v, dt)


# ================================================================================= DynamicQuantizeMatMul
def checks_dynamic_quantize_matmul():
    A = (2 * rng.standard_normal((2, 5, 16))).astype(f32)
    Bi8, Bu8 = q8((16, 12), np.int8), q8((16, 12), np.uint8)
    bias = rng.standard_normal(12).astype(f32)
    cases = [
        ("int8 B, zp 0, bias (the optimizer's form)", A, Bi8, arr(0.02), arr(0, np.int8), bias),
        ("int8 B, no zero point, no bias", A, Bi8, arr(0.02), None, None),
        ("uint8 B with zp 131", A, Bu8, arr(0.01), arr(131, np.uint8), bias),
        ("per-column b_scale [N] and zp [N] (per_channel=True)", A, Bi8,
         rng.uniform(0.01, 0.03, 12).astype(f32), np.zeros(12, np.int8), bias),
        ("per-column uint8 zero points [N] (varying)", A, Bu8, rng.uniform(0.01, 0.03, 12).astype(f32),
         q8(12, np.uint8), bias),
        ("A all positive (range widened to include 0)", np.abs(A) + 0.5, Bi8, arr(0.02), arr(0, np.int8), bias),
        ("A all negative", -np.abs(A) - 0.5, Bi8, arr(0.02), arr(0, np.int8), None),
        ("A all zero (scale 1, zp 0 -> Y = bias)", np.zeros((3, 16), f32), Bi8, arr(0.02), arr(0, np.int8), bias),
        ("2-D A [7,16]", A.reshape(-1, 16)[:7], Bi8, arr(0.02), arr(3, np.int8), bias),
    ]
    for title, a, b_, bs, bz, bi in cases:
        ins = [("A", a), ("B", b_), ("b_scale", bs), None if bz is None else ("b_zero_point", bz),
               None if bi is None else ("bias", bi)]
        (got,), (exp,) = ort_and_expansion("DynamicQuantizeMatMul", ins, [("Y", f32)])
        want = Q.DynamicQuantizeMatMul(a, b_, bs, bz, bi)
        compare(f"DynamicQuantizeMatMul {title}: ORT vs NumPy", got, want, "exact")
        compare(f"DynamicQuantizeMatMul {title}: ORT vs DynamicQuantizeLinear+MatMulInteger+Cast+Mul+Add",
                got, exp, "exact")
    # A's quantization is exactly DynamicQuantizeLinear's
    m, feeds = node_model("DynamicQuantizeLinear", [("x", A)], [("y", np.uint8), ("s", f32), ("z", np.uint8)],
                          domain="")
    y, s, z = run_model(m, feeds)
    ws, wz = Q.dyn_qparams(A)
    check("DynamicQuantizeLinear params == (max(0,max)-min(0,min))/255, zp=round(-min/scale)",
          s == ws and z == wz and np.array_equal(y, Q.quantize(A, ws, wz, np.uint8)), f"scale {s} zp {z}")


# ================================================================================= MatMulIntegerToFloat
def checks_matmul_integer_to_float():
    A = q8((2, 5, 16), np.uint8)
    Bi8, Bu8 = q8((16, 12), np.int8), q8((16, 12), np.uint8)
    bias = rng.standard_normal(12).astype(f32)
    cases = [
        ("uint8 A (dynamic), int8 B, all 7 inputs (the optimizer's form)", A, Bi8, arr(0.013), arr(0.02),
         arr(117, np.uint8), arr(0, np.int8), bias),
        ("no zero points, no bias", A, Bi8, arr(0.013), arr(0.02), None, None, None),
        ("uint8 B zp 100, bias", A, Bu8, arr(0.013), arr(0.02), arr(3, np.uint8), arr(100, np.uint8), bias),
        ("per-column b_scale/b_zp [N]", A, Bi8, arr(0.013), rng.uniform(0.01, 0.03, 12).astype(f32),
         arr(9, np.uint8), q8(12, np.int8), bias),
    ]
    for title, a, b_, as_, bs, az, bz, bi in cases:
        ins = [("A", a), ("B", b_), ("a_scale", as_), ("b_scale", bs), None if az is None else ("a_zero_point", az),
               None if bz is None else ("b_zero_point", bz), None if bi is None else ("bias", bi)]
        (got,), (exp,) = ort_and_expansion("MatMulIntegerToFloat", ins, [("Y", f32)])
        want = Q.MatMulIntegerToFloat(a, b_, as_, bs, az, bz, bi)
        compare(f"MatMulIntegerToFloat {title}: ORT vs NumPy", got, want, "exact")
        compare(f"MatMulIntegerToFloat {title}: ORT vs MatMulInteger+Cast+Mul(a_scale*b_scale)+Add(bias)",
                got, exp, "exact")
    # bias is added after scaling: compare with the 'bias before scaling' reading
    want_before = (Q.int_matmul(A, Bi8, 117, 0).astype(f32) + bias) * f32(f32(0.013) * f32(0.02))
    m, feeds = node_model("MatMulIntegerToFloat", [("A", A), ("B", Bi8), ("as", arr(0.013)), ("bs", arr(0.02)),
                                                   ("az", arr(117, np.uint8)), ("bz", arr(0, np.int8)),
                                                   ("bias", bias)], [("Y", f32)])
    (got,) = run_model(m, feeds)
    check("MatMulIntegerToFloat bias is NOT scaled (added after a_scale*b_scale)",
          np.abs(got - want_before).max() > 1e-2, f"|ORT - (acc+bias)*s| = {np.abs(got - want_before).max():.3g}")
    # int8 A (the schema allows it; ORT's quantizer/fusions only write uint8 A)
    Ai = q8((2, 5, 16), np.int8)
    ins = [("A", Ai), ("B", Bi8), ("a_scale", arr(0.013)), ("b_scale", arr(0.02)), ("a_zero_point", arr(-5, np.int8)),
           ("b_zero_point", arr(0, np.int8)), ("bias", bias)]
    (got,), (exp,) = ort_and_expansion("MatMulIntegerToFloat", ins, [("Y", f32)])
    compare("MatMulIntegerToFloat int8 A (zp -5): ORT vs NumPy", got,
            Q.MatMulIntegerToFloat(Ai, Bi8, 0.013, 0.02, np.int8(-5), np.int8(0), bias), "exact")
    compare("MatMulIntegerToFloat int8 A: ORT vs expansion", got, exp, "exact")


# ================================================================================= QGemm
def checks_qgemm():
    M, K, N = 3, 16, 10
    Au, Ai = q8((M, K), np.uint8), q8((M, K), np.int8)
    Bt = q8((N, K), np.int8)
    C = rng.integers(-3000, 3000, N).astype(np.int32)
    base = dict(a_scale=arr(0.05), a_zp=arr(131, np.uint8), b_scale=arr(0.01), b_zp=arr(0, np.int8))
    cases = [
        ("uint8 A, int8 B^T, C, uint8 y (the quantizer's form)", Au, base["a_scale"], base["a_zp"], Bt,
         base["b_scale"], base["b_zp"], C, arr(0.09), arr(120, np.uint8), dict(alpha=1.0, transB=1)),
        ("float output (no y_scale / y_zero_point), C", Au, arr(0.05), arr(131, np.uint8), Bt, arr(0.01),
         arr(0, np.int8), C, None, None, dict(transB=1)),
        ("per-column b_scale/b_zp [N], alpha 0.5, transA", np.ascontiguousarray(Au.T), arr(0.05),
         arr(131, np.uint8), Bt, rng.uniform(0.005, 0.02, N).astype(f32), np.zeros(N, np.int8), C, arr(0.05),
         arr(128, np.uint8), dict(alpha=0.5, transA=1, transB=1)),
        ("per-column float output", Au, arr(0.05), arr(131, np.uint8), Bt, rng.uniform(0.005, 0.02, N).astype(f32),
         q8(N, np.int8), None, None, None, dict(transB=1)),
        ("int8 A, int8 B, int8 y (s8s8)", Ai, arr(0.05), arr(-3, np.int8), Bt, arr(0.01), arr(0, np.int8), C,
         arr(0.07), arr(-10, np.int8), dict(transB=1)),
        ("uint8 B [K,N] with zp 128, no C", Au, arr(0.05), arr(131, np.uint8), q8((K, N), np.uint8), arr(0.01),
         arr(128, np.uint8), None, arr(0.3), arr(60, np.uint8), {}),
        ("C [M,1]", Au, arr(0.05), arr(131, np.uint8), Bt, arr(0.01), arr(0, np.int8),
         rng.integers(-3000, 3000, (M, 1)).astype(np.int32), arr(0.09), arr(120, np.uint8), dict(transB=1)),
        ("C [M,N], saturating y_scale", Au, arr(0.05), arr(131, np.uint8), Bt, arr(0.01), arr(0, np.int8),
         rng.integers(-3000, 3000, (M, N)).astype(np.int32), arr(0.01), arr(120, np.uint8), dict(transB=1)),
    ]
    for title, a, as_, az, b_, bs, bz, c, ys, yz, at in cases:
        ins = [("A", a), ("a_scale", as_), ("a_zero_point", az), ("B", b_), ("b_scale", bs), ("b_zero_point", bz),
               None if c is None else ("C", c), None if ys is None else ("y_scale", ys),
               None if yz is None else ("y_zero_point", yz)]
        odt = f32 if ys is None else yz.dtype
        (got,), (exp,) = ort_and_expansion("QGemm", ins, [("Y", odt)], **at)
        want = Q.QGemm(a, as_, az, b_, bs, bz, c, ys, yz, **at)
        compare(f"QGemm {title}: ORT vs NumPy", got, want, "exact")
        compare(f"QGemm {title}: ORT vs MatMulInteger(+Add C)+Cast+Mul(alpha*as*bs[/ys])[+QuantizeLinear(1,yzp)]",
                got, exp, "exact")
        if ys is not None:   # the textbook alternative: requantize a float Gemm
            af = Q.dequantize(a.T if at.get("transA") else a, as_, az)
            bf = Q.dequantize(b_.T if at.get("transB") else b_, np.asarray(bs)[None, :] if np.size(bs) > 1 else bs,
                              np.asarray(bz)[None, :] if np.size(bz) > 1 else bz)
            cf = 0 if c is None else c.astype(f32) * f32(f32(at.get("alpha", 1.0)) * as_) * np.asarray(bs, f32)
            y_alt = Q.quantize((f32(at.get("alpha", 1.0)) * (af @ bf) + cf).astype(f32), ys, yz, yz.dtype)
            compare(f"QGemm {title}: (info) ORT vs DequantizeLinear+float Gemm+QuantizeLinear", got, y_alt, "lsb1")


# ================================================================================= QLinearAdd / QLinearMul
def binary_cases(dt):
    shp = (2, 3, 37)
    return [
        ("same shape", q8(shp, dt), q8(shp, dt)),
        ("B scalar", q8(shp, dt), q8((), dt)),
        ("B [1,3,1] (per-channel broadcast)", q8(shp, dt), q8((1, 3, 1), dt)),
        ("B [37] (last-dim broadcast)", q8(shp, dt), q8((37,), dt)),
        ("A [3,1] vs B [2,3,37]", q8((3, 1), dt), q8(shp, dt)),
    ]


def checks_qlinear_binary():
    stats = {}
    for op in ("QLinearAdd", "QLinearMul"):
        for dt in (np.uint8, np.int8):
            for title, a, b_ in binary_cases(dt):
                for trial in range(3):
                    sa, sb, sc = (f32(v) for v in rng.uniform(0.002, 0.1, 3))
                    if op == "QLinearMul":
                        sc = f32(sa * sb * rng.uniform(20, 80))
                    za, zb, zc = (np.array(v, dt) for v in rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, 3))
                    ins = [("A", a), ("A_scale", arr(sa)), ("A_zero_point", za), ("B", b_), ("B_scale", arr(sb)),
                           ("B_zero_point", zb), ("C_scale", arr(sc)), ("C_zero_point", zc)]
                    tag = f"{op} {np.dtype(dt).name} {title} #{trial}"
                    (got,), (exp,) = ort_and_expansion(op, ins, [("C", dt)])
                    if op == "QLinearAdd":
                        compare(f"{tag}: ORT vs x86 kernel emulation (fma)", got,
                                Q.QLinearAdd_x86(a, sa, za, b_, sb, zb, sc, zc), "exact")
                        compare(f"{tag}: ORT vs DQ+Add+QuantizeLinear", got, exp, "lsb1")
                        ideal = Q.QLinearAdd(a, sa, za, b_, sb, zb, sc, zc)
                    else:
                        compare(f"{tag}: ORT vs NumPy (int product * (sa*sb/sc) + zc)", got,
                                Q.QLinearMul(a, sa, za, b_, sb, zb, sc, zc), "exact")
                        compare(f"{tag}: ORT vs Cast/Sub/Mul int32 -> Cast*R + zc -> QuantizeLinear(1)", got, exp,
                                "exact")
                        (simple,) = run_model(X.expand_model(node_model(op, ins, [("C", dt)])[0], "simple"),
                                              dict(ins))
                        d = np.abs(simple.astype(int) - got.astype(int))
                        stats.setdefault(op + " simple", [0, 0, 0])
                        stats[op + " simple"][0] += int((d > 0).sum())
                        stats[op + " simple"][1] += d.size
                        stats[op + " simple"][2] = max(stats[op + " simple"][2], int(d.max()))
                        ideal = np.clip(np.rint(sa * sb * (a.astype(np.float64) - za) * (b_.astype(np.float64) - zb)
                                                / sc) + zc, np.iinfo(dt).min, np.iinfo(dt).max)
                    d = np.abs(got.astype(int) - ideal.astype(int))
                    st = stats.setdefault(op + " ideal", [0, 0, 0])
                    st[0] += int((d > 0).sum()); st[1] += d.size; st[2] = max(st[2], int(d.max()))  # noqa: E702
    # bulk statistics of DQ+Add+Q vs ORT on a large sample
    for dt in (np.uint8, np.int8):
        n_diff = n_tot = mx = 0
        for trial in range(20):
            a, b_ = q8((20000,), dt), q8((20000,), dt)
            sa, sb, sc = (f32(v) for v in rng.uniform(0.002, 0.1, 3))
            za, zb, zc = (np.array(v, dt) for v in rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, 3))
            ins = [("A", a), ("A_scale", arr(sa)), ("A_zero_point", za), ("B", b_), ("B_scale", arr(sb)),
                   ("B_zero_point", zb), ("C_scale", arr(sc)), ("C_zero_point", zc)]
            (got,), (exp,) = ort_and_expansion("QLinearAdd", ins, [("C", dt)])
            d = np.abs(got.astype(int) - exp.astype(int))
            n_diff += int((d > 0).sum()); n_tot += d.size; mx = max(mx, int(d.max()))  # noqa: E702
        check(f"QLinearAdd {np.dtype(dt).name} DQ+Add+Q vs ORT on {n_tot} random elements: <= 1 LSB, rare",
              mx <= 1 and n_diff <= n_tot // 1000, f"{n_diff} differ ({n_diff / n_tot:.1e}), max {mx} LSB")
    for k, (n, tot, mx) in stats.items():
        check(f"(info) {k}: ORT vs {'exact-arithmetic definition' if 'ideal' in k else 'DQ+op+Q'}", True,
              f"{n}/{tot} differ, max {mx} LSB")
    # C_zero_point omitted (= 0); A/B zero points, although 'optional' in the schema, are required by ORT
    for dt in (np.uint8, np.int8):
        a, b_ = q8((4, 8), dt), q8((4, 8), dt)
        for op in ("QLinearAdd", "QLinearMul"):
            ins = [("A", a), ("A_scale", arr(0.02)), ("A_zero_point", arr(3, dt)), ("B", b_), ("B_scale", arr(0.03)),
                   ("B_zero_point", arr(-2 if dt == np.int8 else 2, dt)), ("C_scale", arr(0.5 if op == "QLinearAdd" else 2.0))]
            (got,), (exp,) = ort_and_expansion(op, ins, [("C", dt)])
            ref = (Q.QLinearAdd_x86 if op == "QLinearAdd" else Q.QLinearMul)(a, 0.02, 3, b_, 0.03, ins[5][1], ins[6][1], 0)
            compare(f"{op} {np.dtype(dt).name} with C_zero_point omitted (= 0): ORT vs NumPy", got, ref, "exact")
            compare(f"{op} {np.dtype(dt).name} with C_zero_point omitted: ORT vs expansion", got, exp,
                    "lsb1" if op == "QLinearAdd" else "exact")
        expect_error(f"QLinearAdd {np.dtype(dt).name} without A_zero_point/B_zero_point: rejected at load by ORT",
                     lambda: run_model(*node_model("QLinearAdd", [("A", a), ("A_scale", arr(0.02)), None, ("B", b_),
                                                                  ("B_scale", arr(0.03)), None, ("C_scale", arr(0.5)),
                                                                  ("C_zero_point", arr(0, dt))], [("C", dt)])),
                     "does not match")


# ================================================================================= LUT activations
def checks_lut_activations():
    for dt in (np.uint8, np.int8):
        x = np.arange(np.iinfo(dt).min, np.iinfo(dt).max + 1).astype(dt).reshape(16, 16)
        params = [(0.05, 128, 1 / 256, 0), (0.11, 30, 0.0042, 5), (0.02, 0, 0.003, 200)]
        if dt == np.int8:
            params = [(0.05, 0, 1 / 256, -128), (0.11, -30, 0.0042, -120), (0.02, 10, 0.003, 0)]
        for xs, xz, ys, yz in params:
            ins = [("X", x), ("X_scale", arr(xs)), ("X_zero_point", arr(xz, dt)), ("Y_scale", arr(ys)),
                   ("Y_zero_point", arr(yz, dt))]
            tag = f"{np.dtype(dt).name} xs={xs} xz={xz} ys={ys:.4g} yz={yz}"
            (got,), (exp,) = ort_and_expansion("QLinearSigmoid", ins, [("Y", dt)])
            compare(f"QLinearSigmoid {tag} (all 256 inputs): ORT vs NumPy (float64 sigmoid)", got,
                    Q.QLinearSigmoid(x, xs, xz, ys, yz), "lsb1")
            compare(f"QLinearSigmoid {tag}: ORT vs DQ+Sigmoid+QuantizeLinear", got, exp, "exact")
            for alpha in (None, 0.1, 1.7):
                kw = {} if alpha is None else {"alpha": alpha}
                (got,), (exp,) = ort_and_expansion("QLinearLeakyRelu", ins, [("Y", dt)], **kw)
                compare(f"QLinearLeakyRelu alpha={alpha or 'default 0.01'} {tag}: ORT vs NumPy", got,
                        Q.QLinearLeakyRelu(x, xs, xz, ys, yz, **kw), "exact")
                compare(f"QLinearLeakyRelu alpha={alpha or 'default'} {tag}: ORT vs DQ+LeakyRelu+Q", got, exp, "exact")


# ================================================================================= QLinearConcat
def checks_qlinear_concat():
    for dt in (np.uint8, np.int8):
        lo = np.iinfo(dt).min
        for axis, shapes in ((1, [(2, 3, 4), (2, 5, 4), (2, 1, 4)]), (-1, [(2, 3, 4), (2, 3, 7), (2, 3, 1)])):
            ys, yz = arr(0.04), arr(lo + 120, dt)
            trip = [(q8(shapes[0], dt), arr(0.04), arr(lo + 120, dt)),      # same params as Y: copied
                    (q8(shapes[1], dt), arr(0.013), arr(lo + 7, dt)),
                    (q8(shapes[2], dt), arr(0.11), arr(lo + 250, dt))]
            ins = [("Y_scale", ys), ("Y_zero_point", yz)]
            flat = []
            for k, (x, s, z) in enumerate(trip):
                ins += [(f"x{k}", x), (f"s{k}", s), (f"z{k}", z)]
                flat += [x, s, z]
            (got,), (exp,) = ort_and_expansion("QLinearConcat", ins, [("Y", dt)], axis=axis)
            tag = f"QLinearConcat {np.dtype(dt).name} axis={axis} (inputs: Y_scale, Y_zp, then X,scale,zp triples)"
            compare(f"{tag}: ORT vs NumPy", got, Q.QLinearConcat(ys, yz, *flat, axis=axis), "exact")
            compare(f"{tag}: ORT vs DQ each + Concat + QuantizeLinear", got, exp, "exact")
    x0, x1 = q8((2, 3), np.uint8), q8((2, 4), np.uint8)
    expect_error("QLinearConcat: inputs after Y_scale/Y_zp must be triples", lambda: run_model(*node_model(
        "QLinearConcat", [("ys", arr(0.04)), ("yz", arr(120, np.uint8)), ("x0", x0), ("s0", arr(0.02))],
        [("Y", np.uint8)], axis=1)))


# ================================================================================= pools
def checks_global_average_pool():
    for dt in (np.uint8, np.int8):
        lo = int(np.iinfo(dt).min)
        for shape, cl in (((2, 5, 7, 9), 0), ((2, 7, 9, 5), 1), ((1, 3, 13, 13), 0), ((2, 4, 1, 1), 0),
                          ((2, 6, 11), 0), ((2, 11, 6), 1)):
            x = q8(shape, dt)
            for xs, xz, ys, yz in ((0.05, lo + 128, 0.02, lo + 100), (0.013, lo + 3, 0.3, lo + 250)):
                ins = [("X", x), ("x_scale", arr(xs)), ("x_zero_point", arr(xz, dt)), ("y_scale", arr(ys)),
                       ("y_zero_point", arr(yz, dt))]
                tag = f"QLinearGlobalAveragePool {np.dtype(dt).name} {shape} channels_last={cl} xs={xs}"
                (got,), (exp,) = ort_and_expansion("QLinearGlobalAveragePool", ins, [("Y", dt)], channels_last=cl)
                compare(f"{tag}: ORT vs NumPy (int sum, * xs/(ys*n))", got,
                        Q.QLinearGlobalAveragePool(x, xs, xz, ys, yz, cl), "exact")
                compare(f"{tag}: ORT vs ReduceSum(int32)-zp*n, Cast*(xs/(ys*n)), QuantizeLinear(1,yzp)", got, exp,
                        "exact")
                (simple,) = run_model(X.expand_model(node_model("QLinearGlobalAveragePool", ins, [("Y", dt)],
                                                                channels_last=cl)[0], "simple"), dict(ins))
                compare(f"{tag}: ORT vs DQ+GlobalAveragePool+Q", got, simple, "lsb1")


def checks_average_pool():
    cfgs = [
        ("k2 s2", (2, 3, 8, 8), dict(kernel_shape=[2, 2], strides=[2, 2])),
        ("k3 s1 pads1 count_include_pad=0", (2, 3, 7, 6), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
        ("k3 s1 pads1 count_include_pad=1", (2, 3, 7, 6),
         dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)),
        ("k3 s2 ceil_mode=1", (2, 3, 8, 9), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
        ("k3x2 s2x1 asymmetric pads", (1, 4, 9, 7), dict(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 2, 0])),
        ("auto_pad SAME_UPPER k3 s2", (2, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
        ("1-D k3 s1", (2, 3, 10), dict(kernel_shape=[3])),
        ("channels_last k2 s2", (2, 8, 8, 3), dict(kernel_shape=[2, 2], strides=[2, 2], channels_last=1)),
        ("channels_last k3 pads1", (2, 7, 6, 5), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], channels_last=1)),
    ]
    for dt in (np.uint8, np.int8):
        lo = int(np.iinfo(dt).min)
        for title, shape, at in cfgs:
            x = q8(shape, dt)
            ins = [("X", x), ("x_scale", arr(0.05)), ("x_zero_point", arr(lo + 120, dt)), ("y_scale", arr(0.031)),
                   ("y_zero_point", arr(lo + 110, dt))]
            tag = f"QLinearAveragePool {np.dtype(dt).name} {title}"
            (got,), (exp,) = ort_and_expansion("QLinearAveragePool", ins, [("Y", dt)], **at)
            compare(f"{tag}: ORT vs NumPy (float window mean, round(y/ys + yzp))", got,
                    Q.QLinearAveragePool(x, 0.05, lo + 120, 0.031, lo + 110, **at), "exact")
            compare(f"{tag}: ORT vs DQ+AveragePool+Div(ys)+Add(yzp)+QuantizeLinear(1)", got, exp, "exact")
            (simple,) = run_model(X.expand_model(node_model("QLinearAveragePool", ins, [("Y", dt)], **at)[0],
                                                 "simple"), dict(ins))
            compare(f"{tag}: ORT vs DQ+AveragePool+QuantizeLinear(ys, yzp)", got, simple, "lsb1")
    # bulk: the rounding of (y/ys + yzp) vs round(y/ys) + yzp shows up about once in 1e5 outputs
    n_simple = n_exact = n_tot = 0
    for t in range(200):
        dt = (np.uint8, np.int8)[t % 2]
        lo = int(np.iinfo(dt).min)
        cl = int(t % 3 == 0)
        shape = (4, 8, 8, 6) if cl else (4, 6, 8, 8)
        at = dict(kernel_shape=[2, 2], strides=[2, 2], channels_last=cl) if t % 5 else \
            dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], channels_last=cl)
        xs, ys = (f32(v) for v in rng.uniform(0.003, 0.1, 2))
        ins = [("X", q8(shape, dt)), ("x_scale", arr(xs)), ("x_zero_point", arr(lo + int(rng.integers(0, 256)), dt)),
               ("y_scale", arr(ys)), ("y_zero_point", arr(lo + int(rng.integers(0, 256)), dt))]
        m, feeds = node_model("QLinearAveragePool", ins, [("Y", dt)], **at)
        (got,) = run_model(m, feeds)
        (e1,) = run_model(X.expand_model(m), feeds)
        (e2,) = run_model(X.expand_model(m, "simple"), feeds)
        n_exact += int((e1 != got).sum()); n_simple += int((e2 != got).sum()); n_tot += got.size  # noqa: E702
    check(f"QLinearAveragePool bulk ({n_tot} outputs): proposed expansion bit-exact", n_exact == 0,
          f"{n_exact} differ")
    check(f"(info) QLinearAveragePool bulk ({n_tot} outputs): DQ+AveragePool+QuantizeLinear(ys,yzp)", True,
          f"{n_simple} differ by 1 LSB")


# ================================================================================= QLinearSoftmax
def checks_qlinear_softmax():
    for dt in (np.uint8, np.int8):
        lo = int(np.iinfo(dt).min)
        cases = [("opset 13 axis -1 [4,10]", (4, 10), 13, -1), ("opset 13 axis 1 of [2,5,3] (not last)", (2, 5, 3), 13, 1),
                 ("opset 12 axis 1 of [2,3,4] (coerced 2-D: rows of 12)", (2, 3, 4), 12, 1),
                 ("opset 13 axis -1 [3,300]", (3, 300), 13, -1)]
        for title, shape, opset, axis in cases:
            x = q8(shape, dt)
            for xs, ys, yz in ((0.08, 1 / 256, lo), (0.3, 1 / 256, lo), (0.05, 0.003, lo), (0.08, 1 / 256, lo + 10)):
                ins = [("X", x), ("X_scale", arr(xs)), ("x_zero_point", arr(lo + 100, dt)), ("y_scale", arr(ys)),
                       ("y_zero_point", arr(yz, dt))]
                tag = f"QLinearSoftmax {np.dtype(dt).name} {title} xs={xs} ys={ys:.4g} yz={yz}"
                (got,), (lut,) = ort_and_expansion("QLinearSoftmax", ins, [("Y", dt)], opset=opset, axis=axis)
                compare(f"{tag}: ORT vs NumPy emulation (exp table, float32 sum, floor(1/ys))", got,
                        Q.QLinearSoftmax(x, xs, 0, ys, yz, opset, axis), "exact")
                compare(f"{tag}: ORT vs standard-op table form (Exp in double, ReduceSum, Floor(1/ys))", got, lut,
                        "exact")
                (simple,) = run_model(X.expand_model(node_model("QLinearSoftmax", ins, [("Y", dt)], opset=opset,
                                                                axis=axis)[0], "simple"), dict(ins))
                exact_recip = abs(1 / ys - round(1 / ys)) < 1e-6
                compare(f"{tag}: ORT vs DQ+Softmax+QuantizeLinear", got, simple,
                        "lsb1" if exact_recip else "info")
    # 'axis' absent: the schema default -1 applies for every 'opset' (the kernel's own opset-based fallback, 1 for
    # opset < 13, is dead code because ORT fills in the schema default)
    x = q8((2, 3, 4), np.uint8)
    for opset, ax in ((12, -1), (13, -1)):
        ins = [("X", x), ("X_scale", arr(0.1)), ("x_zero_point", arr(0, np.uint8)), ("y_scale", arr(1 / 256)),
               ("y_zero_point", arr(0, np.uint8))]
        (got,), (exp,) = ort_and_expansion("QLinearSoftmax", ins, [("Y", np.uint8)], opset=opset)
        compare(f"QLinearSoftmax opset={opset} without 'axis' == axis {ax}", got,
                Q.QLinearSoftmax(x, 0.1, 0, 1 / 256, 0, opset, ax), "exact")
        compare(f"QLinearSoftmax opset={opset} without 'axis': ORT vs table-form expansion", got, exp, "exact")
    # output clamp
    xi = np.array([[127, -128, -128, -128], [127, 126, -128, -128]], np.int8)
    (y,) = run_model(*node_model("QLinearSoftmax", [("X", xi), ("xs", arr(0.5)), ("xz", arr(0, np.int8)),
                                                    ("ys", arr(1 / 256)), ("yz", arr(0, np.int8))], [("Y", np.int8)],
                                 opset=13, axis=-1))
    check("QLinearSoftmax int8 output saturates at 127 (p=1 with yz=0 -> 127, not 256 wrapped)",
          y[0, 0] == 127 and y[1, 0] == 127, str(y.tolist()))


# ================================================================================= QAttention
def checks_qattention():
    Bsz, S, D, N = 2, 5, 16, 4
    xf = rng.standard_normal((Bsz, S, D)).astype(f32)
    xs, xz = Q.dyn_qparams(xf)
    x = Q.quantize(xf, xs, xz, np.uint8)
    w = q8((D, 3 * D), np.int8)
    wu = q8((D, 3 * D), np.uint8)
    bias = (0.1 * rng.standard_normal(3 * D)).astype(f32)
    mask1 = np.array([5, 3], np.int32)
    mask2 = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    cases = [
        ("int8 weight, mask_index [B] (the quantizer's form)", w, arr(0.003), arr(0, np.int8), mask1, {}),
        ("no mask", w, arr(0.003), arr(0, np.int8), None, {}),
        ("raw mask [B,S]", w, arr(0.003), arr(0, np.int8), mask2, {}),
        ("uint8 weight zp 128, unidirectional=1", wu, arr(0.003), arr(128, np.uint8), mask1, dict(unidirectional=1)),
        ("scale=0.2, mask_filter_value=-1e4", w, arr(0.003), arr(3, np.int8), mask2, dict(scale=0.2)),
    ]
    for title, wt, ws, wz, mk, at in cases:
        ins = [("input", x), ("weight", wt), ("bias", bias), ("input_scale", arr(xs)), ("weight_scale", ws),
               None if mk is None else ("mask_index", mk), ("input_zero_point", arr(xz, np.uint8)),
               ("weight_zero_point", wz)]
        (got,), (exp,) = ort_and_expansion("QAttention", ins, [("output", f32)], num_heads=N, **at)
        want = Q.QAttention(x, wt, bias, xs, ws, mk, np.uint8(xz), wz, num_heads=N, **at)[0]
        compare(f"QAttention {title}: ORT vs NumPy", got, want, ("tol", 2e-6, 1e-5))
        compare(f"QAttention {title}: ORT vs MatMulInteger+Cast+Mul+Add -> Attention(qkv, I)", got, exp,
                ("tol", 1e-6, 1e-6))
    # past / present
    past = (0.5 * rng.standard_normal((2, Bsz, N, 3, D // N))).astype(f32)
    ins = [("input", x), ("weight", w), ("bias", bias), ("input_scale", arr(xs)), ("weight_scale", arr(0.003)),
           None, ("input_zero_point", arr(xz, np.uint8)), ("weight_zero_point", arr(0, np.int8)), ("past", past)]
    (got, pres), (exp, epres) = ort_and_expansion("QAttention", ins, [("output", f32), ("present", f32)],
                                                  num_heads=N, unidirectional=1)
    want, wpres = Q.QAttention(x, w, bias, xs, arr(0.003), None, np.uint8(xz), arr(0, np.int8), past, num_heads=N,
                               unidirectional=1)
    compare("QAttention with past (unidirectional): output vs NumPy", got, want, ("tol", 2e-6, 1e-5))
    compare("QAttention present = concat(past, K/V) vs NumPy", pres, wpres, ("tol", 2e-6, 1e-5))
    compare("QAttention with past: ORT vs expansion (output)", got, exp, ("tol", 1e-6, 1e-6))
    compare("QAttention with past: ORT vs expansion (present)", pres, epres, ("tol", 1e-6, 1e-6))
    ins = [("input", x), ("weight", w), ("bias", bias), ("input_scale", arr(xs)),
           ("weight_scale", rng.uniform(0.002, 0.004, 3 * D).astype(f32)), ("mask_index", mask1),
           ("input_zero_point", arr(xz, np.uint8)), ("weight_zero_point", np.zeros(3 * D, np.int8))]
    try:
        (got,) = run_model(*node_model("QAttention", ins, [("output", f32)], num_heads=N))
        want = Q.QAttention(x, w, bias, xs, ins[4][1], mask1, np.uint8(xz), ins[7][1], num_heads=N)[0]
        # ORT's own kernel against NumPy (no second runtime here): information only where it saturates.
        compare("QAttention per-column weight_scale [3D] / weight_zero_point [3D] (schema allows it)" +
                (SATURATION_NOTE if ORT_SATURATES else ""), got, want,
                "info" if ORT_SATURATES else ("tol", 2e-6, 1e-5))
    except Exception as e:  # noqa: BLE001
        check("QAttention per-column weight_scale [3D]: rejected by the CPU kernel", True,
              str(e).splitlines()[0][:140])
    expect_error("QAttention with int8 input: no CPU kernel (input must be uint8)", lambda: run_model(*node_model(
        "QAttention", [("input", x.astype(np.int8)), ("weight", w), ("bias", bias), ("input_scale", arr(xs)),
                       ("weight_scale", arr(0.003))], [("output", f32)], num_heads=N)), "implementation")


# ================================================================================= DynamicQuantizeLSTM
def checks_dynamic_quantize_lstm():
    S, Bsz, I, H = 6, 3, 5, 4
    xf = rng.standard_normal((S, Bsz, I)).astype(f32)
    for title, dirs, direction, wdt, per_ch, extras in [
        ("forward, int8, per-tensor, B (the quantizer's form)", 1, "forward", np.int8, False, ("B",)),
        ("reverse, int8, per-channel scales, B, initial_h/c", 1, "reverse", np.int8, True, ("B", "h", "c")),
        ("bidirectional, int8, per-tensor, B, h0, c0", 2, "bidirectional", np.int8, False, ("B", "h", "c")),
        ("forward, uint8 weights zp 128, peepholes", 1, "forward", np.uint8, False, ("B", "P")),
        ("bidirectional, per-channel, clip=0.8, no B", 2, "bidirectional", np.int8, True, ("clip",)),
    ]:
        W = q8((dirs, I, 4 * H), wdt)
        Rw = q8((dirs, H, 4 * H), wdt)
        shp = (dirs, 4 * H) if per_ch else (dirs,)
        ws = rng.uniform(0.003, 0.006, shp).astype(f32)
        rs = rng.uniform(0.003, 0.006, shp).astype(f32)
        zval = 128 if wdt == np.uint8 else 0
        wz, rz = np.full(shp, zval, wdt), np.full(shp, zval, wdt)
        Bb = (0.2 * rng.standard_normal((dirs, 8 * H))).astype(f32) if "B" in extras else None
        h0 = (0.5 * rng.standard_normal((dirs, Bsz, H))).astype(f32) if "h" in extras else None
        c0 = (0.5 * rng.standard_normal((dirs, Bsz, H))).astype(f32) if "c" in extras else None
        P = (0.3 * rng.standard_normal((dirs, 3 * H))).astype(f32) if "P" in extras else None
        at = dict(hidden_size=H, direction=direction)
        if "clip" in extras:
            at["clip"] = 0.8
        ins = [("X", xf), ("W", W), ("R", Rw), None if Bb is None else ("B", Bb), None,
               None if h0 is None else ("initial_h", h0), None if c0 is None else ("initial_c", c0),
               None if P is None else ("P", P), ("W_scale", ws), ("W_zero_point", wz), ("R_scale", rs),
               ("R_zero_point", rz)]
        outs = [("Y", f32), ("Y_h", f32), ("Y_c", f32)]
        got, exp = ort_and_expansion("DynamicQuantizeLSTM", ins, outs, **at)
        want = Q.DynamicQuantizeLSTM(xf, W, Rw, Bb, None, h0, c0, P, ws, wz, rs, rz, **at)
        for k, nm in enumerate(("Y", "Y_h", "Y_c")):
            compare(f"DynamicQuantizeLSTM {title}: {nm} ORT vs NumPy", got[k], want[k], ("tol", 2e-5, 1e-4))
            compare(f"DynamicQuantizeLSTM {title}: {nm} ORT vs Scan(DynamicQuantizeLinear+MatMulInteger, gates)",
                    got[k], exp[k], ("tol", 2e-5, 1e-4))
        if title.startswith("forward, int8"):
            # what a plain LSTM on dequantized weights gives (the quantization of X / h_t is then missing)
            Wf = np.transpose(Q.dequantize(W, ws[:, None, None]), (0, 2, 1))
            Rf = np.transpose(Q.dequantize(Rw, rs[:, None, None]), (0, 2, 1))
            m, feeds = node_model("LSTM", [("X", xf), ("W", Wf), ("R", Rf), ("B", Bb)], outs, domain="",
                                  hidden_size=H)
            plain = run_model(m, feeds)
            compare("(info) DynamicQuantizeLSTM vs a float LSTM on dequantized W/R (not an expansion)", got[0],
                    plain[0], "info")


# ================================================================================= QEmbedLayerNormalization
def checks_qembed_layer_norm():
    Bsz, S, Hd, V = 2, 6, 16, 30
    ids = rng.integers(0, V, (Bsz, S)).astype(np.int32)
    seg = rng.integers(0, 2, (Bsz, S)).astype(np.int32)
    mask = np.array([[1] * 6, [1, 1, 1, 1, 0, 0]], np.int32)
    for dt in (np.uint8, np.int8):
        tabs = [q8((V, Hd), dt), q8((S + 2, Hd), dt), q8((2, Hd), dt), q8((Hd,), dt), q8((Hd,), dt)]
        scales = [arr(v) for v in (0.01, 0.02, 0.015, 0.008, 0.004)]
        zps = [np.array(v, dt) for v in rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, 5)]
        for title, with_seg, with_mask in (("segments + mask", True, True), ("no segments, no mask", False, False)):
            ins = [("input_ids", ids), ("segment_ids", seg) if with_seg else None, ("word", tabs[0]), ("pos", tabs[1]),
                   ("segemb", tabs[2]) if with_seg else None, ("gamma", tabs[3]), ("beta", tabs[4]),
                   ("mask", mask) if with_mask else None, ("ws", scales[0]), ("ps", scales[1]),
                   ("ss", scales[2]) if with_seg else None, ("gs", scales[3]), ("bs", scales[4]), ("wz", zps[0]),
                   ("pz", zps[1]), ("sz", zps[2]) if with_seg else None, ("gz", zps[3]), ("bz", zps[4])]
            got, exp = ort_and_expansion("QEmbedLayerNormalization", ins, [("out", f32), ("mask_index", np.int32)],
                                         epsilon=1e-12)
            want = Q.QEmbedLayerNormalization(ids, seg if with_seg else None, tabs[0], tabs[1],
                                              tabs[2] if with_seg else None, tabs[3], tabs[4],
                                              mask if with_mask else None, *scales, *zps, epsilon=1e-12)
            tag = f"QEmbedLayerNormalization {np.dtype(dt).name} {title}"
            compare(f"{tag}: output ORT vs NumPy", got[0], want[0], ("tol", 2e-5, 1e-5))
            compare(f"{tag}: mask_index ORT vs NumPy", got[1], want[1], "exact")
            compare(f"{tag}: output ORT vs DQ x5 + EmbedLayerNormalization", got[0], exp[0], ("tol", 2e-5, 1e-5))
            compare(f"{tag}: mask_index ORT vs expansion", got[1], exp[1], "exact")


# ================================================================================= larger shapes (vectorised paths)
def checks_larger_shapes():
    """The exact claims again on shapes that take MLAS's blocked/vectorised paths (K up to 300, N up to 200)."""
    for M, K, N in ((64, 256, 96), (33, 300, 200)):
        A = (3 * rng.standard_normal((M, K))).astype(f32)
        Bi = q8((K, N), np.int8)
        bs, bz, bias = rng.uniform(0.001, 0.01, N).astype(f32), q8(N, np.int8), rng.standard_normal(N).astype(f32)
        ins = [("A", A), ("B", Bi), ("b_scale", bs), ("b_zero_point", bz), ("bias", bias)]
        (got,), (exp,) = ort_and_expansion("DynamicQuantizeMatMul", ins, [("Y", f32)])
        compare(f"DynamicQuantizeMatMul [{M},{K}]x[{K},{N}] per-column: ORT vs NumPy", got,
                Q.DynamicQuantizeMatMul(A, Bi, bs, bz, bias), "exact")
        compare(f"DynamicQuantizeMatMul [{M},{K}]x[{K},{N}]: ORT vs expansion", got, exp, "exact")
        Au = q8((M, K), np.uint8)
        ins = [("A", Au), ("a_scale", arr(0.02)), ("a_zero_point", arr(77, np.uint8)), ("B", np.ascontiguousarray(Bi.T)),
               ("b_scale", bs), ("b_zero_point", np.zeros(N, np.int8)), ("C", rng.integers(-9000, 9000, N).astype(np.int32)),
               ("y_scale", arr(0.9)), ("y_zero_point", arr(128, np.uint8))]
        (got,), (exp,) = ort_and_expansion("QGemm", ins, [("Y", np.uint8)], transB=1)
        compare(f"QGemm [{M},{K}]x[{N},{K}]^T per-column, uint8 out: ORT vs NumPy", got,
                Q.QGemm(*[v for _, v in ins], transB=1), "exact")
        compare(f"QGemm [{M},{K}]x[{N},{K}]^T: ORT vs expansion", got, exp, "exact")
    for dt in (np.uint8, np.int8):
        a, b_ = q8((100000,), dt), q8((100000,), dt)
        ins = [("A", a), ("A_scale", arr(0.03)), ("A_zero_point", arr(7, dt)), ("B", b_), ("B_scale", arr(0.02)),
               ("B_zero_point", arr(-9 if dt == np.int8 else 200, dt)), ("C_scale", arr(0.31)), ("C_zero_point", arr(5, dt))]
        (got,), (exp,) = ort_and_expansion("QLinearMul", ins, [("C", dt)])
        compare(f"QLinearMul {np.dtype(dt).name} 1e5 elements: ORT vs NumPy", got,
                Q.QLinearMul(*[v for _, v in ins]), "exact")
        compare(f"QLinearMul {np.dtype(dt).name} 1e5 elements: ORT vs exact expansion", got, exp, "exact")
        for shape, cl in (((2, 64, 56, 56), 0), ((2, 28, 28, 64), 1)):
            x = q8(shape, dt)
            lo = int(np.iinfo(dt).min)
            ins = [("X", x), ("x_scale", arr(0.02)), ("x_zero_point", arr(lo + 99, dt)), ("y_scale", arr(0.011)),
                   ("y_zero_point", arr(lo + 130, dt))]
            (got,), (exp,) = ort_and_expansion("QLinearGlobalAveragePool", ins, [("Y", dt)], channels_last=cl)
            compare(f"QLinearGlobalAveragePool {np.dtype(dt).name} {shape} cl={cl}: ORT vs NumPy", got,
                    Q.QLinearGlobalAveragePool(x, 0.02, lo + 99, 0.011, lo + 130, cl), "exact")
            compare(f"QLinearGlobalAveragePool {np.dtype(dt).name} {shape} cl={cl}: ORT vs exact expansion", got, exp,
                    "exact")


# ================================================================================= omitted optional inputs
def child_run(model, feeds):
    """Run a model in a child process (some omitted-input cases crash ORT 1.32). -> (exit status, outputs|None)"""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        onnx.save(model, os.path.join(d, "m.onnx"))
        np.savez(os.path.join(d, "f.npz"), **feeds)
        code = ("import numpy as np, onnxruntime as ort, sys\n"
                "d = sys.argv[1]; f = dict(np.load(d + '/f.npz'))\n"
                "so = ort.SessionOptions(); so.log_severity_level = 3\n"
                "s = ort.InferenceSession(d + '/m.onnx', so, providers=['CPUExecutionProvider'])\n"
                "np.savez(d + '/o.npz', *s.run(None, f))\n")
        pr = subprocess.run([sys.executable, "-c", code, d], capture_output=True, text=True, timeout=300)
        if pr.returncode != 0:
            return pr.returncode, (pr.stderr.strip().splitlines() or [""])[-1][:160]
        o = np.load(os.path.join(d, "o.npz"))
        return 0, [o[k] for k in sorted(o.files, key=lambda k: int(k.split("_")[1]))]


def checks_omitted_optional_inputs():
    """Which zero points marked optional in the schemas ORT 1.32 really accepts (the quantizer always writes all)."""
    x4 = q8((1, 2, 4, 4), np.uint8)
    xs, ys = arr(0.05), arr(1 / 256)
    qg_b = q8((4, 3), np.int8)
    cases = [  # (title, op, inputs, attrs, expected: 'ok' | 'error' | 'crash', reference or None)
        ("QLinearSigmoid X_zero_point ''", "QLinearSigmoid", [("X", x4), ("xs", xs), None, ("ys", ys),
                                                             ("yz", arr(0, np.uint8))], {}, "ok",
         lambda: Q.QLinearSigmoid(x4, xs, 0, ys, 0)),
        ("QLinearSigmoid Y_zero_point absent", "QLinearSigmoid", [("X", x4), ("xs", xs), ("xz", arr(3, np.uint8)),
                                                                  ("ys", ys)], {}, "crash", None),
        ("QLinearLeakyRelu Y_zero_point absent", "QLinearLeakyRelu", [("X", x4), ("xs", xs),
                                                                      ("xz", arr(3, np.uint8)), ("ys", ys)], {},
         "crash", None),
        ("QLinearAdd C_zero_point absent", "QLinearAdd", [("A", x4), ("sa", xs), ("za", arr(3, np.uint8)), ("B", x4),
                                                          ("sb", xs), ("zb", arr(3, np.uint8)), ("sc", arr(0.1))], {},
         "ok", lambda: Q.QLinearAdd_x86(x4, xs, 3, x4, xs, 3, arr(0.1), 0)),
        ("QLinearAdd A_zero_point ''", "QLinearAdd", [("A", x4), ("sa", xs), None, ("B", x4), ("sb", xs),
                                                      ("zb", arr(3, np.uint8)), ("sc", arr(0.1)),
                                                      ("zc", arr(0, np.uint8))], {}, "error", None),
        ("QLinearAveragePool x_zero_point ''", "QLinearAveragePool", [("X", x4), ("xs", xs), None, ("ys", xs),
                                                                      ("yz", arr(0, np.uint8))],
         {"kernel_shape": [2, 2]}, "error", None),
        ("QLinearAveragePool y_zero_point absent", "QLinearAveragePool", [("X", x4), ("xs", xs),
                                                                          ("xz", arr(0, np.uint8)), ("ys", xs)],
         {"kernel_shape": [2, 2]}, "ok", lambda: Q.QLinearAveragePool(x4, xs, 0, xs, 0, kernel_shape=[2, 2])),
        ("QLinearSoftmax x_zero_point ''", "QLinearSoftmax", [("X", x4), ("xs", xs), None, ("ys", ys),
                                                              ("yz", arr(0, np.uint8))], {"opset": 13}, "ok",
         lambda: Q.QLinearSoftmax(x4, xs, 0, ys, 0, 13)),
        ("QLinearConcat triple with zero point ''", "QLinearConcat", [("ys", xs), ("yz", arr(0, np.uint8)),
                                                                      ("x0", x4), ("s0", xs), None, ("x1", x4),
                                                                      ("s1", xs), ("z1", arr(0, np.uint8))],
         {"axis": 1}, "crash", None),
        ("QGemm y_zero_point absent with y_scale present", "QGemm",
         [("A", x4[0, 0]), ("as", xs), ("az", arr(0, np.uint8)), ("B", qg_b), ("bs", xs),
          ("bz", arr(0, np.int8)), None, ("ys", arr(0.25))], {}, "ok",   # float Y = acc * alpha*as*bs / ys
         lambda: Q.QGemm(x4[0, 0], xs, 0, qg_b, xs, 0) / f32(0.25)),
    ]
    for title, op, ins, at, expected, ref in cases:
        m, feeds = node_model(op, ins, [("Y", f32 if op == "QGemm" else np.uint8)], **at)
        rc, res = child_run(m, feeds)
        outcome = "ok" if rc == 0 else ("error" if rc == 1 else "crash")
        detail = f"{outcome}" + ("" if rc == 0 else f" (exit {rc}: {res})")
        ok = expected in ("any", outcome)
        if ok and outcome == "ok" and ref is not None:
            want = ref()
            ok = np.array_equal(res[0], want) if res[0].dtype != np.float32 else np.allclose(res[0], want, rtol=1e-6)
            detail += ", matches the zero-point-0 reference" if ok else ", differs from the reference"
        check(f"omitted optional input: {title} -> expected {expected}", ok, detail)


# ================================================================================= the files
def reference_ops():
    """onnx.reference implementations of the float contrib ops an expansion leaves (from Whittle's contrib_ref.py)."""
    from onnx.reference.op_run import OpRun
    R = Q.R

    def wrap(op_type, fn, domain="com.microsoft"):
        def _run(self, *inputs, **kw):
            attrs = {a.name: helper.get_attribute_value(a) for a in self.onnx_node.attribute}
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
            inputs = [None if (i < len(self.onnx_node.input) and self.onnx_node.input[i] == "") else t
                      for i, t in enumerate(inputs)]
            res = fn(*inputs, **attrs)
            res = res if isinstance(res, tuple) else (res,)
            res = tuple(np.zeros((0,), f32) if r is None else r for r in res)
            return res[:len(self.onnx_node.output)]
        return type(op_type, (OpRun,), {"op_domain": domain, "_run": _run})

    def per_axis(x, t, axis):
        t = np.asarray(t)
        if t.size > 1 and x.ndim > 1:
            shape = [1] * x.ndim
            shape[1 if axis is None else axis] = -1
            return t.reshape(shape)
        return t.reshape(()) if t.size == 1 else t

    class DequantizeLinear(OpRun):      # onnx 1.23's reference has no DequantizeLinear/QuantizeLinear < 19
        op_domain = ""

        def _run(self, x, scale, zp=None, **attrs):
            ax = attrs.get("axis")
            return (Q.dequantize(x, per_axis(x, scale, ax), per_axis(x, 0 if zp is None else zp, ax)),)

    class QuantizeLinear(OpRun):
        op_domain = ""

        def _run(self, x, scale, zp=None, **attrs):
            ax = attrs.get("axis")
            z = np.asarray(np.uint8(0) if zp is None else zp)
            info = np.iinfo(z.dtype)
            q = np.rint(x.astype(f32) / per_axis(x, np.asarray(scale, f32), ax)).astype(np.int64)
            return (np.clip(q + per_axis(x, z, ax).astype(np.int64), info.min, info.max).astype(z.dtype),)

    def gather_elements(data, indices, axis=0):  # onnx.reference's GatherElements fails on the BERT graphs
        return np.take_along_axis(data, np.where(indices < 0, indices + data.shape[axis], indices), axis=axis)

    return [wrap(k, v) for k, v in R.OPS.items()] + [DequantizeLinear, QuantizeLinear,
                                                     wrap("GatherElements", gather_elements, domain="")]


def checks_models():
    paths = sorted(p for p in glob.glob(os.path.join(MODEL_DIR, "*.onnx")) if not p.endswith(".src.onnx"))
    if not paths:
        check("models present", False, f"run make_ort_quantized.py first ({MODEL_DIR})")
    for p in paths:
        name = os.path.basename(p)[:-5]
        data = np.load(p[:-5] + ".npz")
        m = onnx.load(p)
        feeds = {i.name: data[i.name] for i in m.graph.input}
        outs = run_model(m, feeds)
        for o, g in zip(m.graph.output, outs):
            compare(f"model {name}: ORT rerun of '{o.name}' vs stored", g, data["out:" + o.name], "exact")
        kinds = sorted({n.op_type for n in m.graph.node if n.domain == "com.microsoft" and n.op_type in X.EXPANDERS})
        if not kinds:
            check(f"model {name}: no quantized contrib op (nothing to expand)", True)
            continue
        em = X.expand_model(m)
        left = sorted({n.op_type for n in em.graph.node if n.domain == "com.microsoft"})
        try:
            eouts = run_model(em, feeds)
        except Exception as e:  # noqa: BLE001
            check(f"model {name}: expanded graph runs", False, str(e).splitlines()[0][:200])
            continue
        for o, g in zip(m.graph.output, eouts):
            ref = data["out:" + o.name]
            # tolerance: one LSB of a requantized intermediate can move a float output by ~1e-3 of its range
            compare(f"model {name}: expanded ({', '.join(kinds)} -> standard ops; left: {left or 'none'}) '{o.name}'"
                    f" run by ORT vs stored", g, ref, ("tol", 1e-5 + 2e-3 * float(np.abs(ref).max()), 0))
        # a second runtime: onnx.reference (float contrib ops left by the expansion from contrib_ref.py)
        from onnx.reference import ReferenceEvaluator
        try:
            routs = ReferenceEvaluator(em, new_ops=reference_ops()).run(None, feeds)
        except Exception as e:  # noqa: BLE001
            check(f"model {name}: expanded graph runs in onnx.reference", False, repr(e)[:200])
            continue
        for o, g in zip(m.graph.output, routs):
            ref = data["out:" + o.name]
            compare(f"model {name}: expanded graph run by onnx.reference '{o.name}' vs stored ORT", g, ref,
                    ("tol", 1e-5 + 2e-3 * float(np.abs(ref).max()), 0))


if __name__ == "__main__":
    print("onnxruntime", ort.__version__, "onnx", onnx.__version__, "numpy", np.__version__)
    for fn in [checks_dynamic_quantize_matmul, checks_matmul_integer_to_float, checks_qgemm, checks_qlinear_binary,
               checks_lut_activations, checks_qlinear_concat, checks_global_average_pool, checks_average_pool,
               checks_qlinear_softmax, checks_qattention, checks_dynamic_quantize_lstm, checks_qembed_layer_norm,
               checks_larger_shapes, checks_omitted_optional_inputs, second_runtime, checks_models]:
        print(f"\n--- {fn.__name__}")
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            check(fn.__name__ + " crashed", False, repr(e)[:200])
    n_fail = sum(1 for _, ok, _ in RESULTS if not ok)
    print(f"\n{len(RESULTS) - n_fail} passed, {n_fail} failed")
    sys.exit(1 if n_fail else 0)
