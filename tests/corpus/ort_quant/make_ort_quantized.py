#!/usr/bin/env python3
"""Writes small models carrying ONNX Runtime's *quantized* com.microsoft contrib ops, plus reference data.

For every model NAME it leaves in the output folder:
  NAME.onnx        the graph as ORT's quantization tool (onnxruntime.quantization) and/or ORT's own graph
                   optimizer (a session's optimized_model_filepath dump) wrote it
  NAME.npz         inputs under their graph-input names; outputs under 'out:<output name>'
                   (ORT CPUExecutionProvider, graph optimizations DISABLED, i.e. the file's ops as written)
  NAME.src.onnx    the float torch export the quantizer started from (bert_qattention: ../bert_ort_opt.onnx;
                   *_nbits4_*: models/transformer.onnx and tfenc_dynq.src.onnx, none written)
It prints, per model, a Counter of (domain, op_type), each contrib node's inputs/outputs/attributes, and the
max |file - float source| and |file - quantized-but-unfused file| differences.

Models (seeded random weights, all < 1 MB):
  mlp_dynq_ort_ext       quantize_dynamic(MLP) (DynamicQuantizeLinear + MatMulInteger + Cast + Mul, standard ops),
                         then ORT's optimizer at ORT_ENABLE_EXTENDED: DynamicQuantizeMatMul (BASIC: no fusion;
                         ALL: the same graph as EXTENDED; both only reported)
  mlp_dynq_pc_ort_ext    per_channel=True weights: per-column scale (and zero point) vectors
  mlp_dynq_u8_ort_ext    weight_type=QUInt8 (uint8 weights with non-zero zero points)
  tfenc_dynq_ort_ext     quantize_dynamic(tiny transformer encoder) + ORT EXTENDED: DynamicQuantizeMatMul and
                         MatMulIntegerToFloat (the latter where one DynamicQuantizeLinear feeds several MatMuls)
  cnn_qop                quantize_static(QOperator, uint8 activations / int8 weights) of a small CNN:
                         QLinearConv, QGemm, QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
                         QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool, QLinearSoftmax
  cnn_qop_s8             the same with int8 activations (QuantType.QInt8 for activations)
  cnn_qop_pc             per_channel=True (QGemm with per-column b_scale/b_zero_point [N])
  bert_qattention        quantize_dynamic of ../bert_ort_opt.onnx (com.microsoft Attention) -> QAttention,
                         QEmbedLayerNormalization (plus MatMulInteger chains in the FFN)
  bert_qattention_ort_ext  the same after ORT's EXTENDED optimizer (FFN -> DynamicQuantizeMatMul)
  lstm_dynq              quantize_dynamic(op_types_to_quantize=['LSTM']) of a torch nn.LSTM model:
                         DynamicQuantizeLSTM (the default op list quantizes LSTM as well; the list keeps the rest float)
  bilstm_dynq            the same, bidirectional
  crnn_dynq_ort_ext      quantize_dynamic (default op list, int8 weights) of a CRNN text-line recognizer (3 Conv+BN+
                         ReLU+MaxPool blocks, height mean, bidirectional LSTM, Linear, log_softmax; x [batch, 1, 32, 64]
                         -> y [16, batch, 12]) + ORT EXTENDED: ConvInteger chains 3, DynamicQuantizeLSTM,
                         DynamicQuantizeMatMul (float source: crnn_dynq.src.onnx, shared by the three crnn files)
  crnn_qop               quantize_static(QOperator, uint8 activations / int8 weights, per tensor, 16 calibration
                         batches in [0, 1]) of the same CRNN: QLinearConv 3, QLinearMatMul, QLinearAdd; the LSTM stays
                         float (LSTM is not in the QOperator registry)
  crnn_qdq               the same with QuantFormat.QDQ (QuantizeLinear/DequantizeLinear around Conv, MatMul, Add)
  transformer_nbits4_sym   ORT's 4-bit weight-only quantizer (MatMulNBitsQuantizer, RTN, bits 4, block_size 32,
                         is_symmetric=True, default accuracy_level) of the bundled patch transformer
                         (models/transformer.onnx): MatMulNBits 9, no zero points; inputs: the first 8
                         Fashion-MNIST test images
  transformer_nbits4_asym  the same with is_symmetric=False: packed uint8 zero points (input 3)
  tfenc_nbits4_b16_asym  the same quantizer on tfenc_dynq.src.onnx, block_size 16, asymmetric: MatMulNBits 12
  tfenc_nbits4_b128_asym   block_size 128 > K (32, 64): one padded block per column

Run:  python make_ort_quantized.py [outdir]   (default: this folder)
      ONLY=crnn python make_ort_quantized.py [outdir]   (only the listed functions, comma-separated; crnn and
      matmul_nbits use their own generators, so their files are the same as in a full run; the others share `rng`
      and need a full run)
Needs torch, transformers, onnx, onnxruntime, and for matmul_nbits onnx_ir (ORT's MatMulNBitsQuantizer imports it)
and the Fashion-MNIST test images (Debian package dataset-fashion-mnist, or $WHITTLE_FASHION_MNIST_DIR); no
downloads.
"""
import collections
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else HERE
# the ORT-transformer-optimized BERT (com.microsoft Attention) of Whittle's corpus: next to this file, in a sibling
# ort_tools/ folder
BERT_OPT = next(p for p in (os.path.join(HERE, "bert_ort_opt.onnx"), os.path.join(HERE, "..", "ort_tools", "bert_ort_opt.onnx")) if os.path.exists(p))
os.makedirs(OUT, exist_ok=True)
TMP = tempfile.mkdtemp(prefix="ortq_")
torch.set_num_threads(1)
SUMMARY = {}


