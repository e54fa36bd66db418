"""NumPy references of the *quantized* com.microsoft contrib ops that ONNX Runtime's quantization tool and graph
optimizer write, as ORT 1.32's CPU kernels compute them (see SEMANTICS.md).

Two kinds of reference per op where it matters:
  * the op's definition (what the expansion into standard ONNX ops computes), and
  * `*_x86`: an emulation of the arithmetic order of ORT's x86-64 kernel (float32 steps, FMA where the kernel uses
    one), used to show that the remaining differences of an expansion are the kernel's float rounding, not semantics.
Everything is float32 unless stated; rounding is round-half-to-even (np.rint) like the kernels' nearbyintf /
cvtps2dq. Integer accumulation is exact (int64 here; int32 in ORT, no overflow for these sizes).

Uses ../contrib_ref.py (Whittle's float contrib references) for Attention and EmbedLayerNormalization; the
directory of this module is searched first, then the sibling ../ort_tools.
"""
import math
import os
import sys

import numpy as np

_here = os.path.dirname(os.path.abspath(__file__))
for _p in (_here, os.path.join(_here, "..", "ort_tools")):
    if os.path.exists(os.path.join(_p, "contrib_ref.py")) and _p not in sys.path:
        sys.path.append(_p)
import contrib_ref as R  # noqa: E402

f32 = np.float32
FLT_MAX = float(np.finfo(np.float32).max)


# ----------------------------------------------------------------------------------------------------- helpers
def rhe(x):
    """round half to even (nearbyintf under the default rounding mode)"""
    return np.rint(x)


def sat(q, dtype):
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


def scalar(x, default=0):
    return default if x is None else np.asarray(x).reshape(-1)[0]


def dyn_qparams(a):
    """DynamicQuantizeLinear / GetQuantizationParameter: asymmetric uint8 over the whole tensor, range
    widened to include 0, scale 1.0 when max == min (i.e. an all-zero tensor)."""
    a = np.asarray(a, f32)
    mn = min(f32(a.min()) if a.size else f32(0), f32(0))
    mx = max(f32(a.max()) if a.size else f32(0), f32(0))
    scale = f32(1.0) if mx == mn else f32(f32(mx - mn) / f32(255))
    zp0 = f32(f32(0) - f32(mn / scale))
    zp = int(rhe(min(max(zp0, f32(0)), f32(255))))
    return scale, zp


def quantize(x, scale, zp, dtype):
    """QuantizeLinear / MlasQuantizeLinear: saturate(round_half_even(x / scale) + zp) (x / scale in float32)."""
    return sat(rhe(np.asarray(x, f32) / f32(scale)).astype(np.int64) + int(zp), dtype)


def dequantize(q, scale, zp=0):
    """DequantizeLinear: (q - zp) * scale in float32 (scale/zp may be per-axis arrays already broadcast)."""
    return ((np.asarray(q).astype(np.int64) - np.asarray(zp).astype(np.int64)).astype(f32) * np.asarray(scale, f32)
            ).astype(f32)


def int_matmul(a, b, za=0, zb=0):
    """MatMulInteger with exact integer accumulation; zb scalar or per column [N] (numpy matmul broadcasting)."""
    return np.matmul(np.asarray(a).astype(np.int64) - np.asarray(za).astype(np.int64),
                     np.asarray(b).astype(np.int64) - np.asarray(zb).astype(np.int64))


# ----------------------------------------------------------------------------------------------------- MatMuls
def MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None):
    """Y = float(Σ (A - a_zp)(B - b_zp)) * (a_scale * b_scale) + bias      (bias added AFTER scaling)"""
    za = 0 if a_zero_point is None else scalar(a_zero_point)
    zb = 0 if b_zero_point is None else np.asarray(b_zero_point)
    acc = int_matmul(A, B, za, zb)
    mult = (f32(scalar(a_scale)) * np.asarray(b_scale, f32)).astype(f32)      # scalar or [N]
    y = (acc.astype(f32) * mult).astype(f32)
    if bias is not None:
        y = (y + np.asarray(bias, f32)).astype(f32)
    return y


