"""The proposed standard-ONNX expansions of ORT's quantized com.microsoft ops, as onnx.helper graph rewrites.

expand_model(model, variant="exact") replaces every quantized contrib node (keys of EXPANDERS) by standard ONNX
nodes (opset 13-17 forms: ReduceSum takes axes as an input, ReduceMax/ReduceMean an attribute). The only non-
standard nodes an expansion writes are the float contrib ops Whittle already reads: QAttention -> ... ->
com.microsoft Attention (fed the already projected Q|K|V and an identity weight), QEmbedLayerNormalization ->
DequantizeLinear x5 -> com.microsoft EmbedLayerNormalization. Everything is computed in-graph (scales/zero points
may be graph inputs); a loader with constant scales can fold those sub-graphs.

variant: "exact"  - the expansion SEMANTICS.md proposes (bit-exact where stated there; QLinearAdd has no exact
                    form and is always DequantizeLinear -> Add -> QuantizeLinear),
         "simple" - the textbook DequantizeLinear -> float op -> QuantizeLinear form where it differs (QLinearMul,
                    QLinearGlobalAveragePool, QLinearAveragePool, QLinearSoftmax), for comparison.
"""
import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

MS = "com.microsoft"
NP2TP = {np.dtype(np.uint8): TP.UINT8, np.dtype(np.int8): TP.INT8, np.dtype(np.float32): TP.FLOAT,
         np.dtype(np.int32): TP.INT32, np.dtype(np.int64): TP.INT64, np.dtype(np.float64): TP.DOUBLE}


class Builder:
    """Collects the nodes/initializers of one expansion; names are prefixed with the replaced node's name."""

    def __init__(self, prefix, dtype_of):
        self.prefix = prefix
        self.nodes, self.inits = [], []
        self.n = 0
        self.dtype_of = dtype_of

    def name(self, hint):
        self.n += 1
        return f"{self.prefix}/{hint}_{self.n}"

    def const(self, value, hint="c"):
        nm = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value), nm))
        return nm

    def op(self, op_type, inputs, hint=None, out=None, n_out=1, domain="", **attrs):
        outs = out if out is not None else [self.name(hint or op_type) for _ in range(n_out)]
        if isinstance(outs, str):
            outs = [outs]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.name(op_type), domain=domain,
                                           **attrs))
        return outs[0] if len(outs) == 1 else outs

    # small helpers
    def cast(self, x, to):
        return self.op("Cast", [x], to=to)

    def zero_of(self, dt):
        return self.const(np.array(0, dt), "zero")

    def quantize(self, x, scale, zp, dt, out=None):
        """QuantizeLinear that always yields dtype dt (a missing zero point becomes 0 of dt)."""
        return self.op("QuantizeLinear", [x, scale, zp or self.zero_of(dt)], out=out)


def _in(node, i):
    return node.input[i] if len(node.input) > i and node.input[i] else None


def _attrs(node):
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _int_mm_to_float(b, A, Bm, azp, bzp, scale, bias=None, out=None):
    """float(MatMulInteger(A, B, azp, bzp)) * scale (+ bias)  (scale: float32 scalar or [N])"""
    acc = b.op("MatMulInteger", [A, Bm] + ([azp or "", bzp] if bzp else ([azp] if azp else [])))
    y = b.op("Mul", [b.cast(acc, TP.FLOAT), scale], out=None if bias else out)
    if bias:
        y = b.op("Add", [y, bias], out=out)
    return y


# ------------------------------------------------------------------------------------------------ matmuls
def expand_DynamicQuantizeMatMul(b, node, variant):
    A, Bm, bs, bzp, bias = (_in(node, i) for i in range(5))
    aq, as_, azp = b.op("DynamicQuantizeLinear", [A], n_out=3)
    _int_mm_to_float(b, aq, Bm, azp, bzp, b.op("Mul", [as_, bs]), bias, out=node.output[0])


def expand_MatMulIntegerToFloat(b, node, variant):
    A, Bm, as_, bs, azp, bzp, bias = (_in(node, i) for i in range(7))
    _int_mm_to_float(b, A, Bm, azp, bzp, b.op("Mul", [as_, bs]), bias, out=node.output[0])