# ----------------------------------------------------------------------------------------------------------
# helpers
def sess_options(level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL, dump=None):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if dump:
        so.optimized_model_filepath = dump
    return so


def session(model, level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL, dump=None):
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return ort.InferenceSession(data, sess_options(level, dump), providers=["CPUExecutionProvider"])


def run(model, feeds):
    s = session(model)
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def ort_optimize(src_path, dst_path, level):
    """ORT's own C++ graph optimizer: load with `level`, let the session write its optimized graph."""
    session(src_path, level, dump=dst_path)
    return onnx.load(dst_path)


def counter(m):
    return collections.Counter((n.domain or "ai.onnx", n.op_type) for n in m.graph.node)


def describe(name, m):
    path = os.path.join(OUT, name + ".onnx")
    print(f"\n=== {name}  ({os.path.getsize(path)} bytes)")
    print("inputs :", [(i.name, onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type),
                        [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]) for i in m.graph.input])
    print("outputs:", [o.name for o in m.graph.output])
    c = counter(m)
    print("ops    :", dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))))
    SUMMARY[name] = c
    inits = {t.name: (onnx.TensorProto.DataType.Name(t.data_type).lower(), list(t.dims)) for t in m.graph.initializer}
    seen = set()
    for n in m.graph.node:
        if n.domain in ("", "ai.onnx"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
        ins = [("''" if not i else (f"{inits[i][0]}{inits[i][1]}" if i in inits else "x")) for i in n.input]
        key = (n.domain, n.op_type, len(n.input), len(n.output), str(attrs), str(ins))
        if key in seen:
            continue
        seen.add(key)
        print(f"  {n.domain}::{n.op_type}: {len(n.input)} inputs {ins}, "
              f"{len(n.output)} outputs {['' if not o else 'y' for o in n.output]}, attrs {attrs}")


def save(name, model, feeds, compare=()):
    """Save model + reference npz (ORT, optimizations off); print the differences to the `compare` graphs."""
    path = os.path.join(OUT, name + ".onnx")
    if isinstance(model, str):
        shutil.copyfile(model, path)
        model = onnx.load(path)
    else:
        onnx.save(model, path)
    assert os.path.getsize(path) < 1024 * 1024, (name, os.path.getsize(path))
    outs = run(model, feeds)
    np.savez(os.path.join(OUT, name + ".npz"), **feeds, **{"out:" + k: v for k, v in outs.items()})
    describe(name, model)
    for label, other in compare:
        ref = run(other, feeds)
        for (k, v), r in zip(outs.items(), ref.values()):
            d = np.abs(v.astype(np.float64) - r.astype(np.float64)).max()
            rel = d / max(np.abs(r).max(), 1e-30)
            print(f"  |{name} - {label}| max on {k}: {d:.3g} (relative {rel:.3g})")
    return model


def export(module, args, path, input_names, output_names, dynamic_axes):
    torch.onnx.export(module, args, path, input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes, opset_version=17, dynamo=False)
    return path


def randomize_biases(module, seed=1, scale=0.1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in module.named_parameters():
            if n.endswith("bias"):
                p.copy_(scale * torch.randn(p.shape, generator=g))
            elif p.dim() == 1 and n.endswith("weight"):          # norm scales
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
    return module


rng = np.random.default_rng(0)
LEVELS = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          "ext": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
          "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}


# ----------------------------------------------------------------------------------------------------------
class MLP(torch.nn.Module):
    def __init__(self, d=16, h=32, o=8):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, h)
        self.fc2 = torch.nn.Linear(h, h, bias=False)
        self.fc3 = torch.nn.Linear(h, o)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.tanh(self.fc1(x)))))


