#!/usr/bin/env python3
"""Writes small ORT-optimized transformer models (com.microsoft contrib ops) plus reference data.

For every model NAME it leaves in this folder:
  NAME.onnx        the graph as onnxruntime.transformers.optimizer (or ORT's own C++ optimizer) wrote it
  NAME.npz         inputs under their graph-input names; outputs under 'out:<output name>'
                   (ORT CPUExecutionProvider, graph optimizations DISABLED, i.e. the file's ops as written;
                   exception: geglu_unet_ort_opt, whose BiasSplitGelu/BiasAdd have no CPU kernel - its
                   outputs come from the unfused source graph, see REF_FROM_SOURCE)
  NAME.src.onnx    only for models exported here: the unfused torch export the optimizer started from
It prints, per model, a Counter of (domain, op_type), and each contrib node's inputs/outputs/attributes, and
the max |optimized - source| difference of the outputs.

Run:  python tests/corpus/ort_tools/make_ort_optimized.py [outdir]   (default: this folder)
Needs torch, transformers, onnx, onnxruntime (no downloads: all configs are local, weights are seeded random).
"""
import collections
import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers as T
from onnx import helper
from onnxruntime.transformers.fusion_options import FusionOptions
from onnxruntime.transformers.optimizer import optimize_model

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else HERE
CORPUS_BERT = os.path.join(HERE, "..", "hf_bert_ids_mask_op17.onnx")
REF_FROM_SOURCE = {"geglu_unet_ort_opt"}  # ops without a CPU kernel: reference = unfused source graph
os.makedirs(OUT, exist_ok=True)


# ----------------------------------------------------------------------------------------------------------
# helpers
def graph_dims(path):
    """(hidden, heads) of the corpus BERT: hidden = word-embedding width; head_size = last element of the
    4-element shape Concat feeding the Q/K/V Reshape ([B, S, -1, head_size]); cross-checked with the
    1/sqrt(head_size) score scale."""
    m = onnx.load(path)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    consts = {n.output[0]: onnx.numpy_helper.to_array(n.attribute[0].t) for n in m.graph.node
              if n.op_type == "Constant"}
    hidden = inits["model.bert.embeddings.word_embeddings.weight"].shape[1]
    head_sizes, scales = set(), set()
    for n in m.graph.node:
        if "attention/self" not in n.name:
            continue
        if n.op_type == "Concat" and len(n.input) == 4 and n.input[3] in consts:
            head_sizes.add(int(consts[n.input[3]].reshape(-1)[0]))
        if n.op_type == "Mul" and n.input[1] in consts and consts[n.input[1]].size == 1:
            scales.add(round(float(consts[n.input[1]]), 5))
    assert len(head_sizes) == 1, head_sizes
    head_size = head_sizes.pop()
    assert scales == {round(head_size ** -0.5, 5)}, scales
    return hidden, hidden // head_size


def session(model, optimize=False):
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.log_severity_level = 3
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def run(model, feeds):
    s = session(model)
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def counter(m):
    return collections.Counter((n.domain or "ai.onnx", n.op_type) for n in m.graph.node)


def describe(name, m):
    print(f"\n=== {name}  ({os.path.getsize(os.path.join(OUT, name + '.onnx'))} bytes)")
    print("inputs :", [(i.name, onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type),
                        [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]) for i in m.graph.input])
    print("outputs:", [o.name for o in m.graph.output])
    print("ops    :", dict(sorted(counter(m).items(), key=lambda kv: (-kv[1], kv[0]))))
    inits = {t.name: list(t.dims) for t in m.graph.initializer}
    seen = set()
    for n in m.graph.node:
        nonstd = n.domain not in ("", "ai.onnx") or not onnx.defs.has(n.op_type, "")
        if not nonstd:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
        ins = [("''" if not i else (f"init{inits[i]}" if i in inits else "x")) for i in n.input]
        key = (n.domain, n.op_type, len(n.input), len(n.output), str(attrs), str(ins))
        if key in seen:
            continue
        seen.add(key)
        print(f"  {n.domain or 'ai.onnx(ORT-only)'}::{n.op_type}: {len(n.input)} inputs {ins}, "
              f"{len(n.output)} outputs {['' if not o else 'y' for o in n.output]}, attrs {attrs}")