def expand_QGemm(b, node, variant):
    A, as_, azp, Bm, bs, bzp, C, ys, yzp = (_in(node, i) for i in range(9))
    at = _attrs(node)
    if at.get("transA", 0):
        A = b.op("Transpose", [A], perm=[1, 0])
    if at.get("transB", 0):
        Bm = b.op("Transpose", [Bm], perm=[1, 0])
    acc = b.op("MatMulInteger", [A, Bm, azp, bzp])
    if C:
        acc = b.op("Add", [acc, C])                                   # int32 bias before scaling
    m = b.op("Mul", [b.op("Mul", [b.const(np.float32(at.get("alpha", 1.0)), "alpha"), as_]), bs])
    if ys:
        m = b.op("Div", [m, ys])
        y = b.op("Mul", [b.cast(acc, TP.FLOAT), m])
        b.quantize(y, b.const(np.float32(1.0), "one"), yzp, b.dtype_of(yzp), out=node.output[0])
    else:
        b.op("Mul", [b.cast(acc, TP.FLOAT), m], out=node.output[0])


# ------------------------------------------------------------------------------------------------ element-wise
def _dq(b, x, s, z):
    return b.op("DequantizeLinear", [x, s] + ([z] if z else []))


def expand_QLinearAdd(b, node, variant):
    A, sa, za, Bm, sb, zb, sc, zc = (_in(node, i) for i in range(8))
    y = b.op("Add", [_dq(b, A, sa, za), _dq(b, Bm, sb, zb)])
    b.quantize(y, sc, zc, b.dtype_of(A), out=node.output[0])


def expand_QLinearMul(b, node, variant):
    A, sa, za, Bm, sb, zb, sc, zc = (_in(node, i) for i in range(8))
    dt = b.dtype_of(A)
    if variant == "simple":
        y = b.op("Mul", [_dq(b, A, sa, za), _dq(b, Bm, sb, zb)])
        b.quantize(y, sc, zc, dt, out=node.output[0])
        return

    def centred(x, z):
        x32 = b.cast(x, TP.INT32)
        return b.op("Sub", [x32, b.cast(z, TP.INT32)]) if z else x32
    p = b.op("Mul", [centred(A, za), centred(Bm, zb)])                            # int32, exact
    r = b.op("Div", [b.op("Mul", [sa, sb]), sc])                                  # (sa*sb)/sc in float32
    y = b.op("Mul", [b.cast(p, TP.FLOAT), r])
    if zc:
        y = b.op("Add", [y, b.cast(zc, TP.FLOAT)])
    b.quantize(y, b.const(np.float32(1.0), "one"), None, dt, out=node.output[0])  # round-half-even + saturate


def _lut_unary(float_op, **fattrs):
    def expand(b, node, variant):
        X, xs, xz, ys, yz = (_in(node, i) for i in range(5))
        at = _attrs(node)
        if float_op == "LeakyRelu":
            fattrs_ = {"alpha": at.get("alpha", 0.01)}
        else:
            fattrs_ = dict(fattrs)
        y = b.op(float_op, [_dq(b, X, xs, xz)], **fattrs_)
        b.quantize(y, ys, yz, b.dtype_of(X), out=node.output[0])
    return expand


def expand_QLinearConcat(b, node, variant):
    ys, yz = node.input[0], node.input[1]
    parts = [_dq(b, node.input[i], node.input[i + 1], node.input[i + 2] if len(node.input) > i + 2 else None)
             for i in range(2, len(node.input), 3)]
    y = b.op("Concat", parts, axis=_attrs(node)["axis"])
    b.quantize(y, ys, yz, b.dtype_of(yz), out=node.output[0])


# ------------------------------------------------------------------------------------------------ pools
def _spatial_axes(b, X, channels_last):
    """int64 [rank-2] tensor of the spatial axes of X (computed from its shape, so no static rank is needed)"""
    r = b.op("Size", [b.op("Shape", [X])])
    if channels_last:
        return b.op("Range", [b.const(np.int64(1)), b.op("Sub", [r, b.const(np.int64(1))]), b.const(np.int64(1))])
    return b.op("Range", [b.const(np.int64(2)), r, b.const(np.int64(1))])