def DynamicQuantizeMatMul(A, B, b_scale, b_zero_point=None, bias=None):
    """A quantized exactly like DynamicQuantizeLinear (uint8, per tensor), then MatMulIntegerToFloat."""
    s, z = dyn_qparams(A)
    Aq = quantize(A, s, z, np.uint8)
    return MatMulIntegerToFloat(Aq, B, s, b_scale, np.uint8(z), b_zero_point, bias)


def QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, C=None, y_scale=None, y_zero_point=None,
          alpha=1.0, transA=0, transB=0):
    """acc = (op(A) - a_zp) @ (op(B) - b_zp) + C   (int32; C is the int32 bias, added before scaling)
    no y_scale: Y = float(acc) * (alpha * a_scale * b_scale)                       (float output)
    y_scale   : Y = saturate(round(float(acc) * (alpha * a_scale * b_scale / y_scale)) + y_zp)"""
    a = np.asarray(A).T if transA else np.asarray(A)
    b = np.asarray(B).T if transB else np.asarray(B)
    acc = int_matmul(a, b, scalar(a_zero_point), np.asarray(b_zero_point))
    if C is not None:
        acc = acc + np.asarray(C).astype(np.int64)
    m = (f32(f32(alpha) * f32(scalar(a_scale))) * np.asarray(b_scale, f32)).astype(f32)
    if y_scale is None:
        return (acc.astype(f32) * m).astype(f32)
    m = (m / f32(scalar(y_scale))).astype(f32)
    yz = np.asarray(y_zero_point)
    return sat(rhe((acc.astype(f32) * m).astype(f32)).astype(np.int64) + int(scalar(yz)), yz.dtype)


# ----------------------------------------------------------------------------------------------------- binary
def QLinearAdd(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point=None):
    """Definition: C = saturate(round((sa (A - za) + sb (B - zb)) / sc) + zc), here in float64."""
    dt = np.asarray(A).dtype
    za, zb, zc = scalar(A_zero_point), scalar(B_zero_point), scalar(C_zero_point)
    v = (float(scalar(A_scale)) * (np.asarray(A, np.float64) - za) +
         float(scalar(B_scale)) * (np.asarray(B, np.float64) - zb)) / float(scalar(C_scale))
    return sat(rhe(v).astype(np.int64) + int(zc), dt)


def _fma(x, y, z):
    # x * y is exact in float64 for an 8-bit integer x and a float32 y; one rounding to float32 like vfmadd
    return (np.asarray(x, np.float64) * np.asarray(y, np.float64) + np.asarray(z, np.float64)).astype(f32)


def QLinearAdd_x86(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point=None):
    """ORT's AVX2 kernel: rA = sa/sc, rB = sb/sc, F = zc - (rA za + rB zb);
    general: r = fma(A, rA, fma(B, rB, F)); B scalar along the innermost span: r = fma(A, rA, F + B rB);
    C = saturate(round(r))."""
    dt = np.asarray(A).dtype
    za, zb, zc = f32(scalar(A_zero_point)), f32(scalar(B_zero_point)), f32(scalar(C_zero_point))
    rA = f32(f32(scalar(A_scale)) / f32(scalar(C_scale)))
    rB = f32(f32(scalar(B_scale)) / f32(scalar(C_scale)))
    F = f32(zc - f32(f32(rA * za) + f32(rB * zb)))
    A, B = np.asarray(A), np.asarray(B)
    shape = np.broadcast_shapes(A.shape, B.shape)
    a = np.broadcast_to(A, shape).astype(f32)
    b = np.broadcast_to(B, shape).astype(f32)
    b_const_inner = B.size == 1 or (B.ndim and B.shape[-1] == 1 and shape[-1] > 1)
    a_const_inner = A.size == 1 or (A.ndim and A.shape[-1] == 1 and shape[-1] > 1)
    if b_const_inner:
        r = _fma(a, rA, (F + (b * rB).astype(f32)).astype(f32))
    elif a_const_inner:
        r = _fma(b, rB, (F + (a * rA).astype(f32)).astype(f32))
    else:
        r = _fma(a, rA, _fma(b, rB, F))
    return sat(rhe(r).astype(np.int64), dt)