def mlp_dynamic():
    """quantize_dynamic writes standard ops (DynamicQuantizeLinear, MatMulInteger, Cast, Mul, Add); ORT's
    level-2 fusions turn each chain into DynamicQuantizeMatMul (bias folded in as input 5). Levels BASIC and ALL are
    only reported (BASIC fuses nothing, ALL writes the same graph as EXTENDED here)."""
    torch.manual_seed(0)
    mlp = randomize_biases(MLP().eval())
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    src = export(mlp, (torch.from_numpy(x),), os.path.join(OUT, "mlp_dynq.src.onnx"), ["x"], ["y"],
                 {"x": {0: "batch", 1: "seq"}})
    feeds = {"x": x}
    variants = [("mlp_dynq", {}), ("mlp_dynq_pc", {"per_channel": True}),
                ("mlp_dynq_u8", {"weight_type": QuantType.QUInt8})]
    for name, kw in variants:
        q = os.path.join(TMP, name + ".onnx")
        quantize_dynamic(src, q, **kw)
        if name == "mlp_dynq":
            print(f"\n=== {name} (quantize_dynamic output, not kept): ops", dict(counter(onnx.load(q))))
            for lv in ("basic", "all"):
                dst = os.path.join(TMP, f"{name}_ort_{lv}.onnx")
                c = counter(ort_optimize(q, dst, LEVELS[lv]))
                SUMMARY[f"({name}_ort_{lv}, not kept)"] = c
                print(f"=== {name} after ORT_ENABLE_{lv.upper()} (not kept): ops", dict(c))
        dst = os.path.join(TMP, f"{name}_ort_ext.onnx")
        ort_optimize(q, dst, LEVELS["ext"])
        save(f"{name}_ort_ext", dst, feeds, [("source", src), ("quantized", q)])


class TinyEncoder(torch.nn.Module):
    """Pre-LN transformer encoder block written out (so the export is plain MatMul/Softmax/LayerNorm)."""

    def __init__(self, d=32, heads=4, ff=64, layers=2):
        super().__init__()
        self.heads = heads
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(torch.nn.ModuleDict(dict(
                ln1=torch.nn.LayerNorm(d), q=torch.nn.Linear(d, d), k=torch.nn.Linear(d, d),
                v=torch.nn.Linear(d, d), o=torch.nn.Linear(d, d), ln2=torch.nn.LayerNorm(d),
                f1=torch.nn.Linear(d, ff), f2=torch.nn.Linear(ff, d))))

    def forward(self, x):
        B, S, D = x.shape
        H = D // self.heads
        for b in self.blocks:
            h = b["ln1"](x)
            q, k, v = (b[n](h).reshape(B, S, self.heads, H).transpose(1, 2) for n in "qkv")
            a = torch.softmax(q @ k.transpose(-1, -2) / H ** 0.5, dim=-1) @ v
            x = x + b["o"](a.transpose(1, 2).reshape(B, S, D))
            x = x + b["f2"](torch.nn.functional.gelu(b["f1"](b["ln2"](x))))
        return x