def expand_QLinearGlobalAveragePool(b, node, variant):
    X, xs, xz, ys, yz = (_in(node, i) for i in range(5))
    cl = _attrs(node).get("channels_last", 0)
    axes = _spatial_axes(b, X, cl)
    n = b.op("ReduceProd", [b.op("Gather", [b.op("Shape", [X]), axes])], keepdims=0)   # spatial size
    dt = b.dtype_of(X)
    if variant == "simple":
        xf = _dq(b, X, xs, xz)
        if cl:
            y = b.op("Div", [b.op("ReduceSum", [xf, axes], keepdims=1), b.cast(n, TP.FLOAT)])
        else:
            y = b.op("GlobalAveragePool", [xf])
        b.quantize(y, ys, yz, dt, out=node.output[0])
        return
    s = b.op("ReduceSum", [b.cast(X, TP.INT32), axes], keepdims=1)                     # exact int32 sum
    if xz:
        s = b.op("Sub", [s, b.op("Mul", [b.cast(xz, TP.INT32), b.cast(n, TP.INT32)])])
    m = b.op("Div", [xs, b.op("Mul", [ys, b.cast(n, TP.FLOAT)])])                       # xs / (ys * n)
    y = b.op("Mul", [b.cast(s, TP.FLOAT), m])
    b.quantize(y, b.const(np.float32(1.0), "one"), yz, dt, out=node.output[0])


def expand_QLinearAveragePool(b, node, variant):
    X, xs, xz, ys, yz = (_in(node, i) for i in range(5))
    at = _attrs(node)
    cl = at.pop("channels_last", 0)
    rank = len(at["kernel_shape"]) + 2
    xf = _dq(b, X, xs, xz)
    if cl:
        xf = b.op("Transpose", [xf], perm=[0, rank - 1] + list(range(1, rank - 1)))
    at.setdefault("count_include_pad", 0)
    y = b.op("AveragePool", [xf], **at)
    if cl:
        y = b.op("Transpose", [y], perm=[0] + list(range(2, rank)) + [1])
    if variant == "simple":
        b.quantize(y, ys, yz, b.dtype_of(X), out=node.output[0])
        return
    # the kernel rounds (y / y_scale + y_zp), not round(y / y_scale) + y_zp: add the zero point before rounding
    y = b.op("Div", [y, ys])
    if yz:
        y = b.op("Add", [y, b.cast(yz, TP.FLOAT)])
    b.quantize(y, b.const(np.float32(1.0), "one"), None, b.dtype_of(X), out=node.output[0])


# ------------------------------------------------------------------------------------------------ softmax
def expand_QLinearSoftmax(b, node, variant):
    X, xs, xz, ys, yz = (_in(node, i) for i in range(5))
    at = _attrs(node)
    opset = at["opset"]
    axis = at.get("axis", -1)        # schema default -1 for every 'opset' (ORT fills it in before the kernel looks)
    dt = b.dtype_of(X)
    x_in = X
    if opset < 13:                                        # coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])]
        x_in = b.op("Flatten", [X], axis=axis)
        red_axis = 1
    else:
        red_axis = axis
    if variant != "simple":            # the kernel's algorithm (exp table, float32 sum, floor(1/y_scale))
        xi = b.cast(x_in, TP.INT32)
        d = b.op("Sub", [xi, b.op("ReduceMax", [xi], axes=[red_axis], keepdims=1)])      # x - max in [-255, 0]
        D = b.cast(b.op("Gather", [b.op("Shape", [x_in]), b.const(np.array(red_axis, np.int64))]), TP.DOUBLE)
        xsd = b.cast(xs, TP.DOUBLE)
        C = b.op("Max", [b.op("Sub", [b.op("Log", [b.op("Div", [b.const(np.float64(np.finfo(np.float32).max)),
                                                                   D])]), b.const(np.float64(5))]),
                        b.const(np.float64(0))])
        t = b.op("Mul", [b.op("Add", [b.cast(d, TP.DOUBLE), b.op("Div", [C, xsd])]), xsd])
        e = b.cast(b.op("Exp", [t]), TP.FLOAT)                                   # float32(exp(double))
        S = b.op("ReduceSum", [e, b.const(np.array([red_axis], np.int64))], keepdims=1)
        Ys = b.op("Floor", [b.op("Div", [b.const(np.float32(1.0)), ys])])
        q = b.op("Div", [b.op("Mul", [e, Ys]), S])
        yq = b.quantize(q, b.const(np.float32(1.0), "one"), yz, dt)
    else:
        p = b.op("Softmax", [_dq(b, x_in, xs, xz)], axis=red_axis)
        yq = b.quantize(p, ys, yz, dt)
    if opset < 13:
        b.op("Reshape", [yq, b.op("Shape", [X])], out=node.output[0])
    else:
        b.op("Identity", [yq], out=node.output[0])