def QLinearMul(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point=None):
    """ORT's kernel (x86 SSE2, also ARM64): p = (A - za)(B - zb) (int32), R = (sa * sb) / sc (float32),
    C = saturate(round(float(p) * R + zc)).  Definition: round(sa sb (A-za)(B-zb) / sc) + zc."""
    dt = np.asarray(A).dtype
    p = (np.asarray(A).astype(np.int64) - scalar(A_zero_point)) * (np.asarray(B).astype(np.int64) -
                                                                    scalar(B_zero_point))
    Rm = f32(f32(f32(scalar(A_scale)) * f32(scalar(B_scale))) / f32(scalar(C_scale)))
    r = ((p.astype(f32) * Rm).astype(f32) + f32(scalar(C_zero_point))).astype(f32)
    return sat(rhe(r).astype(np.int64), dt)


# ----------------------------------------------------------------------------------------------------- LUT ops
def sigmoid_f32(x):
    return (1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))).astype(f32)


def _lut(X, X_scale, X_zero_point, Y_scale, Y_zero_point, fn):
    """QLinearSigmoid/QLinearLeakyRelu: a 256-entry table t[v] = Q(fn(DQ(v))) applied to X."""
    X = np.asarray(X)
    dt = X.dtype
    zx = 0 if X_zero_point is None else int(scalar(X_zero_point))
    zy = 0 if Y_zero_point is None else int(scalar(Y_zero_point))
    v = np.arange(np.iinfo(dt).min, np.iinfo(dt).max + 1)
    table = quantize(fn(dequantize(v, f32(scalar(X_scale)), zx)), f32(scalar(Y_scale)), zy, dt)
    return table[X.astype(np.int64) - np.iinfo(dt).min]


def QLinearSigmoid(X, X_scale, X_zero_point, Y_scale, Y_zero_point):
    return _lut(X, X_scale, X_zero_point, Y_scale, Y_zero_point, sigmoid_f32)


def QLinearLeakyRelu(X, X_scale, X_zero_point, Y_scale, Y_zero_point, alpha=0.01):
    a = f32(alpha)
    return _lut(X, X_scale, X_zero_point, Y_scale, Y_zero_point,
                lambda x: np.where(x >= 0, x, (x * a).astype(f32)).astype(f32))


# ----------------------------------------------------------------------------------------------------- concat
def QLinearConcat(Y_scale, Y_zero_point, *inputs, axis):
    """inputs = X0, X0_scale, X0_zp, X1, ...: each X requantized to (Y_scale, Y_zp), then concatenated."""
    dt = np.asarray(Y_zero_point).dtype
    parts = []
    for i in range(0, len(inputs), 3):
        x, s, z = inputs[i:i + 3]
        parts.append(quantize(dequantize(x, f32(scalar(s)), scalar(z)), f32(scalar(Y_scale)), scalar(Y_zero_point), dt))
    return np.concatenate(parts, axis=axis)


# ----------------------------------------------------------------------------------------------------- pools
def QLinearGlobalAveragePool(X, x_scale, x_zero_point, y_scale, y_zero_point, channels_last=0):
    """sum = Σ_spatial X (int32); Y = saturate(round(float(sum - x_zp * n) * (x_scale / (y_scale * n))) + y_zp)"""
    X = np.asarray(X)
    r = X.ndim
    axes = tuple(range(1, r - 1)) if channels_last else tuple(range(2, r))
    n = int(np.prod([X.shape[a] for a in axes]))
    acc = X.astype(np.int64).sum(axis=axes, keepdims=True) - int(scalar(x_zero_point)) * n
    m = f32(f32(scalar(x_scale)) / f32(f32(scalar(y_scale)) * f32(n)))
    return sat(rhe((acc.astype(f32) * m).astype(f32)).astype(np.int64) + int(scalar(y_zero_point)), X.dtype)