def tfenc_dynamic():
    torch.manual_seed(0)
    enc = randomize_biases(TinyEncoder().eval())
    x = rng.standard_normal((2, 6, 32)).astype(np.float32)
    src = export(enc, (torch.from_numpy(x),), os.path.join(OUT, "tfenc_dynq.src.onnx"), ["x"], ["y"],
                 {"x": {0: "batch", 1: "seq"}})
    q = os.path.join(TMP, "tfenc_dynq.onnx")
    quantize_dynamic(src, q)
    dst = os.path.join(TMP, "tfenc_dynq_ort_ext.onnx")
    ort_optimize(q, dst, LEVELS["ext"])
    save("tfenc_dynq_ort_ext", dst, {"x": x}, [("source", src), ("quantized", q)])


# ----------------------------------------------------------------------------------------------------------
class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = torch.nn.Conv2d(8, 8, 1)
        self.pool = torch.nn.AvgPool2d(2)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        a = torch.relu(self.c1(x))
        r = a + self.c2(a)                                    # residual Add   -> QLinearAdd
        g = r * torch.sigmoid(self.c3(r))                    # Sigmoid, Mul   -> QLinearSigmoid, QLinearMul
        lr = torch.nn.functional.leaky_relu(g, 0.1)          # LeakyRelu      -> QLinearLeakyRelu
        c = torch.cat([lr, a], dim=1)                        # Concat         -> QLinearConcat
        p = self.pool(c)                                     # AveragePool    -> QLinearAveragePool
        gp = torch.nn.functional.adaptive_avg_pool2d(p, 1)   # GlobalAveragePool -> QLinearGlobalAveragePool
        f = torch.flatten(gp, 1)
        return torch.softmax(self.fc(f), dim=-1)             # Gemm, Softmax  -> QGemm, QLinearSoftmax