# ------------------------------------------------------------------------------------------------ QAttention
def expand_QAttention(b, node, variant):
    inp, w, bias, is_, ws, mask, izp, wzp, past = (_in(node, i) for i in range(9))
    qkv = _int_mm_to_float(b, inp, w, izp, wzp, b.op("Mul", [is_, ws]), bias)
    n = b.op("Gather", [b.op("Shape", [w]), b.const(np.array([1], np.int64))])          # [3D]
    eye = b.op("EyeLike", [b.op("ConstantOfShape", [b.op("Concat", [n, n], axis=0)],
                                value=numpy_helper.from_array(np.array([0], np.float32)))])
    attrs = _attrs(node)
    ins = [qkv, eye, "", mask or "", past or ""]
    while ins and ins[-1] == "":
        ins.pop()
    b.op("Attention", ins, out=list(node.output), domain=MS, **attrs)


# ------------------------------------------------------------------------------------------------ QEmbedLayerNorm
def expand_QEmbedLayerNormalization(b, node, variant):
    g = [_in(node, i) for i in range(18)]
    ids, seg, wq, pq, sq, gq, bq, mask = g[:8]
    wsc, psc, ssc, gsc, bsc, wz, pz, sz, gz, bz = g[8:]
    ins = [ids, seg or "", _dq(b, wq, wsc, wz), _dq(b, pq, psc, pz), _dq(b, sq, ssc, sz) if sq else "",
           _dq(b, gq, gsc, gz), _dq(b, bq, bsc, bz), mask or ""]
    while ins[-1] == "":
        ins.pop()
    b.op("EmbedLayerNormalization", ins, out=list(node.output), domain=MS, **_attrs(node))


