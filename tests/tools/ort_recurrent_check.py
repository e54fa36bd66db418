#!/usr/bin/env python3
"""Cross-check Whittle's RNN, GRU and LSTM against ONNX Runtime.

Builds small single-node models with random weights (onnx.helper): every direction, layout 0
and 1, sequence_lens with shorter sequences, initial states, peepholes, clip, input_forget,
linear_before_reset, non-default activations, absent outputs, and weights both as initializers
(Whittle's load-time path) and as graph inputs (its per-call path). Runs each in ONNX Runtime
(layout 1 as its layout-0 twin with transposed inputs and outputs: ONNX Runtime's CPU kernels
take layout 0 only) and in Whittle (run-model, CPU and reference kernels) and requires max relative error <= 1e-4 on every output, where the
relative error of an element is |whittle - ort| / max(|ort|, 1e-3). Prints one line per model
and exits non-zero if any fails. Run by ctest as `ort_recurrent_check` with the interpreter from
scripts/install-check-deps.sh.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

TOL = 1e-4
PROVIDERS = ("cpu", "reference")  # Whittle's fast CPU kernels and its reference ones
SEQ, BATCH, INPUT, HIDDEN = 7, 3, 5, 4
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
# name, op, opset, attributes, options
CONFIGS = [
    ("lstm_fwd_bias", "LSTM", 13, {}, dict(bias=True)),
    ("lstm_bidi_layout1_lens_peep", "LSTM", 14, {"direction": "bidirectional", "layout": 1},
     dict(bias=True, lens=True, init=True, peep=True)),
    ("lstm_rev_clip_forget", "LSTM", 14, {"direction": "reverse", "clip": 0.3, "input_forget": 1},
     dict(bias=True, lens=True, init=True)),
    ("lstm_yh_only_acts", "LSTM", 14,
     {"activations": ["HardSigmoid", "Softsign", "ScaledTanh"], "activation_alpha": [0.3, 1.5],
      "activation_beta": [0.4, 0.8]}, dict(bias=True, outputs=("", "Y_h", ""))),
    ("lstm_bidi_weights_as_inputs", "LSTM", 14, {"direction": "bidirectional"},
     dict(bias=True, lens=[2, SEQ, 0], init=True, weights_as_inputs=True)),
    ("gru_bidi_layout1_lens_lbr", "GRU", 14, {"direction": "bidirectional", "layout": 1, "linear_before_reset": 1},
     dict(bias=True, lens=True, init=True)),
    ("gru_fwd_init", "GRU", 13, {}, dict(bias=True, init=True)),
    ("gru_rev_lens0_clip", "GRU", 14, {"direction": "reverse", "clip": 0.5}, dict(bias=True, lens=[SEQ, 0, 3])),
    ("rnn_bidi_lens_relu", "RNN", 14, {"direction": "bidirectional", "activations": ["Relu", "Tanh"]},
     dict(bias=True, lens=True, init=True)),
    ("rnn_fwd_layout1_leaky", "RNN", 14, {"layout": 1, "activations": ["LeakyRelu"], "activation_alpha": [0.2]},
     dict(bias=True, lens=True)),
]


def make_data(op, attrs, opt, rng):
    """Random inputs in layout 0: {name: array} in ONNX input order (absent ones left out)."""
    nd = 2 if attrs.get("direction") == "bidirectional" else 1
    g = GATES[op]
    f32 = lambda *s: rng.uniform(-1, 1, size=s).astype(np.float32)
    data = {"X": f32(SEQ, BATCH, INPUT), "W": f32(nd, g * HIDDEN, INPUT), "R": f32(nd, g * HIDDEN, HIDDEN)}
    if opt.get("bias"):
        data["B"] = f32(nd, 2 * g * HIDDEN)
    if opt.get("lens"):
        lens = opt["lens"] if isinstance(opt["lens"], list) else [SEQ, 4, 1]
        data["sequence_lens"] = np.array(lens, dtype=np.int32)
    if opt.get("init"):
        data["initial_h"] = f32(nd, BATCH, HIDDEN)
        if op == "LSTM":
            data["initial_c"] = f32(nd, BATCH, HIDDEN)
    if opt.get("peep"):
        data["P"] = f32(nd, 3 * HIDDEN)
    return data


def write_model(op, opset, attrs, opt, data, layout, path):
    """Writes the model for `layout` (data is in layout 0 and transposed here); returns the graph
    input feeds and the names of the present outputs."""
    nd = 2 if attrs.get("direction") == "bidirectional" else 1
    attrs = dict(attrs)
    attrs.pop("layout", None)
    if layout:
        attrs["layout"] = 1
        data = dict(data)
        data["X"] = data["X"].transpose(1, 0, 2).copy()
        for k in ("initial_h", "initial_c"):
            if k in data:
                data[k] = data[k].transpose(1, 0, 2).copy()
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h"] + (["initial_c", "P"] if op == "LSTM" else [])
    names = [k if k in data else "" for k in order]
    while names and names[-1] == "":
        names.pop()
    outputs = list(opt.get("outputs", ("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h")))
    node = helper.make_node(op, names, outputs, hidden_size=HIDDEN, **attrs)
    feeds = {"X": data["X"]}
    inits = []
    for k, v in data.items():
        if k == "X":
            continue
        if opt.get("weights_as_inputs") and k in ("W", "R", "B"):
            feeds[k] = v
        else:
            inits.append(numpy_helper.from_array(v, k))
    state = (BATCH, nd, HIDDEN) if layout else (nd, BATCH, HIDDEN)
    y_shape = (BATCH, SEQ, nd, HIDDEN) if layout else (SEQ, nd, BATCH, HIDDEN)
    ins = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, y_shape if i == 0 else state)
            for i, o in enumerate(outputs) if o]
    graph = helper.make_graph([node], op.lower(), ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return feeds, [o for o in outputs if o]


def to_layout1(name, value):
    """An ONNX Runtime output of the layout-0 twin model in layout 1."""
    return value.transpose(2, 0, 1, 3) if name == "Y" else value.transpose(1, 0, 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="directory with run-model")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    failures = 0
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="whittle_ortrnn_") as tmp:
        for name, op, opset, attrs, opt in CONFIGS:
            path = os.path.join(tmp, name + ".onnx")
            data = make_data(op, attrs, opt, rng)
            layout = attrs.get("layout", 0)
            feeds, outputs = write_model(op, opset, attrs, opt, data, layout, path)
            cmd = [os.path.join(args.bin, "run-model"), path]
            for k, v in feeds.items():
                np.save(os.path.join(tmp, "%s_%s.npy" % (name, k)), v)
                cmd += ["--input", "%s=%s" % (k, os.path.join(tmp, "%s_%s.npy" % (name, k)))]
            for provider in PROVIDERS:
                out_dir = os.path.join(tmp, "out_%s_%s" % (name, provider))
                os.makedirs(out_dir)
                subprocess.run(cmd + ["--device", provider, "--output-dir", out_dir], check=True,
                               stdout=subprocess.DEVNULL)
            # ONNX Runtime's CPU kernels do not take layout 1: it runs the layout-0 twin.
            ort_path, ort_feeds = path, feeds
            if layout:
                ort_path = os.path.join(tmp, name + "_layout0.onnx")
                ort_feeds, _ = write_model(op, opset, attrs, opt, data, 0, ort_path)
            sess = ort.InferenceSession(ort_path, providers=["CPUExecutionProvider"])
            want = sess.run(outputs, ort_feeds)
            if layout:
                want = [to_layout1(o, w) for o, w in zip(outputs, want)]
            for provider in PROVIDERS:
                out_dir = os.path.join(tmp, "out_%s_%s" % (name, provider))
                rel = 0.0
                for o, w in zip(outputs, want):
                    got = np.load(os.path.join(out_dir, o + ".npy"))
                    if got.shape != w.shape:
                        print("FAIL %s: output %s has shape %s, ONNX Runtime %s" % (name, o, got.shape, w.shape))
                        rel = float("inf")
                        continue
                    rel = max(rel, float(np.max(np.abs(got - w) / np.maximum(np.abs(w), 1e-3))))
                worst = max(worst, rel)
                ok = rel <= TOL
                failures += not ok
                print("%s %-30s %-9s max rel err %.3g" % ("ok  " if ok else "FAIL", name, provider, rel))
    print("worst max relative error %.3g over %d models x %d providers (tolerance %g)" % (worst, len(CONFIGS), len(PROVIDERS), TOL))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