def save(name, model, feeds, source=None):
    """Save model + reference npz; compare against the source graph when given."""
    path = os.path.join(OUT, name + ".onnx")
    if hasattr(model, "save_model_to_file"):   # an optimizer OnnxModel: its own writer adds the com.microsoft import
        model.save_model_to_file(path)
        model = onnx.load(path)
    else:
        onnx.save(model, path)
    assert os.path.getsize(path) < 2 * 1024 * 1024
    if name in REF_FROM_SOURCE:
        outs = run(source, feeds)
        outs = {o.name: v for o, v in zip(model.graph.output, outs.values())}
    else:
        outs = run(model, feeds)
    np.savez(os.path.join(OUT, name + ".npz"), **feeds, **{"out:" + k: v for k, v in outs.items()})
    describe(name, model)
    if source is not None and name not in REF_FROM_SOURCE:
        ref = run(source, feeds)
        for (k, v), r in zip(outs.items(), ref.values()):
            print(f"  |opt - source| max on {k}: {np.abs(v - r).max():.3g}")
    if name in REF_FROM_SOURCE:
        print("  (reference outputs computed from the unfused source graph: no CPU kernel for this file's ops)")


def export(module, args, path, input_names, output_names, dynamic_axes):
    torch.onnx.export(module, args, path, input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes, opset_version=17, dynamo=False)
    return path