# ------------------------------------------------------------------------------------------------ LSTM
def expand_DynamicQuantizeLSTM(b, node, variant):
    """One ONNX Scan over time per direction; a reverse direction scans XW reversed with Slice(step -1) and reverses
    its outputs back (the X quantization is over the whole [S*B, I] input, so it does not depend on the direction;
    Slice is used instead of Scan's scan_*_directions, which some runtimes lack). sequence_lens must be absent."""
    X, W, R, Bb, seql, h0, c0, P, ws, wz, rs, rz = (_in(node, i) for i in range(12))
    assert seql is None, "sequence_lens not expanded"
    at = _attrs(node)
    H = at["hidden_size"]
    direction = at.get("direction", "forward")
    assert "activations" not in at and not at.get("input_forget", 0), "only default activations"
    clip = at.get("clip")
    dirs = 2 if direction == "bidirectional" else 1
    i64 = lambda v: b.const(np.array(v, np.int64))  # noqa: E731
    shp = b.op("Shape", [X])                                                        # [S, B, I]
    x2 = b.op("Reshape", [X, b.op("Concat", [i64([-1]), b.op("Slice", [shp, i64([2]), i64([3])])], axis=0)])
    xq, xs, xz = b.op("DynamicQuantizeLinear", [x2], n_out=3)                      # one set of params for all S*B
    Ys, Yhs, Ycs = [], [], []
    for d in range(dirs):
        rev = direction == "reverse" or d == 1
        di = i64(d)
        Wd, Rd = b.op("Gather", [W, di]), b.op("Gather", [R, di])                # [I, 4H], [H, 4H]
        wsd, rsd = b.op("Gather", [ws, di]), b.op("Gather", [rs, di])                # scalar or [4H]
        # the kernel uses only the first zero-point element of each direction
        wzd = b.op("Gather", [b.op("Reshape", [b.op("Gather", [wz, di]), i64([-1])]), i64(0)])
        rzd = b.op("Gather", [b.op("Reshape", [b.op("Gather", [rz, di]), i64([-1])]), i64(0)])
        xw = _int_mm_to_float(b, xq, Wd, xz, wzd, b.op("Mul", [xs, wsd]))            # [S*B, 4H]
        xw = b.op("Reshape", [xw, b.op("Concat", [b.op("Slice", [shp, i64([0]), i64([2])]), i64([4 * H])], axis=0)])
        if Bb:
            Bd = b.op("Gather", [Bb, di])
            bsum = b.op("Add", [b.op("Slice", [Bd, i64([0]), i64([4 * H])]),
                                b.op("Slice", [Bd, i64([4 * H]), i64([8 * H])])])    # Wb + Rb
            bsplit = b.op("Split", [bsum, i64([H] * 4)], n_out=4, axis=0)
        Pd = b.op("Split", [b.op("Gather", [P, di]), i64([H] * 3)], n_out=3, axis=0) if P else None
        z_bh = b.op("ConstantOfShape", [b.op("Concat", [b.op("Slice", [shp, i64([1]), i64([2])]), i64([H])], axis=0)],
                    value=numpy_helper.from_array(np.array([0], np.float32)))         # [B, H] zeros
        hinit = b.op("Gather", [h0, di]) if h0 else z_bh
        cinit = b.op("Gather", [c0, di]) if c0 else z_bh
        # ---- Scan body: state (h, c), scan input XW[t] [B, 4H], scan output h
        body = Builder(f"{b.prefix}/d{d}", b.dtype_of)
        h_in, c_in, xw_t = (f"{body.prefix}/{v}" for v in ("h_prev", "c_prev", "xw_t"))
        o_h, o_c, o_scan = (f"{body.prefix}/{v}" for v in ("h_new", "c_new", "h_scan"))
        hq, hs, hz = body.op("DynamicQuantizeLinear", [h_in], n_out=3)              # H_{t-1} requantized per step
        hr = _int_mm_to_float(body, hq, Rd, hz, rzd, body.op("Mul", [hs, rsd]))
        gsum = body.op("Add", [xw_t, hr])
        gi, go, gf, gc = body.op("Split", [gsum, body.const(np.array([H] * 4, np.int64))], n_out=4, axis=1)
        if Pd:
            gi = body.op("Add", [gi, body.op("Mul", [Pd[0], c_in])])
            gf = body.op("Add", [gf, body.op("Mul", [Pd[2], c_in])])
        if Bb:
            gi, gf, gc = (body.op("Add", [g, bb]) for g, bb in ((gi, bsplit[0]), (gf, bsplit[2]), (gc, bsplit[3])))
        if clip is not None:
            cl = (body.const(np.float32(-clip)), body.const(np.float32(clip)))
            gi, gf, gc = (body.op("Clip", [g, *cl]) for g in (gi, gf, gc))
        i_, f_, g_ = body.op("Sigmoid", [gi]), body.op("Sigmoid", [gf]), body.op("Tanh", [gc])
        c_new = body.op("Add", [body.op("Mul", [f_, c_in]), body.op("Mul", [i_, g_])], out=o_c)
        if Pd:
            go = body.op("Add", [go, body.op("Mul", [Pd[1], c_new])])
        if Bb:
            go = body.op("Add", [go, bsplit[1]])
        if clip is not None:
            go = body.op("Clip", [go, *cl])
        h_new = body.op("Mul", [body.op("Sigmoid", [go]), body.op("Tanh", [c_new])], out=o_h)
        body.op("Identity", [h_new], out=o_scan)
        vi = lambda n: helper.make_tensor_value_info(n, TP.FLOAT, None)  # noqa: E731
        graph = helper.make_graph(body.nodes, f"lstm_body_{d}", [vi(h_in), vi(c_in), vi(xw_t)],
                                  [vi(o_h), vi(o_c), vi(o_scan)], body.inits)
        flip = lambda t: b.op("Slice", [t, i64([-1]), i64([-(2 ** 62)]), i64([0]), i64([-1])])  # noqa: E731
        hT, cT, hs_all = b.op("Scan", [hinit, cinit, flip(xw) if rev else xw], n_out=3, body=graph, num_scan_inputs=1)
        if rev:
            hs_all = flip(hs_all)
        Ys.append(b.op("Unsqueeze", [hs_all, i64([1])]))
        Yhs.append(b.op("Unsqueeze", [hT, i64([0])]))
        Ycs.append(b.op("Unsqueeze", [cT, i64([0])]))
    outs = list(node.output) + [""] * (3 - len(node.output))
    for o, parts, ax in zip(outs, (Ys, Yhs, Ycs), (1, 0, 0)):
        if o:
            b.op("Concat", parts, out=o, axis=ax) if len(parts) > 1 else b.op("Identity", parts, out=o)


