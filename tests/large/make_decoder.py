#!/usr/bin/env python3
"""Writes a Llama/Qwen-style decoder-only language model with a KV cache as ONNX, the way users
export one: Hugging Face `transformers` LlamaForCausalLM (or Qwen2ForCausalLM) with seeded random
weights, through torch.onnx.export (default: the TorchScript exporter, opset 17, eager attention).

Graph signature (every dim named here is free in the model):
  inputs   input_ids [batch, sequence] int64, attention_mask [batch, total_sequence] int64,
           position_ids [batch, sequence] int64,
           past_key_values.{i}.key / .value [batch, kv_heads, past_sequence, head_dim] float32
  outputs  logits [batch, sequence, vocab] float32,
           present.{i}.key / .value [batch, kv_heads, total_sequence, head_dim] float32
total_sequence = past_sequence + sequence. A run with past_sequence 0 is the prefill; feeding present.*
back as past_key_values.* is a decode step. The architecture is RMSNorm (Pow/ReduceMean/Add/Sqrt/Div/
Mul), rotary embeddings computed from position_ids, grouped-query attention (kv_heads < heads; eager
attention: MatMul, Softmax over an additive causal+padding mask) and a SwiGLU MLP (SiLU as Sigmoid*x).

    python tests/large/make_decoder.py OUT.onnx --preset tiny            # 9.6 MB, one file (the corpus's)
    python tests/large/make_decoder.py OUT.onnx --preset 1b              # 1.1B params, OUT.onnx + OUT.onnx.data
    python tests/large/make_decoder.py OUT.onnx --preset 1b --layers 4   # the 1B shapes, fewer layers
    python tests/large/make_decoder.py OUT.onnx --exporter dynamo --opset 23   # RMSNormalization,
                                                 # RotaryEmbedding and Attention ops (opset 23)
Overrides: --hidden --layers --heads --kv-heads --intermediate --vocab --tie/--no-tie --arch llama|qwen2
--seed --dtype float32|float16. Weights are normal(0, 0.02) (the configs' initializer_range), norm weights 1 (the Qwen2 q/k/v
biases are normal(0, 0.02) too, so they are not all zero). The same arguments and package versions
write the same bytes.

--exporter dynamo uses torch.export and HF's SDPA attention: at opset 18 RMSNorm ends in Reciprocal
and attention is MatMul/Softmax with an IsNaN/Where guard; at opset 23 the exporter writes the ONNX
RMSNormalization, RotaryEmbedding and Attention ops. Its dims s0, s1, ... are renamed as above.

Needs torch, transformers and onnx (pip; not dependencies of Whittle or its tests, which read the
committed tests/corpus/decoder_tiny_op17.onnx). Presets other than tiny, a model over 1.8 GB, or
--external-data: written with the initializers in one data file, OUT.onnx.data, beside OUT.onnx.
--check: run the result in ONNX Runtime against torch at other shapes (needs onnxruntime).
"""
import argparse
import gc
import inspect
import os
import sys
import tempfile

import torch

PRESETS = {
    # ~2.4M params, ~9.4 MB fp32 (head_dim 32, 3 query heads per kv head): small enough to commit and run in ctest.
    "tiny": dict(hidden=192, layers=4, heads=6, kv_heads=2, intermediate=512, vocab=2048, tie=False),
    # TinyLlama-1.1B's shapes: 1,100,048,384 params, 4.4 GB fp32 (benchmarks, never CI).
    "1b": dict(hidden=2048, layers=22, heads=32, kv_heads=4, intermediate=5632, vocab=32000, tie=False),
    # Llama-3.2-1B's shapes: 1,235,814,400 params (the tied 128256 x 2048 embedding is 262M of them; the
    # exporter writes the head as a second, transposed copy: 6.0 GB of data).
    "llama3-1b": dict(hidden=2048, layers=16, heads=32, kv_heads=8, intermediate=8192, vocab=128256, tie=True),
}