def randomize(model):
    """Make norms/biases non-trivial (HF init leaves them 1/0): every 1-D weight (all are norm scales in these
    models) becomes 1 + N(0, 0.2), every bias N(0, 0.1)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1 and n.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
    return model


class LastHidden(torch.nn.Module):
    def __init__(self, m, keys):
        super().__init__()
        self.m, self.keys = m, keys

    def forward(self, *args):
        return self.m(**dict(zip(self.keys, args))).last_hidden_state


rng = np.random.default_rng(0)


def ids_mask(batch=2, seq=8, vocab=200, pad_row=(5,)):
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    for b, keep in enumerate(pad_row, start=1):  # right padding in the later rows
        if b < batch:
            mask[b, keep:] = 0
    return ids, mask


# ----------------------------------------------------------------------------------------------------------
def corpus_bert_variants():
    hidden, heads = graph_dims(CORPUS_BERT)
    print(f"corpus BERT: hidden={hidden} heads={heads}")
    ids, mask = ids_mask(vocab=200)
    feeds = {"input_ids": ids, "attention_mask": mask}
    src = onnx.load(CORPUS_BERT)

    def opt(name, opts=None, **kw):
        kw.setdefault("opt_level", 1)
        m = optimize_model(CORPUS_BERT, model_type="bert", num_heads=heads, hidden_size=hidden,
                           optimization_options=opts, **kw)
        save(name, m, feeds, src)

    # default: MaskIndexEnd -> EmbedLayerNormalization(mask) -> mask_index [B] -> Attention; BiasGelu
    opt("bert_ort_opt")
    o = FusionOptions("bert"); o.enable_gelu_approximation = True          # BiasGelu -> FastGelu(X, bias)
    opt("bert_ort_fastgelu", o)
    o = FusionOptions("bert"); o.use_raw_attention_mask(True)             # Attention gets int32 [B,S] 0/1 mask
    opt("bert_ort_rawmask", o)
    # raw mask with a left-padded row: only the raw-mask graph keeps the source semantics here
    ids2, mask2 = ids.copy(), mask.copy()
    mask2[1] = 0; mask2[1, 3:] = 1
    m = optimize_model(CORPUS_BERT, model_type="bert", num_heads=heads, hidden_size=hidden, optimization_options=o,
                       opt_level=1)
    save("bert_ort_rawmask_leftpad", m, {"input_ids": ids2, "attention_mask": mask2}, src)
    o = FusionOptions("bert"); o.enable_bias_gelu = False                # Gelu (erf) without the bias fused in
    opt("bert_ort_gelu", o)
    # ORT's own C++ optimizer only (level 2 = EXTENDED): MatMul+Transpose(+scale) -> FusedMatMul, Gemm+Tanh -> FusedGemm
    opt("bert_ort_fusedmatmul", opt_level=2, only_onnxruntime=True)


def bert_token_types():
    """Own BERT: 3 inputs (ids, token types, mask), random LN gammas/betas and biases, last_hidden_state out."""
    torch.manual_seed(0)
    cfg = T.BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=64, type_vocab_size=2, initializer_range=0.3,
                       attn_implementation="eager")
    model = randomize(T.BertModel(cfg, add_pooling_layer=False).eval())
    keys = ["input_ids", "token_type_ids", "attention_mask"]
    ids, mask = ids_mask(vocab=200)
    tt = np.zeros_like(ids); tt[:, 4:] = 1
    src = export(LastHidden(model, keys), tuple(torch.from_numpy(a) for a in (ids, tt, mask)),
                 os.path.join(OUT, "bert_tt_ort_opt.src.onnx"), keys, ["last_hidden_state"],
                 {k: {0: "batch", 1: "seq"} for k in keys})
    feeds = dict(zip(keys, (ids, tt, mask)))
    m = optimize_model(src, model_type="bert", num_heads=4, hidden_size=32, opt_level=1)
    save("bert_tt_ort_opt", m, feeds, onnx.load(src))


def t5_encoder():
    """T5 encoder: RMSNorm -> SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization."""
    torch.manual_seed(0)
    cfg = T.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                     relative_attention_num_buckets=8, relative_attention_max_distance=16, feed_forward_proj="relu",
                     is_encoder_decoder=False, use_cache=False)
    model = randomize(T.T5EncoderModel(cfg).eval())
    keys = ["input_ids", "attention_mask"]
    ids, mask = ids_mask(vocab=100)
    src = export(LastHidden(model, keys), (torch.from_numpy(ids), torch.from_numpy(mask)),
                 os.path.join(OUT, "t5enc_ort_opt.src.onnx"), keys, ["last_hidden_state"],
                 {k: {0: "batch", 1: "seq"} for k in keys})
    m = optimize_model(src, model_type="t5", num_heads=4, hidden_size=32, opt_level=1)
    save("t5enc_ort_opt", m, {"input_ids": ids, "attention_mask": mask}, onnx.load(src))


def clip_vision():
    """CLIP vision tower (quick_gelu): Attention without mask, QuickGelu, SkipLayerNormalization."""
    torch.manual_seed(0)
    cfg = T.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                             image_size=32, patch_size=8, num_channels=3, hidden_act="quick_gelu", projection_dim=16,
                             attn_implementation="eager")
    model = randomize(T.CLIPVisionModel(cfg).eval())
    px = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    src = export(LastHidden(model, ["pixel_values"]), (torch.from_numpy(px),),
                 os.path.join(OUT, "clipvis_ort_opt.src.onnx"), ["pixel_values"], ["last_hidden_state"],
                 {"pixel_values": {0: "batch"}})
    m = optimize_model(src, model_type="clip", num_heads=4, hidden_size=32, opt_level=1)
    save("clipvis_ort_opt", m, {"pixel_values": px}, onnx.load(src))


class GegluBlock(torch.nn.Module):
    """Stable-diffusion style FF: LN(x+y) -> Linear -> GEGLU -> Linear + residual(LN output)."""

    def __init__(self, d=32, inner=64):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.proj = torch.nn.Linear(d, 2 * inner)
        self.out = torch.nn.Linear(inner, d)

    def forward(self, x, y):
        n = self.ln(x + y)
        a, g = self.proj(n).chunk(2, dim=-1)
        return self.out(a * torch.nn.functional.gelu(g)) + n


def geglu_unet():
    """model_type='unet': SkipLayerNormalization, BiasSplitGelu, BiasAdd (the last two are CUDA-only kernels)."""
    torch.manual_seed(0)
    blk = randomize(GegluBlock().eval())
    x = rng.standard_normal((2, 16, 32)).astype(np.float32)
    y = rng.standard_normal((2, 16, 32)).astype(np.float32)
    src = export(blk, (torch.from_numpy(x), torch.from_numpy(y)), os.path.join(OUT, "geglu_unet_ort_opt.src.onnx"),
                 ["x", "y"], ["out"], {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
    o = FusionOptions("unet")
    m = optimize_model(src, model_type="unet", num_heads=0, hidden_size=0, opt_level=0, optimization_options=o)
    save("geglu_unet_ort_opt", m, {"x": x, "y": y}, onnx.load(src))


class TransposedMatMuls(torch.nn.Module):
    def forward(self, a, b, c):
        s = torch.matmul(a, b.transpose(-1, -2)) * 0.125   # -> FusedMatMul(transB=1, alpha=0.125)
        t = torch.matmul(a.transpose(-1, -2), c)            # -> FusedMatMul(transA=1)
        return s, t


def fusedmatmul_trans():
    """ORT C++ optimizer (level 2) on explicit last-two-dims Transposes feeding MatMul."""
    a = rng.standard_normal((2, 4, 8)).astype(np.float32)
    b = rng.standard_normal((2, 6, 8)).astype(np.float32)
    c = rng.standard_normal((2, 4, 5)).astype(np.float32)
    src = export(TransposedMatMuls(), tuple(torch.from_numpy(t) for t in (a, b, c)),
                 os.path.join(OUT, "fusedmatmul_trans_ort.src.onnx"), ["a", "b", "c"], ["s", "t"],
                 {k: {0: "batch"} for k in "abc"})
    m = optimize_model(src, model_type="bert", num_heads=0, hidden_size=0, opt_level=2, only_onnxruntime=True)
    save("fusedmatmul_trans_ort", m, {"a": a, "b": b, "c": c}, onnx.load(src))


if __name__ == "__main__":
    print("onnxruntime", ort.__version__, "onnx", onnx.__version__, "torch", torch.__version__,
          "transformers", T.__version__)
    corpus_bert_variants()
    bert_token_types()
    t5_encoder()
    clip_vision()
    geglu_unet()
    fusedmatmul_trans()