EXPANDERS = {
    "DynamicQuantizeMatMul": expand_DynamicQuantizeMatMul,
    "MatMulIntegerToFloat": expand_MatMulIntegerToFloat,
    "QGemm": expand_QGemm,
    "QLinearAdd": expand_QLinearAdd,
    "QLinearMul": expand_QLinearMul,
    "QLinearSigmoid": _lut_unary("Sigmoid"),
    "QLinearLeakyRelu": _lut_unary("LeakyRelu"),
    "QLinearConcat": expand_QLinearConcat,
    "QLinearGlobalAveragePool": expand_QLinearGlobalAveragePool,
    "QLinearAveragePool": expand_QLinearAveragePool,
    "QLinearSoftmax": expand_QLinearSoftmax,
    "QAttention": expand_QAttention,
    "QEmbedLayerNormalization": expand_QEmbedLayerNormalization,
    "DynamicQuantizeLSTM": expand_DynamicQuantizeLSTM,
}


# ------------------------------------------------------------------------------------------------ whole graphs
_OUT_TYPES = {"DynamicQuantizeLinear": [TP.UINT8, TP.FLOAT, TP.UINT8]}


def _type_maps(model):
    """elem type of every tensor name we can infer cheaply (graph inputs, initializers, value_info,
    and a forward pass with simple rules; enough for the zero-point dtype questions the expanders ask)."""
    g = model.graph
    types = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    for t in g.initializer:
        types[t.name] = t.data_type
    for n in g.node:
        same_as_in0 = n.domain == MS and n.op_type.startswith("QLinear") and n.op_type != "QLinearConcat"
        for k, o in enumerate(n.output):
            if not o or o in types:
                continue
            if n.op_type in _OUT_TYPES:
                types[o] = _OUT_TYPES[n.op_type][k]
            elif n.op_type == "QuantizeLinear":
                types[o] = types.get(n.input[2], TP.UINT8) if len(n.input) > 2 and n.input[2] else TP.UINT8
            elif n.op_type == "QLinearConcat":
                types[o] = types.get(n.input[1], TP.UINT8)
            elif n.op_type in ("QGemm", "QLinearConv", "QLinearMatMul"):
                zi = {"QGemm": 8, "QLinearConv": 7, "QLinearMatMul": 7}[n.op_type]
                types[o] = types.get(n.input[zi], TP.UINT8) if len(n.input) > zi and n.input[zi] else TP.FLOAT
            elif same_as_in0 or n.op_type in ("MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze",
                                              "Unsqueeze", "Identity"):
                if n.input and n.input[0] in types:
                    types[o] = types[n.input[0]]
            elif n.op_type == "Cast":
                types[o] = _attrs(n)["to"]
    return types


def expand_model(model, variant="exact", only=None):
    """Return a copy of `model` with the quantized contrib nodes replaced (only: set of op types to replace)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    types = _type_maps(model)
    tp2np = {TP.UINT8: np.uint8, TP.INT8: np.int8, TP.FLOAT: np.float32, TP.INT32: np.int32}
    new_nodes, new_inits = [], []
    for idx, n in enumerate(model.graph.node):
        if n.domain != MS or n.op_type not in EXPANDERS or (only and n.op_type not in only):
            new_nodes.append(n)
            continue
        b = Builder((n.name or f"{n.op_type}_{idx}") + "/x", lambda nm: tp2np.get(types.get(nm, TP.UINT8), np.uint8))
        EXPANDERS[n.op_type](b, n, variant)
        new_nodes.extend(b.nodes)
        new_inits.extend(b.inits)
    del model.graph.node[:]
    model.graph.node.extend(new_nodes)
    model.graph.initializer.extend(new_inits)
    ops = {(o.domain or ""): o.version for o in model.opset_import}
    if ops.get("", 0) < 13:
        raise ValueError("expansions are written for default-domain opset 13..17")
    return model
