#!/usr/bin/env python3
"""4-bit weight-only quantization of a REAL pretrained transformer, scored on a real task.

Manual experiment for issue 42; never run in CI.  Nothing is downloaded at run time.

Model: PP-OCRv4 text recognizer (SVTR-LCNet, CTC head) shipped inside the PyPI wheel
``rapidocr-onnxruntime==1.4.4`` as ``rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx``
(opset 12, 10,857,958 bytes; its 6623-entry character set is in the ONNX metadata key
``character``).  A PP-LCNet conv backbone feeds 2 SVTR global-mixing transformer blocks
(LayerNorm -> MultiHeadAttention (qkv 120x360, Q*K^T, softmax*V, proj 120x120) -> LayerNorm ->
MLP 120x240x120) and a 120x6625 CTC classifier; the 9 MatMul weights are Constant nodes.

Data: single text lines rendered with PIL in DejaVu fonts (Debian ``fonts-dejavu-core``, at
/usr/share/fonts/truetype/dejavu) from real English text (/usr/share/common-licenses: the
calibration lines come from Apache-2.0 and the evaluation lines from GPL-3, so they never
overlap).  Scored by the rapidocr pre-processing (height 48, pad to width 320, (x/255-0.5)/0.5)
and CTC greedy decoding.

Setup (once):
    python3 -m venv /work/rtvenv
    /work/rtvenv/bin/pip install pillow numpy onnx onnxruntime
    /work/rtvenv/bin/pip download --no-deps rapidocr-onnxruntime==1.4.4 -d /tmp/rt
    unzip -o /tmp/rt/rapidocr_onnxruntime-1.4.4-py3-none-any.whl 'rapidocr_onnxruntime/models/*' -d /tmp/rt/rapid
Run:
    /work/rtvenv/bin/python tests/large/real_transformer_int4.py \
        --model /tmp/rt/rapid/rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx \
        --bin build/bin --lib build/lib --work /tmp/rt/run

It writes calib.npz / eval_x.npy, runs compress-model --int4 (rtn, gptq, awq, and rtn with
format=matmulnbits), runs every model in Whittle (run-model --output-dir) and ONNX Runtime, and
prints exact-match line accuracy, character accuracy (1 - CER), per-position top-1 agreement
with the fp32 model, Whittle-vs-ORT agreement and file sizes.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from PIL import Image, ImageDraw, ImageFont

FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONTS = ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSans-Bold.ttf"]
H, W = 48, 320


def text_lines(path, charset, rng, n, max_chars=22):
    words = re.sub(r"\s+", " ", open(path, encoding="utf-8", errors="ignore").read()).split(" ")
    lines, cur = [], ""
    for w in words:
        if not w:
            continue
        if cur and len(cur) + 1 + len(w) > max_chars:
            lines.append(cur)
            cur = w
        else:
            cur = (cur + " " + w) if cur else w
    lines.append(cur)
    lines = [l for l in lines if 4 <= len(l) <= max_chars and all(c in charset for c in l)]
    lines = sorted(set(lines))
    rng.shuffle(lines)
    return lines[:n]


def render(text, font_path, size):
    font = ImageFont.truetype(font_path, size)
    l, t, r, b = font.getbbox(text)
    pad = 6
    img = Image.new("RGB", (r - l + 2 * pad, b - t + 2 * pad), (255, 255, 255))
    ImageDraw.Draw(img).text((pad - l, pad - t), text, font=font, fill=(0, 0, 0))
    return img


def preprocess(img):
    # rapidocr TextRecognizer.resize_norm_img with max_wh_ratio = 320/48
    w, h = img.size
    rw = min(W, int(np.ceil(H * w / h)))
    arr = np.asarray(img.resize((rw, H), Image.BILINEAR), dtype=np.float32)
    arr = arr.transpose(2, 0, 1)[::-1] / 255.0  # RGB -> BGR as cv2 would give
    arr = (arr - 0.5) / 0.5
    out = np.zeros((3, H, W), np.float32)
    out[:, :, :rw] = arr
    return out


def make_set(path, charset, n, seed):
    rng = random.Random(seed)
    lines = text_lines(path, charset, rng, n)
    xs = []
    for i, l in enumerate(lines):
        xs.append(preprocess(render(l, os.path.join(FONT_DIR, FONTS[i % len(FONTS)]), rng.choice([24, 28, 32, 36]))))
    return np.stack(xs), lines


def ctc_decode(probs, chars):
    ids = probs.argmax(-1)
    out = []
    for row in ids:
        s, prev = [], -1
        for k in row:
            if k != prev and k != 0:
                s.append(chars[k])
            prev = k
        out.append("".join(s))
    return ids, out


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        p, d[0] = d[0], i
        for j, cb in enumerate(b, 1):
            p, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, p + (ca != cb))
    return d[len(b)]


def run(cmd, env, log):
    print("$ " + " ".join(cmd), flush=True)
    t = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    log.write("$ " + " ".join(cmd) + "\n" + r.stdout + r.stderr + "\n")
    if r.returncode != 0:
        print("FAILED rc=%d\n%s" % (r.returncode, (r.stdout + r.stderr)[-3000:]), flush=True)
        return False
    print("  ok (%.1f s)" % (time.time() - t), flush=True)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="ch_PP-OCRv4_rec_infer.onnx from rapidocr-onnxruntime 1.4.4")
    ap.add_argument("--bin", required=True, help="folder with compress-model and run-model")
    ap.add_argument("--lib", default=None, help="folder with libwhittle.so (prepended to LD_LIBRARY_PATH)")
    ap.add_argument("--work", default="/tmp/rt/run")
    ap.add_argument("--n-eval", type=int, default=300)
    ap.add_argument("--n-calib", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--block", type=int, default=32)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    env = dict(os.environ)
    if a.lib:
        env["LD_LIBRARY_PATH"] = a.lib + ":" + env.get("LD_LIBRARY_PATH", "")
    log = open(os.path.join(a.work, "commands.log"), "w")

    m = onnx.load(a.model)
    meta = {p.key: p.value for p in m.metadata_props}
    chars = ["blank"] + meta["character"].splitlines() + [" "]
    charset = set(chars[1:])
    in_name, out_name = m.graph.input[0].name, m.graph.output[0].name

    calib_x, _ = make_set("/usr/share/common-licenses/Apache-2.0", charset, a.n_calib, 1)
    eval_x, eval_y = make_set("/usr/share/common-licenses/GPL-3", charset, a.n_eval, 2)
    assert not set(eval_y) & set(_), "calibration and evaluation lines overlap"
    calib = os.path.join(a.work, "calib.npz")
    np.savez(calib, **{in_name: calib_x})
    evx = os.path.join(a.work, "eval_x.npy")
    np.save(evx, eval_x)
    Image.fromarray(((eval_x[0][::-1].transpose(1, 2, 0) * 0.5 + 0.5) * 255).astype(np.uint8)).save(os.path.join(a.work, "sample0.png"))
    print("calibration %d lines (Apache-2.0), evaluation %d lines (GPL-3), e.g. %r" % (len(calib_x), len(eval_x), eval_y[:3]))

    cm = os.path.join(a.bin, "compress-model")
    rm = os.path.join(a.bin, "run-model")
    b = a.block
    variants = {
        "fp32": None,
        "rtn": ["--int4", "block=%d,method=rtn" % b],
        "gptq": ["--int4", "block=%d,method=gptq" % b, "--calibration-data", "npz:" + calib],
        "awq": ["--int4", "block=%d,method=awq" % b, "--calibration-data", "npz:" + calib],
        "rtn-matmulnbits": ["--int4", "block=%d,method=rtn,format=matmulnbits" % b],
    }
    results, probs = {}, {}
    for name, opts in variants.items():
        path = a.model if opts is None else os.path.join(a.work, name + ".onnx")
        row = {"file_bytes": None, "error": None}
        if opts is not None:
            cmd = [cm, a.model, "-o", path, "--no-bench", "--input-shape", "%s=1,3,%d,%d" % (in_name, H, W),
                   "--threads", str(a.threads)] + opts
            if not run(cmd, env, log):
                row["error"] = "compress-model failed"
                results[name] = row
                continue
        row["file_bytes"] = os.path.getsize(path)
        outdir = os.path.join(a.work, "out_" + name)
        os.makedirs(outdir, exist_ok=True)
        if run([rm, path, "--input", "%s=%s" % (in_name, evx), "--output-dir", outdir, "--threads", str(a.threads)], env, log):
            probs[(name, "whittle")] = np.load(os.path.join(outdir, out_name + ".npy"))
        else:
            row["error"] = "run-model failed"
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            probs[(name, "ort")] = np.concatenate([sess.run(None, {in_name: eval_x[i:i + 32]})[0] for i in range(0, len(eval_x), 32)])
        except Exception as e:  # noqa: BLE001
            row["error"] = (row["error"] or "") + " ORT: " + str(e)[:500]
            print("ORT failed on %s: %s" % (name, e))
        results[name] = row

    ref = {rt: ctc_decode(probs[("fp32", rt)], chars)[0] for rt in ("whittle", "ort") if ("fp32", rt) in probs}
    for (name, rt), p in sorted(probs.items()):
        ids, txt = ctc_decode(p, chars)
        exact = float(np.mean([t == y for t, y in zip(txt, eval_y)]))
        cer = sum(edit_distance(t, y) for t, y in zip(txt, eval_y)) / sum(len(y) for y in eval_y)
        r = results[name].setdefault(rt, {})
        r.update(exact=exact, exact_stripped=float(np.mean([t.strip() == y for t, y in zip(txt, eval_y)])), char_acc=1 - cer)
        if rt in ref:
            r["top1_agree_fp32"] = float(np.mean(ids == ref[rt]))
            nb = ref[rt] != 0
            r["top1_agree_fp32_nonblank"] = float(np.mean(ids[nb] == ref[rt][nb]))
    for name in results:
        if (name, "whittle") in probs and (name, "ort") in probs:
            pw, po = probs[(name, "whittle")], probs[(name, "ort")]
            results[name]["whittle_vs_ort"] = {
                "max_abs_diff": float(np.abs(pw - po).max()),
                "max_rel_diff": float(np.abs(pw - po).max() / np.abs(po).max()),
                "top1_agree": float(np.mean(pw.argmax(-1) == po.argmax(-1))),
                "same_text": float(np.mean([x == y for x, y in zip(ctc_decode(pw, chars)[1], ctc_decode(po, chars)[1])])),
            }
    json.dump(results, open(os.path.join(a.work, "results.json"), "w"), indent=1)
    print("\nexact = line exact match (strip = ignoring leading/trailing spaces), char = 1 - CER,"
          " agree = per-position argmax agreement with the fp32 model in the same runtime (all 40 / non-blank)")
    print("%-16s %11s | %-40s | %-40s | %s" % ("variant", "bytes", "Whittle exact/strip/char/agree/agree-nb", "ORT exact/strip/char/agree/agree-nb", "W-vs-ORT maxabs/top1/text"))
    for name, r in results.items():
        def f(rt):
            x = r.get(rt)
            return "%.3f/%.3f/%.4f/%.4f/%.4f" % (x["exact"], x["exact_stripped"], x["char_acc"], x.get("top1_agree_fp32", float("nan")),
                                                 x.get("top1_agree_fp32_nonblank", float("nan"))) if x else "-"
        wv = r.get("whittle_vs_ort")
        print("%-16s %11s | %-40s | %-40s | %s %s" % (name, r["file_bytes"], f("whittle"), f("ort"),
              "%.2e / %.4f / %.3f" % (wv["max_abs_diff"], wv["top1_agree"], wv["same_text"]) if wv else "-", r["error"] or ""))


if __name__ == "__main__":
    sys.exit(main())
