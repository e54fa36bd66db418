#!/usr/bin/env python3
"""Exact-line accuracy of a CTC text recognizer (PP-OCR rec) on a .npy set.

The model's output [N, T, C] is decoded greedily as PaddleOCR's CTCLabelDecode
does: argmax per position, repeats collapsed, blank (index 0) dropped. Index i
(1..len(dict)) is line i of the dictionary; index len(dict)+1 is ' '
(use_space_char; --no-space-char to leave it out). A line counts as correct
when the decoded text equals its ground truth; --spaces says how spaces count:
  ignore  (default) all spaces removed from both first, as PaddleOCR's own
          recognition metric does (ppocr/metrics/rec_metric.py RecMetric,
          ignore_space=True): the Chinese PP-OCR models drop or add spaces
          freely, which is not what compression should be judged on;
  strip   leading/trailing spaces removed, inner spaces must match;
  exact   character for character.
The other two figures are printed alongside.

Runtimes:
  ort      ONNX Runtime (CPU), batches of --chunk rows;
  whittle  Whittle's run-model: each chunk is written as a .npy, run as
           `run-model MODEL --input NAME=chunk.npy --output-dir DIR`, and
           DIR/<output name>.npy is read back;
  both     both of them, plus the share of output positions whose top-1 index
           the two runtimes agree on, and the lines whose decoded text differs.

Examples:
  python exact_line.py /work/ocr/ch_PP-OCRv4_rec_infer.onnx \
      --data /work/ocr/ocr_eval.npy --labels /work/ocr/ocr_eval_labels.txt \
      --dict /work/ocr/ppocr_keys_v1.txt --runtime both

Without --dict the dictionary is read from the model's metadata_props
'character' (paddle2onnx exports from RapidOCR carry it). Exit status: 0 on
success (whatever the accuracy), non-zero on any error; with --min-accuracy P,
also 3 when a runtime's exact-line accuracy (percent) is below P.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def die(msg, code=2):
    print(f"exact_line.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def load_model_info(path):
    """(input names, output names, metadata dict) from the ONNX file."""
    try:
        import onnx
        m = onnx.load(path, load_external_data=False)
        inits = {i.name for i in m.graph.initializer}
        ins = [i.name for i in m.graph.input if i.name not in inits]
        outs = [o.name for o in m.graph.output]
        meta = {p.key: p.value for p in m.metadata_props}
        return ins, outs, meta
    except ImportError:
        import onnxruntime as ort
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return ([i.name for i in s.get_inputs()], [o.name for o in s.get_outputs()],
                dict(s.get_modelmeta().custom_metadata_map))


def load_charset(dict_path, meta, use_space):
    if dict_path:
        with open(dict_path, "rb") as f:
            chars = [ln.decode("utf-8").rstrip("\r\n") for ln in f.read().split(b"\n")]
        if chars and chars[-1] == "":
            chars.pop()
    elif "character" in meta:
        chars = meta["character"].splitlines()
    else:
        die("no --dict given and the model has no metadata_props 'character'")
    charset = ["<blank>"] + chars
    if use_space:
        charset.append(" ")
    return charset


def ctc_greedy(idx, charset):
    """idx: [N, T] argmax indices -> list of strings."""
    texts = []
    for row in idx:
        keep = np.ones(len(row), dtype=bool)
        keep[1:] = row[1:] != row[:-1]
        keep &= row != 0
        texts.append("".join(charset[i] for i in row[keep]))
    return texts


SPACE_MODES = {
    "ignore": lambda t: t.replace(" ", ""),
    "strip": lambda t: t.strip(" "),
    "exact": lambda t: t,
}


def n_correct(pred, truth, mode):
    f = SPACE_MODES[mode]
    return sum(f(a) == f(b) for a, b in zip(pred, truth))


def run_ort(model, x, in_name, out_name, chunk, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    outs = []
    for i in range(0, len(x), chunk):
        outs.append(s.run([out_name], {in_name: x[i:i + chunk]})[0])
    return np.concatenate(outs)


def run_whittle(model, x, in_name, out_name, chunk, threads, run_model, extra, keep_dir):
    if not os.path.isfile(run_model) or not os.access(run_model, os.X_OK):
        die(f"run-model not found or not executable: {run_model} (--run-model)")
    tmp = keep_dir or tempfile.mkdtemp(prefix="ocr_whittle_")
    os.makedirs(tmp, exist_ok=True)
    outs = []
    try:
        for k, i in enumerate(range(0, len(x), chunk)):
            inp = os.path.join(tmp, f"in_{k:04d}.npy")
            odir = os.path.join(tmp, f"out_{k:04d}")
            np.save(inp, np.ascontiguousarray(x[i:i + chunk]))
            cmd = [run_model, model, "--input", f"{in_name}={inp}", "--output-dir", odir,
                   "--threads", str(threads)] + extra
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                die(f"run-model failed (exit {p.returncode}) on rows {i}..{i + chunk - 1}:\n"
                    f"  {' '.join(cmd)}\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
            f = os.path.join(odir, out_name + ".npy")
            if not os.path.exists(f):
                cands = sorted(glob.glob(os.path.join(odir, "*.npy")))
                if len(cands) != 1:
                    die(f"run-model wrote no {f} (found: {cands})")
                f = cands[0]
            outs.append(np.load(f))
            if not keep_dir:
                os.remove(inp)
                shutil.rmtree(odir)
    finally:
        if not keep_dir:
            shutil.rmtree(tmp, ignore_errors=True)
    return np.concatenate(outs)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="recognizer .onnx (input NCHW, output [N, T, C])")
    ap.add_argument("--data", required=True, help=".npy [N,3,48,W] float32, preprocessed")
    ap.add_argument("--labels", required=True, help="ground truth, one line per sample")
    ap.add_argument("--dict", help="character dictionary (one char per line); "
                    "default: the model's metadata 'character'")
    ap.add_argument("--no-space-char", action="store_true",
                    help="the model has no trailing ' ' class (use_space_char=False)")
    ap.add_argument("--spaces", choices=sorted(SPACE_MODES), default="ignore",
                    help="how spaces count in the comparison (default ignore, as PaddleOCR)")
    ap.add_argument("--runtime", choices=["ort", "whittle", "both"], default="ort")
    ap.add_argument("--run-model", default=os.path.join(REPO, "build", "bin", "run-model"),
                    help="Whittle's run-model binary (default: REPO/build/bin/run-model)")
    ap.add_argument("--whittle-arg", action="append", default=[],
                    help="extra argument for run-model (repeatable), e.g. --whittle-arg=--no-optimize")
    ap.add_argument("--chunk", type=int, default=50, help="rows per run (default 50)")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: all cores)")
    ap.add_argument("--limit", type=int, help="use only the first N samples")
    ap.add_argument("--keep-dir", help="keep Whittle's chunk inputs/outputs in this folder")
    ap.add_argument("--show-errors", type=int, default=10,
                    help="print up to N wrong lines per runtime (default 10)")
    ap.add_argument("--min-accuracy", type=float,
                    help="exit 3 when an exact-line accuracy (percent) is below this")
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = ap.parse_args()

    if not os.path.isfile(args.model):
        die(f"no model file {args.model}")
    x = np.load(args.data)
    if x.dtype != np.float32 or x.ndim != 4:
        die(f"{args.data}: expected a 4-D float32 array, got {x.dtype} {x.shape}")
    with open(args.labels, encoding="utf-8") as f:
        labels = f.read().split("\n")
    if labels and labels[-1] == "":
        labels.pop()
    if len(labels) != len(x):
        die(f"{len(labels)} labels for {len(x)} samples")
    if args.limit:
        x, labels = x[:args.limit], labels[:args.limit]

    ins, outs, meta = load_model_info(args.model)
    if len(ins) != 1:
        die(f"expected one model input, got {ins}")
    in_name, out_name = ins[0], outs[0]
    charset = load_charset(args.dict, meta, not args.no_space_char)

    runtimes = ["ort", "whittle"] if args.runtime == "both" else [args.runtime]
    result = {"model": args.model, "samples": len(x), "spaces": args.spaces, "input": in_name, "output": out_name,
              "classes_in_dict": len(charset), "runtimes": {}}
    print(f"model {args.model}\n  input {in_name} data {list(x.shape)}; output {out_name}; "
          f"{len(x)} samples; charset {len(charset)} (blank + {len(charset) - 1 - (not args.no_space_char)} "
          f"dict{' + space' if not args.no_space_char else ''})")
    idxs, texts, ys = {}, {}, {}
    for rt in runtimes:
        if rt == "ort":
            y = run_ort(args.model, x, in_name, out_name, args.chunk, args.threads)
        else:
            y = run_whittle(args.model, x, in_name, out_name, args.chunk, args.threads,
                            args.run_model, args.whittle_arg, args.keep_dir)
        if y.ndim != 3 or y.shape[0] != len(x):
            die(f"{rt}: unexpected output shape {y.shape}")
        if y.shape[2] != len(charset):
            die(f"{rt}: output has {y.shape[2]} classes, the dictionary gives {len(charset)}")
        if not np.all(np.isfinite(y)):
            die(f"{rt}: output has non-finite values")
        idx = y.argmax(axis=2)
        t = ctc_greedy(idx, charset)
        idxs[rt], texts[rt], ys[rt] = idx, t, y
        correct = n_correct(t, labels, args.spaces)
        acc = 100.0 * correct / len(x)
        others = {m: 100.0 * n_correct(t, labels, m) / len(x)
                  for m in sorted(SPACE_MODES) if m != args.spaces}
        result["runtimes"][rt] = {"exact_line_pct": acc, "correct": correct,
                                  "output_shape": list(y.shape),
                                  "exact_line_pct_other_space_modes": others}
        print(f"[{rt}] output {list(y.shape)}: exact-line accuracy {acc:.2f}% "
              f"({correct}/{len(x)}, spaces={args.spaces}; "
              + ", ".join(f"{m}: {v:.2f}%" for m, v in others.items()) + ")")
        f = SPACE_MODES[args.spaces]
        wrong = [(i, labels[i], t[i]) for i in range(len(x)) if f(t[i]) != f(labels[i])]
        for i, g, p in wrong[:args.show_errors]:
            print(f"    #{i}: truth {g!r} got {p!r}")
    if len(runtimes) == 2:
        agree = float(np.mean(idxs["ort"] == idxs["whittle"]))
        diff_lines = sum(a != b for a, b in zip(texts["ort"], texts["whittle"]))
        maxdiff = float(np.max(np.abs(ys["ort"] - ys["whittle"])))
        result["max_abs_output_diff"] = maxdiff
        result["top1_position_agreement"] = agree
        result["lines_decoded_differently"] = diff_lines
        print(f"[both] top-1 agreement over {idxs['ort'].size} positions: {100 * agree:.3f}%; "
              f"lines decoded differently: {diff_lines}/{len(x)}; max |output difference| {maxdiff:.3g}")
    if args.json:
        print(json.dumps(result))
    if args.min_accuracy is not None:
        for rt, r in result["runtimes"].items():
            if r["exact_line_pct"] < args.min_accuracy:
                print(f"exact_line.py: {rt} accuracy {r['exact_line_pct']:.2f}% < "
                      f"{args.min_accuracy}%", file=sys.stderr)
                sys.exit(3)


if __name__ == "__main__":
    main()
