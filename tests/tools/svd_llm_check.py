#!/usr/bin/env python3
"""compress-model --svd with calibration data (whitened SVD, SVD-LLM) on the exported decoder
tests/corpus/decoder_tiny_op17.onnx against the same truncation computed here with NumPy from ONNX
Runtime's activations, which Whittle did not compute:

  C = X^T X over every calibration position (X: the layer's input, taken from ONNX Runtime), with
  Whittle's documented ridge (1e-6 * mean diag + 1e-12); L = cholesky(C); L^T W = U S V^T;
  W_r = L^-T U_r S_r V_r^T (SVD-LLM, Wang et al. 2024, arXiv:2403.07378).

Whittle gathers the statistics in groups within a memory budget (one group for a model this
small; ctest DecoderPasses.WhitenedSvdInStatisticsGroupsEqualsOneGroup covers several) and maps each
SVD back to the weight before the next group; the output's two factors per layer must multiply to W_r:
max |X (U V) - X W_r| <= 1e-4 * max |X W_r| per layer, for every factorized layer (q/o/gate/up/down
of 4 layers at rank 48; k/v stay whole, rank 48 is their break-even). The plain SVD (whiten=0) must
equal NumPy's rank-48 truncation of W the same way.
Usage: svd_llm_check.py --bin DIR --root DIR
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

MAX_REL = 1e-4
RANK = 48


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    src = os.path.join(args.root, "tests", "corpus", "decoder_tiny_op17.onnx")
    model = onnx.load(src)
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    layers = [n for n in model.graph.node
              if n.op_type == "MatMul" and n.input[1] in weights and "lm_head" not in n.name]
    ids = np.random.default_rng(11).integers(0, 2048, (16, 24)).astype(np.int64)
    n, t = ids.shape
    feeds = {"input_ids": ids, "attention_mask": np.ones((n, t), np.int64),
             "position_ids": np.tile(np.arange(t), (n, 1)).astype(np.int64)}
    for node in layers:
        model.graph.output.append(onnx.helper.make_tensor_value_info(node.input[0], onnx.TensorProto.FLOAT, None))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for i in sess.get_inputs():
        if i.name.startswith("past_key_values"):
            feeds[i.name] = np.zeros((n, 2, 0, 32), np.float32)
    acts = sess.run([node.input[0] for node in layers], feeds)

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        cal = os.path.join(tmp, "ids.npz")
        np.savez(cal, input_ids=ids)
        for whiten in (1, 0):
            out = os.path.join(tmp, "svd%d.onnx" % whiten)
            cmd = [os.path.join(args.bin, "compress-model"), src, "-o", out, "--no-bench",
                   "--svd", "rank=%d,exclude=/model/lm_head/MatMul,whiten=%d" % (RANK, whiten)]
            if whiten:
                cmd += ["--calibration-data", "npz:" + cal]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stdout + r.stderr)
                return 1
            got = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(out).graph.initializer}
            checked = 0
            for node, x in zip(layers, acts):
                u = [k for k in got if k.startswith(node.name + "/svd_u")]
                v = [k for k in got if k.startswith(node.name + "/svd_v")]
                if not u:
                    continue
                w = weights[node.input[1]]
                x = x.reshape(-1, x.shape[-1]).astype(np.float64)
                if whiten:
                    c = x.T @ x
                    c[np.diag_indices_from(c)] += 1e-6 * np.mean(np.diag(c)) + 1e-12
                    l = np.linalg.cholesky(c)
                    uu, s, vt = np.linalg.svd(l.T @ w, full_matrices=False)
                    want = np.linalg.solve(l.T, (uu[:, :RANK] * s[:RANK]) @ vt[:RANK])
                else:
                    uu, s, vt = np.linalg.svd(w, full_matrices=False)
                    want = (uu[:, :RANK] * s[:RANK]) @ vt[:RANK]
                have = got[u[0]] @ got[v[0]]
                rel = np.abs(x @ have - x @ want).max() / np.abs(x @ want).max()
                checked += 1
                if not rel <= MAX_REL:
                    failures.append("%s whiten=%d: max rel %.3g" % (node.name, whiten, rel))
                print("%-48s whiten=%d  max rel %.2e" % (node.name, whiten, rel))
            if checked != 20:
                failures.append("whiten=%d: %d layers factorized, expected 20 (q/o/gate/up/down x 4)" % (whiten, checked))
    for f in failures:
        print("FAIL", f)
    print("svd_llm_check:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
