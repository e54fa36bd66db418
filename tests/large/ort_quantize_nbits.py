#!/usr/bin/env python3
"""Quantizes the weights of an ONNX model's MatMuls to 4 (or 8) bits with ONNX Runtime's own
quantizer, onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer: the reference that
issue 42 compares Whittle's --int4 with (what onnxruntime-genai users run).

    python tests/large/ort_quantize_nbits.py IN.onnx OUT.onnx [--bits 4] [--block-size 32] [--symmetric]
        [--accuracy-level 0|1|2|3|4] [--format matmulnbits|qdq] [--exclude NODE ...] [--check]

Algorithm: ORT's DEFAULT weight-only config, round-to-nearest per block of --block-size rows of the
weight (the K dim), with a zero point unless --symmetric (then int4 around 0). Every MatMul whose B is
a 2-D initializer is rewritten, the LM head included.
  --format matmulnbits (default) writes com.microsoft MatMulNBits nodes (bits, block_size, K, N,
      accuracy_level attributes; packed uint8 B, scales, optional packed zero points).
  --format qdq writes standard ONNX: DequantizeLinear(block_size, axis 0) of an int4 (symmetric) or
      uint4 initializer, then MatMul. 4 bits only. It needs opset 21; ORT's quantizer would only
      relabel the opset, so a model below 21 is first converted with onnx.version_converter.
--accuracy-level is MatMulNBits' compute type: 0 (unset) and 1 compute in fp32, 4 quantizes the
activations to int8 per block (ORT's fastest CPU path, what onnxruntime-genai writes for CPU).
The output uses one external data file, OUT.onnx.data, when the input had external data or is over
~1.8 GB (or with --external-data). --check runs IN and OUT once on a short prompt in ONNX Runtime
(decoders in make_decoder.py's layout; otherwise random inputs of the graph's fixed dims, free dims 1)
and prints the max relative difference of the first output.

Needs numpy, onnx, onnxruntime and onnx-ir (which ORT's quantizer imports since 1.31; pip install
onnx-ir); nothing else for the DEFAULT algorithm.
"""
import argparse
import logging
import os
import sys
import time

import numpy as np
import onnx


def has_external_data(model):
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def decoder_feed(sess, seq=8):
    """A prefill feed for a decoder in make_decoder.py's layout, or None if the model is not one."""
    names = {i.name: i for i in sess.get_inputs()}
    if "input_ids" not in names or "attention_mask" not in names:
        return None
    vocab = [o for o in sess.get_outputs() if o.name == "logits"]
    vocab = vocab[0].shape[-1] if vocab and isinstance(vocab[0].shape[-1], int) else 100
    ids = (np.arange(seq, dtype=np.int64) * 7919 + 13) % vocab
    feed = {"input_ids": ids[None, :], "attention_mask": np.ones((1, seq), dtype=np.int64)}
    if "position_ids" in names:
        feed["position_ids"] = np.arange(seq, dtype=np.int64)[None, :]
    for n, i in names.items():
        if n.startswith("past_key_values."):
            dt = np.float16 if i.type == "tensor(float16)" else np.float32
            feed[n] = np.zeros((1, i.shape[1], 0, i.shape[3]), dtype=dt)
    return feed


def random_feed(sess):
    rng = np.random.default_rng(0)
    feed = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "int" in i.type:
            feed[i.name] = rng.integers(0, 10, shape).astype(np.int64 if "64" in i.type else np.int32)
        else:
            feed[i.name] = rng.standard_normal(shape).astype(np.float16 if "16" in i.type else np.float32)
    return feed


def check(src, dst):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    ref = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    got = ort.InferenceSession(dst, so, providers=["CPUExecutionProvider"])
    feed = decoder_feed(ref) or random_feed(ref)
    a = ref.run(None, feed)[0].astype(np.float64)
    b = got.run(None, feed)[0].astype(np.float64)
    rel = float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30))
    line = f"check: {ref.get_outputs()[0].name} max rel diff quantized vs original {rel:.3e}"
    if a.ndim == 3:
        agree = float((a.argmax(-1) == b.argmax(-1)).mean())
        line += f", argmax agreement {agree * 100:.1f}% over {a.shape[0] * a.shape[1]} positions"
    print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--bits", type=int, choices=[4, 8], default=4)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--symmetric", action="store_true", help="no zero points (int4 around 0)")
    ap.add_argument("--accuracy-level", type=int, choices=[0, 1, 2, 3, 4], default=None,
                    help="MatMulNBits compute type (default: unset, fp32 compute)")
    ap.add_argument("--format", choices=["matmulnbits", "qdq"], default="matmulnbits")
    ap.add_argument("--exclude", nargs="*", default=[], help="MatMul node names to leave in float")
    ap.add_argument("--external-data", action="store_true")
    ap.add_argument("--check", action="store_true", help="run IN and OUT in ONNX Runtime and compare")
    a = ap.parse_args()

    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)

    if a.format == "qdq" and a.bits != 4:
        sys.exit("--format qdq writes 4 bits only (ORT's quantizer)")
    t0 = time.perf_counter()
    # Load the graph first and its external data last: the version converter (and protobuf) refuse a message
    # over 2 GB, and a tensor's data location says whether the input used external data.
    model = onnx.load(a.input, load_external_data=False)
    external = a.external_data or has_external_data(model) or os.path.getsize(a.input) > 1.8e9
    if a.format == "qdq":
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        if opset < 21:
            from onnx import version_converter
            model = version_converter.convert_version(model, 21)
            print(f"converted opset {opset} -> 21 (int4 and DequantizeLinear block_size need it)")
    from onnx.external_data_helper import load_external_data_for_model
    load_external_data_for_model(model, os.path.dirname(os.path.abspath(a.input)))
    quant = MatMulNBitsQuantizer(
        model, bits=a.bits, block_size=a.block_size, is_symmetric=a.symmetric, accuracy_level=a.accuracy_level,
        nodes_to_exclude=a.exclude, op_types_to_quantize=("MatMul",),
        quant_format=QuantFormat.QDQ if a.format == "qdq" else QuantFormat.QOperator)
    del model
    quant.process()
    out = quant.model.model
    kinds = {}
    for n in out.graph.node:
        if n.op_type in ("MatMulNBits", "DequantizeLinear", "MatMul"):
            kinds[n.op_type] = kinds.get(n.op_type, 0) + 1
    for p in (a.output, a.output + ".data"):
        if os.path.exists(p):
            os.remove(p)
    quant.model.save_model_to_file(a.output, use_external_data_format=external)
    size = os.path.getsize(a.output) + (os.path.getsize(a.output + ".data") if external else 0)
    print(f"wrote {a.output}{' (+ .data)' if external else ''}: {size:,} bytes, {a.bits}-bit "
          f"block {a.block_size} {'symmetric' if a.symmetric else 'with zero points'}, format {a.format}, "
          f"accuracy_level {a.accuracy_level}; nodes {kinds}; {time.perf_counter() - t0:.1f} s")
    if a.check:
        check(a.input, a.output)


if __name__ == "__main__":
    main()