class RandomReader(CalibrationDataReader):
    def __init__(self, name, shape, n=8, seed=5):
        r = np.random.default_rng(seed)
        self.data = iter([{name: r.standard_normal(shape).astype(np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.data, None)


def cnn_static():
    torch.manual_seed(0)
    cnn = randomize_biases(SmallCNN().eval())
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    src = export(cnn, (torch.from_numpy(x),), os.path.join(OUT, "cnn_qop.src.onnx"), ["x"], ["y"],
                 {"x": {0: "batch"}})
    for name, act, pc in [("cnn_qop", QuantType.QUInt8, False), ("cnn_qop_s8", QuantType.QInt8, False),
                          ("cnn_qop_pc", QuantType.QUInt8, True)]:
        q = os.path.join(TMP, name + ".onnx")
        quantize_static(src, q, RandomReader("x", (2, 3, 8, 8)), quant_format=QuantFormat.QOperator,
                        activation_type=act, weight_type=QuantType.QInt8, per_channel=pc)
        save(name, q, {"x": x}, [("source", src)])


# ----------------------------------------------------------------------------------------------------------
def bert_qattention():
    """ORT's dynamic quantizer rewrites com.microsoft Attention into QAttention (int8 weight per tensor, input
    through DynamicQuantizeLinear) and EmbedLayerNormalization into QEmbedLayerNormalization (uint8 tables); the
    FFN MatMuls become MatMulInteger chains, which ORT's EXTENDED optimizer then fuses to DynamicQuantizeMatMul.
    The float source is ../bert_ort_opt.onnx (not copied)."""
    src = BERT_OPT
    ref = np.load(BERT_OPT[:-5] + ".npz")
    m = onnx.load(src)
    feeds = {i.name: ref[i.name] for i in m.graph.input}
    q = os.path.join(TMP, "bert_qattention.onnx")
    # onnx shape inference cannot type the outputs of the contrib ops: tell the quantizer they are float
    quantize_dynamic(src, q, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    save("bert_qattention", q, feeds, [("source", src)])
    dst = os.path.join(TMP, "bert_qattention_ort_ext.onnx")
    ort_optimize(q, dst, LEVELS["ext"])
    save("bert_qattention_ort_ext", dst, feeds, [("source", src), ("quantized", q)])


# ----------------------------------------------------------------------------------------------------------
class LSTMNet(torch.nn.Module):
    def __init__(self, d=8, h=16, bidirectional=False):
        super().__init__()
        self.lstm = torch.nn.LSTM(d, h, batch_first=False, bidirectional=bidirectional)

    def forward(self, x):
        y, (hn, cn) = self.lstm(x)
        return y, hn, cn


def lstm_dynamic():
    for name, bi in [("lstm_dynq", False), ("bilstm_dynq", True)]:
        torch.manual_seed(0)
        net = LSTMNet(bidirectional=bi).eval()
        x = rng.standard_normal((5, 2, 8)).astype(np.float32)
        src = export(net, (torch.from_numpy(x),), os.path.join(OUT, name + ".src.onnx"), ["x"], ["y", "hn", "cn"],
                     {"x": {0: "seq", 1: "batch"}})
        q = os.path.join(TMP, name + ".onnx")
        quantize_dynamic(src, q, op_types_to_quantize=["LSTM"])
        save(name, q, {"x": x}, [("source", src)])


# ----------------------------------------------------------------------------------------------------------
class CRNN(torch.nn.Module):
    """OCR-style text-line recognizer: 3 Conv3x3+BN+ReLU+MaxPool blocks, height collapsed (mean) to a sequence of
    T = 16 width positions, bidirectional LSTM, Linear to the classes, log_softmax.  x [B, 1, 32, 64] -> y [16, B, 12]."""

    def __init__(self, classes=12, hidden=32):
        super().__init__()
        blocks = []
        for cin, cout, pool in [(1, 16, (2, 2)), (16, 32, (2, 2)), (32, 48, (2, 1))]:
            blocks += [torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU(),
                       torch.nn.MaxPool2d(pool)]
        self.cnn = torch.nn.Sequential(*blocks)
        self.rnn = torch.nn.LSTM(48, hidden, batch_first=False, bidirectional=True)
        self.fc = torch.nn.Linear(2 * hidden, classes)

    def forward(self, x):
        f = self.cnn(x)                           # [B, 48, 4, 16]
        s = f.mean(dim=2).permute(2, 0, 1)        # [T=16, B, 48]
        y, _ = self.rnn(s)                        # [T, B, 64]
        return torch.log_softmax(self.fc(y), dim=-1)


class UniformReader(CalibrationDataReader):
    """Like RandomReader, but images in [0, 1]."""

    def __init__(self, name, shape, n=16, seed=11):
        r = np.random.default_rng(seed)
        self.data = iter([{name: r.random(shape, dtype=np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.data, None)


def crnn():
    """The CRNN in three forms: quantize_dynamic with the default op list (Conv -> ConvInteger chain, MatMul ->
    MatMulInteger chain, LSTM -> DynamicQuantizeLSTM) + ORT EXTENDED (the chains' MatMul -> DynamicQuantizeMatMul);
    quantize_static QOperator (LSTM is not in the QOperator registry: it stays float LSTM); quantize_static QDQ.
    Uses its own generators (not the shared `rng`), so ONLY=crnn writes the same files as a full run."""
    torch.manual_seed(0)
    net = randomize_biases(CRNN().eval(), seed=2)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
    x = np.random.default_rng(7).random((2, 1, 32, 64), dtype=np.float32)
    feeds = {"x": x}
    src = export(net, (torch.from_numpy(x),), os.path.join(OUT, "crnn_dynq.src.onnx"), ["x"], ["y"],
                 {"x": {0: "batch"}, "y": {1: "batch"}})
    q = os.path.join(TMP, "crnn_dynq.onnx")
    quantize_dynamic(src, q, weight_type=QuantType.QInt8)
    print("\n=== crnn_dynq (quantize_dynamic output, not kept): ops", dict(counter(onnx.load(q))))
    dst = os.path.join(TMP, "crnn_dynq_ort_ext.onnx")
    ort_optimize(q, dst, LEVELS["ext"])
    kept = [save("crnn_dynq_ort_ext", dst, feeds, [("source", src), ("quantized", q)])]
    for name, fmt in [("crnn_qop", QuantFormat.QOperator), ("crnn_qdq", QuantFormat.QDQ)]:
        q = os.path.join(TMP, name + ".onnx")
        quantize_static(src, q, UniformReader("x", (2, 1, 32, 64)), quant_format=fmt,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=False)
        save(name, q, feeds, [("source", src)])
    for name in ("crnn_dynq_ort_ext", "crnn_qop", "crnn_qdq", "crnn_dynq.src"):
        assert os.path.getsize(os.path.join(OUT, name + ".onnx")) < 200 * 1024, name


# ----------------------------------------------------------------------------------------------------------
# the bundled Fashion-MNIST patch transformer (../../../models/transformer.onnx: torch export, opset 17, 9 MatMul
# with constant weights [49,192], [192,576], [192,192], [192,384], [384,192] and a Gemm head)
TRANSFORMER = os.path.join(HERE, "..", "..", "..", "models", "transformer.onnx")
FASHION_MNIST = os.environ.get("WHITTLE_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def fashion_mnist_test_images(n):
    """The first n Fashion-MNIST test images as float32 [n, 1, 28, 28] in [0, 1] (as models/train.py feeds them)."""
    import gzip
    path = os.path.join(FASHION_MNIST, "t10k-images-idx3-ubyte.gz")
    if not os.path.exists(path):
        sys.exit(f"{path} missing: apt-get install dataset-fashion-mnist, or set WHITTLE_FASHION_MNIST_DIR")
    with gzip.open(path, "rb") as f:
        data = f.read()
    images = np.frombuffer(data, np.uint8, offset=16).reshape(-1, 1, 28, 28)   # IDX header: 4 + 3 * 4 bytes
    return (images[:n].astype(np.float32) / 255.0).copy()


def matmul_nbits():
    """ORT's 4-bit weight-only quantizer (onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer,
    default RTN algorithm, QOperator format, default accuracy_level): every MatMul with a constant 2-D weight becomes
    com.microsoft MatMulNBits (B packed uint8 [N, blocks, block/2], scales [N, blocks], uint8 zero points
    [N, ceil(blocks/2)] two per byte when asymmetric, blocks = ceil(K/block)); Gemm, Gather and the
    activation x activation MatMuls stay float. Sources: the bundled patch transformer (K = 49 is not a multiple of
    the block: the last block is padded) and tfenc_dynq.src.onnx (written by tfenc_dynamic; here read from OUT; no
    new .src.onnx). Own generator (seed 13) for the encoder's input, so ONLY=matmul_nbits writes the same files as a
    full run."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer   # needs the onnx_ir package
    import logging
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)  # one INFO line a node
    images = {"image": fashion_mnist_test_images(8)}
    tfenc_src = os.path.join(OUT, "tfenc_dynq.src.onnx")
    tfenc_x = {"x": np.random.default_rng(13).standard_normal((2, 6, 32)).astype(np.float32)}
    for name, src, feeds, kw in [
            ("transformer_nbits4_sym", TRANSFORMER, images, dict(block_size=32, is_symmetric=True)),
            ("transformer_nbits4_asym", TRANSFORMER, images, dict(block_size=32, is_symmetric=False)),
            ("tfenc_nbits4_b16_asym", tfenc_src, tfenc_x, dict(block_size=16, is_symmetric=False)),
            # block > K (32 and 64): one zero-padded block per column, zero points [N, 1] with one nibble used
            ("tfenc_nbits4_b128_asym", tfenc_src, tfenc_x, dict(block_size=128, is_symmetric=False))]:
        quant = MatMulNBitsQuantizer(onnx.load(src), bits=4, **kw)
        quant.process()
        q = os.path.join(TMP, name + ".onnx")
        onnx.save(quant.model.model, q)
        save(name, q, feeds, [("source", src)])
        assert os.path.getsize(os.path.join(OUT, name + ".onnx")) < 512 * 1024, name


if __name__ == "__main__":
    print("onnxruntime", ort.__version__, "onnx", onnx.__version__, "torch", torch.__version__)
    only = set(os.environ.get("ONLY", "").split(",")) - {""}
    for fn in [mlp_dynamic, tfenc_dynamic, cnn_static, bert_qattention, lstm_dynamic, crnn, matmul_nbits]:
        if not only or fn.__name__ in only:
            fn()
    print("\n=== summary: contrib ops per file")
    for name, c in SUMMARY.items():
        print(f"{name:34s}", dict(sorted(((k[1], v) for k, v in c.items() if k[0] not in ("ai.onnx",)))))
    shutil.rmtree(TMP, ignore_errors=True)