def build_model(a):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    common = dict(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                  num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                  intermediate_size=a.intermediate, max_position_embeddings=a.max_positions,
                  rms_norm_eps=1e-5 if a.arch == "llama" else 1e-6, rope_theta=10000.0 if a.arch == "llama" else 1e6,
                  tie_word_embeddings=a.tie, initializer_range=0.02, use_cache=True,
                  attn_implementation="sdpa" if a.exporter == "dynamo" else "eager", torch_dtype=torch.float32)
    dtype = getattr(a, "dtype", "float32")
    torch.manual_seed(a.seed)
    if a.arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common))
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    model.eval()
    if dtype == "float16":
        model.half()  # after initialising in float32, so the weights are the float32 model's, rounded
    if a.arch == "qwen2":
        # HF initialises the q/k/v biases to zero; random ones exercise the bias Add.
        with torch.no_grad():
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_(0.0, 0.02)
    return model


class WithCache(torch.nn.Module):
    """input_ids, attention_mask, position_ids, flat past (k0, v0, k1, v1, ...) -> logits, flat present."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.layers = model.config.num_hidden_layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        from transformers import DynamicCache
        cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(self.layers)],
                             config=self.model.config)
        # transformers 5.2x renamed the forward's past_key_values to cache (the old name warns until 5.40).
        key = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         use_cache=True, **{key: cache})
        cache = out.cache if "cache" in getattr(out, "__dataclass_fields__", {}) else out.past_key_values
        present = []
        for i in range(self.layers):
            layer = cache.layers[i]
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def rename_dims(m, dims):
    """Names the graph's free dims as DIMS says ({input or output: {axis: name}}): the dynamo exporter calls
    them s0, s1, ... (and the past key and value dims apart). Its intermediate shapes follow the same map."""
    import re
    sym = {}
    for vi in list(m.graph.input) + list(m.graph.output):
        for axis, name in dims.get(vi.name, {}).items():
            d = vi.type.tensor_type.shape.dim[axis]
            if re.fullmatch(r"s\d+", d.dim_param):
                sym.setdefault(d.dim_param, name)
            d.dim_param = name
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param:
                d.dim_param = re.sub(r"\bs\d+\b", lambda g: sym.get(g.group(0), g.group(0)), d.dim_param)


def gather_external(src, out, threshold=1024, dims=None, external=True):
    """Rewrites the exported model SRC (initializers inline or in files beside it) as OUT plus one data file
    OUT.data holding every initializer of THRESHOLD bytes or more, 64-byte aligned (or, with external False,
    as one file). Streams one tensor at a time, so it needs the largest tensor's memory, not the model's.
    DIMS: rename_dims first."""
    import onnx
    from onnx import TensorProto
    m = onnx.load(src, load_external_data=False)
    if dims:
        rename_dims(m, dims)
    if not external:
        onnx.load_external_data_for_model(m, os.path.dirname(src))
        onnx.save_model(m, out + ".tmp")
        os.replace(out + ".tmp", out)
        return
    data_name = os.path.basename(out) + ".data"
    offset = 0
    with open(out + ".data.tmp", "wb") as f:
        for t in m.graph.initializer:
            if t.data_location == TensorProto.EXTERNAL:
                info = {e.key: e.value for e in t.external_data}
                with open(os.path.join(os.path.dirname(src), info["location"]), "rb") as g:
                    g.seek(int(info.get("offset", 0)))
                    raw = g.read(int(info["length"])) if "length" in info else g.read()
            elif t.HasField("raw_data") and len(t.raw_data) >= threshold:
                raw = t.raw_data
            else:
                continue
            pad = (-offset) % 64
            f.write(b"\0" * pad)
            offset += pad
            f.write(raw)
            t.ClearField("raw_data")
            del t.external_data[:]
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", data_name), ("offset", str(offset)), ("length", str(len(raw)))):
                e = t.external_data.add()
                e.key, e.value = k, v
            offset += len(raw)
            del raw
    with open(out + ".tmp", "wb") as f:
        f.write(m.SerializeToString())
    os.replace(out + ".data.tmp", out + ".data")
    os.replace(out + ".tmp", out)


def check(a, path, model):
    """Runs the written model in ONNX Runtime against the torch model at shapes other than the traced one:
    a prefill (past 0), a left-padded batch, and decode steps; prints the max relative difference over the
    positions that are not padding."""
    import numpy as np
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    wrapper = WithCache(model).eval()
    head_dim = a.hidden // a.heads
    g = torch.Generator().manual_seed(2)
    worst = 0.0
    for batch, seq, past, pad in ((1, 7, 0, 0), (2, 5, 0, 2), (2, 1, 9, 3), (1, 4, 3, 0), (3, 2, 6, 1)):
        ids = torch.randint(0, a.vocab, (batch, seq), generator=g)
        mask = torch.ones(batch, past + seq, dtype=torch.int64)
        mask[-1, :pad] = 0  # the last row is left-padded, as a batched generate pads it
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, past:]
        pkv = [torch.randn(batch, a.kv_heads, past, head_dim, generator=g).to(model.dtype) for _ in range(2 * a.layers)]
        with torch.no_grad():
            want = [t.numpy() for t in wrapper(ids, mask, pos, *pkv)]
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "position_ids": pos.numpy()}
        for i in range(a.layers):
            feed[f"past_key_values.{i}.key"] = pkv[2 * i].numpy()
            feed[f"past_key_values.{i}.value"] = pkv[2 * i + 1].numpy()
        got = sess.run(None, feed)
        shapes_ok = all(x.shape == y.shape for x, y in zip(got, want))
        if not shapes_ok:
            sys.exit("ONNX Runtime's output shapes differ from torch's")
        # Padding positions attend to nothing; what they hold differs between attention kernels (a uniform
        # softmax under eager's additive mask, zeros or NaN under SDPA) and means nothing: compare the rest.
        keep = mask.numpy().astype(bool)
        rel = 0.0
        for n, (x, y) in enumerate(zip(got, want)):
            if n == 0:
                x, y = x[keep[:, past:]], y[keep[:, past:]]
            else:
                x, y = x.transpose(0, 2, 1, 3)[keep], y.transpose(0, 2, 1, 3)[keep]
            rel = max(rel, float(np.abs(x - y).max() / max(np.abs(y).max(), 1e-12)))
        worst = max(worst, rel)
        print(f"check batch {batch} seq {seq} past {past} pad {pad}: max rel diff {rel:.2e}, shapes "
              f"match, logits std {want[0].std():.3f}", flush=True)
    tol = 1e-4 if a.dtype == "float32" else 1e-2  # float16: torch and ORT accumulate differently
    if worst > tol:
        sys.exit(f"ONNX Runtime differs from torch: max rel {worst:.2e}, over {tol:g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--arch", choices=["llama", "qwen2"], default="llama")
    for k in ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, dest=k)
    ap.add_argument("--tie", dest="tie", action="store_true", default=None, help="tie the LM head to the embedding")
    ap.add_argument("--no-tie", dest="tie", action="store_false")
    ap.add_argument("--max-positions", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["float32", "float16"], default="float32",
                    help="float16: weights, logits and the cache in half precision (GPU baselines)")
    ap.add_argument("--exporter", choices=["torchscript", "dynamo"], default="torchscript",
                    help="torch.onnx's TorchScript exporter (eager attention) or the dynamo one (SDPA attention)")
    ap.add_argument("--opset", type=int, help="default 17 (torchscript), 18 (dynamo)")
    ap.add_argument("--external-data", action="store_true", help="external data even under 2 GB")
    ap.add_argument("--check", action="store_true", help="compare ONNX Runtime with torch after writing")
    a = ap.parse_args()
    for k, v in PRESETS[a.preset].items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.opset is None:
        a.opset = 17 if a.exporter == "torchscript" else 18
    if a.hidden % a.heads or a.heads % a.kv_heads:
        sys.exit("hidden must divide by heads and heads by kv-heads")

    model = build_model(a)
    params = sum(p.numel() for p in model.parameters())
    head_dim = a.hidden // a.heads
    print(f"{a.arch}: hidden {a.hidden}, layers {a.layers}, heads {a.heads}/{a.kv_heads} kv, head_dim {head_dim}, "
          f"intermediate {a.intermediate}, vocab {a.vocab}, tied {a.tie}: {params:,} params "
          f"({params * (2 if a.dtype == 'float16' else 4) / 1e6:.1f} MB {a.dtype})", flush=True)

    # Trace with past > 0 and seq > 1 so that neither is specialised away.
    batch, seq, past = 2, 3, 5
    ids = torch.randint(0, a.vocab, (batch, seq), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(batch, past + seq, dtype=torch.int64)
    pos = torch.arange(past, past + seq, dtype=torch.int64).unsqueeze(0).expand(batch, seq).contiguous()
    pkv = [torch.zeros(batch, a.kv_heads, past, head_dim, dtype=model.dtype) for _ in range(2 * a.layers)]

    names_in = ["input_ids", "attention_mask", "position_ids"]
    names_out = ["logits"]
    dyn = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total_sequence"},
           "position_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
    for i in range(a.layers):
        for kv in ("key", "value"):
            pn, on = f"past_key_values.{i}.{kv}", f"present.{i}.{kv}"
            names_in.append(pn)
            names_out.append(on)
            dyn[pn] = {0: "batch", 2: "past_sequence"}
            dyn[on] = {0: "batch", 2: "total_sequence"}

    external = a.external_data or a.preset != "tiny" or params * (2 if a.dtype == "float16" else 4) > 1.8e9
    out = os.path.abspath(a.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    wrapper = WithCache(model).eval()
    with torch.no_grad():
        if a.exporter == "torchscript" and not external:
            torch.onnx.export(wrapper, (ids, mask, pos, *pkv), out, input_names=names_in, output_names=names_out,
                              dynamic_axes=dyn, opset_version=a.opset, dynamo=False, do_constant_folding=True)
        else:
            # Export to a scratch folder beside OUT (the TorchScript exporter spills a model over 2 GB to one file
            # per tensor; the dynamo one names its dims s0, s1, ...), then write OUT with one OUT.onnx.data.
            scratch = tempfile.mkdtemp(prefix=".export_", dir=os.path.dirname(out))
            try:
                tmp = os.path.join(scratch, "model.onnx")
                if a.exporter == "torchscript":
                    torch.onnx.export(wrapper, (ids, mask, pos, *pkv), tmp, input_names=names_in,
                                      output_names=names_out, dynamic_axes=dyn, opset_version=a.opset, dynamo=False,
                                      do_constant_folding=True)
                else:
                    d = torch.export.Dim.DYNAMIC
                    shapes = ({0: d, 1: d}, {0: d, 1: d}, {0: d, 1: d}, tuple({0: d, 2: d} for _ in pkv))
                    torch.onnx.export(wrapper, (ids, mask, pos, *pkv), tmp, input_names=names_in,
                                      output_names=names_out, dynamic_shapes=shapes, opset_version=a.opset,
                                      dynamo=True, external_data=external, verbose=False)
                del wrapper
                if not a.check:
                    del model
                gc.collect()
                gather_external(tmp, out, dims=dyn if a.exporter == "dynamo" else None, external=external)
            finally:
                for f in os.listdir(scratch):
                    os.remove(os.path.join(scratch, f))
                os.rmdir(scratch)
    size = os.path.getsize(out) + (os.path.getsize(out + ".data") if os.path.exists(out + ".data") else 0)
    print(f"wrote {out}" + (" (+ .data)" if external else "") + f", {size:,} bytes", flush=True)
    if a.check:
        check(a, out, model)


if __name__ == "__main__":
    main()