def _pool_geometry(in_sp, kernel, strides, pads, ceil_mode, auto_pad):
    nd = len(in_sp)
    strides = list(strides) if strides else [1] * nd
    pads = list(pads) if pads else [0] * (2 * nd)
    out = []
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * nd)
        for i in range(nd):
            o = -(-in_sp[i] // strides[i])
            tot = max(0, (o - 1) * strides[i] + kernel[i] - in_sp[i])
            if auto_pad == "SAME_UPPER":
                pads[i], pads[i + nd] = tot // 2, tot - tot // 2
            else:
                pads[i], pads[i + nd] = tot - tot // 2, tot // 2
            out.append(o)
    elif auto_pad == "VALID":
        pads = [0] * (2 * nd)
        out = [-(-(in_sp[i] - kernel[i] + 1) // strides[i]) for i in range(nd)]
    else:
        for i in range(nd):
            num = in_sp[i] + pads[i] + pads[i + nd] - kernel[i]
            o = (-(-num // strides[i]) if ceil_mode else num // strides[i]) + 1
            if ceil_mode and (o - 1) * strides[i] >= in_sp[i] + pads[i]:
                o -= 1
            out.append(o)
    return out, strides, pads


def QLinearAveragePool(X, x_scale, x_zero_point, y_scale, y_zero_point, kernel_shape, strides=None, pads=None,
                       ceil_mode=0, count_include_pad=0, channels_last=0, auto_pad="NOTSET"):
    """Dequantize, average over each window in float32 (sequential sum, / count), y = round(avg / y_scale + y_zp).
    count = window size incl. pads if count_include_pad else the in-bounds count."""
    X = np.asarray(X)
    dt = X.dtype
    if channels_last:
        X = np.moveaxis(X, -1, 1)
    xf = dequantize(X, f32(scalar(x_scale)), scalar(x_zero_point))
    N, C = X.shape[:2]
    sp = list(X.shape[2:])
    nd = len(sp)
    out_sp, strides, pads = _pool_geometry(sp, list(kernel_shape), strides, pads, ceil_mode, auto_pad)
    Y = np.zeros((N, C) + tuple(out_sp), dt)
    ys, yz = f32(scalar(y_scale)), f32(scalar(y_zero_point))
    for idx in np.ndindex(*out_sp):
        lo = [idx[i] * strides[i] - pads[i] for i in range(nd)]
        hi = [min(lo[i] + kernel_shape[i], sp[i]) for i in range(nd)]
        hi_pad = [min(lo[i] + kernel_shape[i], sp[i] + pads[i + nd]) for i in range(nd)]
        lo_c = [max(v, 0) for v in lo]
        win = xf[(slice(None), slice(None)) + tuple(slice(lo_c[i], hi[i]) for i in range(nd))]
        flat = win.reshape(N, C, -1)
        s = np.zeros((N, C), f32)
        for k in range(flat.shape[2]):                       # sequential float32 sum like the kernel
            s = (s + flat[:, :, k]).astype(f32)
        if count_include_pad:
            cnt = int(np.prod([hi_pad[i] - lo[i] for i in range(nd)]))
        else:
            cnt = int(np.prod([hi[i] - lo_c[i] for i in range(nd)]))
        avg = (s / f32(cnt)).astype(f32)
        q = rhe(((avg / ys).astype(f32) + yz).astype(f32)).astype(np.int64)
        Y[(slice(None), slice(None)) + idx] = sat(q, dt)
    return np.moveaxis(Y, 1, -1) if channels_last else Y


# ----------------------------------------------------------------------------------------------------- softmax
def QLinearSoftmax(X, X_scale, x_zero_point, y_scale, y_zero_point=None, opset=13, axis=None):
    """ORT's kernel, bit for bit: per row of D values (D = dim[axis] for opset >= 13, else the product of the dims
    from axis on), with d = x - max(row) in [-255, 0] (x_zero_point is irrelevant):
        C  = max(0, ln(FLT_MAX / D) - 5)                      (double)
        e  = float32(exp((d + C / x_scale) * x_scale))         (double exp, a 256-entry table in the kernel)
        S  = Σ e      (float32, left to right)
        y  = saturate(round((e * floor(1 / y_scale)) / S) + y_zp)   (float32; upper clamp 255 / 127)
    Note floor(1/y_scale): exact quantization only when 1/y_scale is an integer (1/256 as the quantizer writes)."""
    X = np.asarray(X)
    dt = X.dtype
    if axis is None:
        axis = -1                 # schema default for every 'opset' (ORT fills it in)
    axis = axis % X.ndim
    if opset < 13:
        rows = X.reshape(int(np.prod(X.shape[:axis], dtype=np.int64)), -1)
        moved = None
    else:
        moved = np.moveaxis(X, axis, -1)
        rows = moved.reshape(-1, X.shape[axis])
    D = rows.shape[1]
    xs = float(f32(scalar(X_scale)))
    C = max(0.0, math.log(FLT_MAX / D) - 5) / xs
    Ys = f32(math.floor(f32(1.0) / f32(scalar(y_scale))))
    yz = int(scalar(y_zero_point))
    out = np.empty(rows.shape, dt)
    for r in range(rows.shape[0]):
        d = rows[r].astype(np.int64) - rows[r].astype(np.int64).max()
        e = np.array([math.exp((float(v) + C) * xs) for v in d]).astype(f32)
        S = f32(0)
        for v in e:
            S = f32(S + v)
        q = rhe(((e * Ys).astype(f32) / S).astype(f32)).astype(np.int64) + yz
        out[r] = sat(q, dt)
    if opset < 13:
        return out.reshape(X.shape)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def QLinearSoftmax_float(X, X_scale, x_zero_point, y_scale, y_zero_point=None, opset=13, axis=None):
    """What DequantizeLinear -> Softmax -> QuantizeLinear computes (float64 softmax), for comparison."""
    X = np.asarray(X)
    if axis is None:
        axis = -1
    axis = axis % X.ndim
    x = dequantize(X, scalar(X_scale), scalar(x_zero_point)).astype(np.float64)
    if opset < 13:
        x2 = x.reshape(int(np.prod(X.shape[:axis], dtype=np.int64)), -1)
        p = np.exp(x2 - x2.max(1, keepdims=True))
        p = (p / p.sum(1, keepdims=True)).reshape(X.shape)
    else:
        p = np.exp(x - x.max(axis, keepdims=True))
        p = p / p.sum(axis, keepdims=True)
    return quantize(p.astype(f32), scalar(y_scale), scalar(y_zero_point), X.dtype)


# ----------------------------------------------------------------------------------------------------- QAttention
def QAttention(input, weight, bias, input_scale, weight_scale, mask_index=None, input_zero_point=None,
               weight_zero_point=None, past=None, **attrs):
    """qkv = float(Σ (input - izp)(weight - wzp)) * (input_scale * weight_scale) + bias, then Attention's
    computation from the projected [Q|K|V] on (contrib_ref.Attention with an identity weight)."""
    qkv = MatMulIntegerToFloat(input, weight, input_scale, weight_scale, input_zero_point, weight_zero_point, bias)
    eye = np.eye(qkv.shape[-1], dtype=f32)
    return R.Attention(qkv, eye, None, mask_index, past, **attrs)


# ----------------------------------------------------------------------------------------------------- LSTM
def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def DynamicQuantizeLSTM(X, W, R_, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None,
                        W_scale=None, W_zero_point=None, R_scale=None, R_zero_point=None, hidden_size=None,
                        direction="forward", clip=None, input_forget=0, activations=None, **_):
    """ONNX LSTM (gates i, o, f, c; default activations) whose two GEMMs are dynamically quantized:
      XW  = DynamicQuantizeMatMul(X as [S*B, I] (one set of params for the whole sequence), W[d])   per direction
      per step t: hR = DynamicQuantizeMatMul(H_{t-1} [B, H], R[d])       (H_{t-1} requantized every step)
      gates = (XW[t] + hR) (+ P * c) + (Wb + Rb); i=σ, f=σ, g=tanh; c = f c + i g; o = σ(o (+ P_o c)); h = o tanh(c)
    W: [dirs, I, 4H] int8/uint8 (TRANSPOSED vs ONNX LSTM), R: [dirs, H, 4H]; scales/zps [dirs] or [dirs, 4H].
    Only the first element of each direction's zero point is used (per-channel zp must be constant).
    Activations in float64 here (the kernel: float32 MLAS), so compare with a tolerance."""
    assert sequence_lens is None and activations is None and not input_forget, "not modelled"
    X = np.asarray(X, f32)
    S, Bt, I = X.shape
    Hs = hidden_size
    dirs = 2 if direction == "bidirectional" else 1
    Y = np.zeros((S, dirs, Bt, Hs), f32)
    Yh = np.zeros((dirs, Bt, Hs), f32)
    Yc = np.zeros((dirs, Bt, Hs), f32)
    for d in range(dirs):
        rev = direction == "reverse" or d == 1
        xd = X[::-1] if rev else X
        ws = np.asarray(W_scale, f32).reshape(dirs, -1)[d]
        rs = np.asarray(R_scale, f32).reshape(dirs, -1)[d]
        wz = np.asarray(W_zero_point).reshape(dirs, -1)[d][0]
        rz = np.asarray(R_zero_point).reshape(dirs, -1)[d][0]
        xw = DynamicQuantizeMatMul(xd.reshape(S * Bt, I), W[d], ws if ws.size > 1 else ws[0], wz)
        xw = xw.reshape(S, Bt, 4 * Hs)
        if B is not None:
            bsum = (np.asarray(B, f32)[d, :4 * Hs] + np.asarray(B, f32)[d, 4 * Hs:]).astype(f32)
        else:
            bsum = np.zeros(4 * Hs, f32)
        h = np.zeros((Bt, Hs), f32) if initial_h is None else np.asarray(initial_h, f32)[d]
        c = np.zeros((Bt, Hs), f32) if initial_c is None else np.asarray(initial_c, f32)[d]
        p = None if P is None else np.asarray(P, f32)[d]
        for t in range(S):
            hr = DynamicQuantizeMatMul(h, R_[d], rs if rs.size > 1 else rs[0], rz)
            g = (xw[t] + hr).astype(f32)
            gi, go, gf, gc = (g[:, k * Hs:(k + 1) * Hs].astype(np.float64) for k in range(4))
            bi, bo, bf, bc = (bsum[k * Hs:(k + 1) * Hs] for k in range(4))
            if p is not None:
                gi = gi + p[:Hs] * c
                gf = gf + p[2 * Hs:] * c
            gi, gf, gc = gi + bi, gf + bf, gc + bc
            if clip is not None:
                gi, gf, gc = (np.clip(v, -clip, clip) for v in (gi, gf, gc))
            i, f, gg = _sig(gi), _sig(gf), np.tanh(gc)
            c = (f * c + i * gg).astype(f32)
            if p is not None:
                go = go + p[Hs:2 * Hs] * c
            go = go + bo
            if clip is not None:
                go = np.clip(go, -clip, clip)
            h = (_sig(go) * np.tanh(c.astype(np.float64))).astype(f32)
            Y[S - 1 - t if rev else t, d] = h
        Yh[d], Yc[d] = h, c
    return Y, Yh, Yc


# ----------------------------------------------------------------------------------------------------- QEmbedLN
def QEmbedLayerNormalization(input_ids, segment_ids, word_embedding_quant, position_embedding_quant,
                             segment_embedding, gamma_quant, beta_quant, mask, word_embedding_scale,
                             position_embedding_scale, segment_embedding_scale, gamma_scale, beta_scale,
                             word_embedding_zero_point, position_embedding_zero_point, segment_embedding_zero_point,
                             gamma_zero_point, beta_zero_point, epsilon=1e-12):
    """Dequantize the five tables (per tensor), then EmbedLayerNormalization (positions = 0..S-1, no
    position_ids input). Outputs: (layernorm_out, mask_index) - mask_index = count of mask == 1 per row."""
    def dq(q, s, z):
        return None if q is None else dequantize(q, scalar(s), scalar(z))
    return R.EmbedLayerNormalization(
        input_ids, segment_ids, dq(word_embedding_quant, word_embedding_scale, word_embedding_zero_point),
        dq(position_embedding_quant, position_embedding_scale, position_embedding_zero_point),
        dq(segment_embedding, segment_embedding_scale, segment_embedding_zero_point),
        dq(gamma_quant, gamma_scale, gamma_zero_point), dq(beta_quant, beta_scale, beta_zero_point),
        mask, None, epsilon=epsilon)[:2]
