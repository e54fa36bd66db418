#!/usr/bin/env python3
"""Fetch the PP-OCRv4 text recognizer (paddle2onnx export) from PyPI.

Downloads the wheel rapidocr-onnxruntime==1.4.4 with pip (no install, no
dependencies), takes rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx out
of it, checks its sha256, and writes the character dictionary that the model
carries in its metadata_props 'character' (6623 lines; the wheel has no
separate dict file) as ppocr_keys_v1.txt.

  python get_model.py --dir /work/ocr

Needs pip, and onnx or onnxruntime (to read the metadata).
"""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

PACKAGE = "rapidocr-onnxruntime==1.4.4"
WHEEL = "rapidocr_onnxruntime-1.4.4-py3-none-any.whl"
MEMBER = "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"
SHA256 = "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"
DICT_SHA256 = "a1c84d9bdb9ab29043c58896224d32941783eb821629618416dcb08f12886492"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_character(model):
    try:
        import onnx
        m = onnx.load(model)
        meta = {p.key: p.value for p in m.metadata_props}
    except ImportError:
        import onnxruntime as ort
        s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        meta = dict(s.get_modelmeta().custom_metadata_map)
    if "character" not in meta:
        sys.exit(f"{model} has no metadata_props 'character'")
    return meta["character"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/work/ocr", help="where to put the model and dict")
    ap.add_argument("--wheel", help="use this already downloaded wheel instead of pip download")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    model = os.path.join(args.dir, os.path.basename(MEMBER))
    if not (os.path.exists(model) and sha256(model) == SHA256):
        wheel = args.wheel
        tmp = None
        if not wheel:
            tmp = tempfile.mkdtemp(prefix="rapidocr_")
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                            "--only-binary=:all:", PACKAGE, "-d", tmp], check=True)
            wheel = os.path.join(tmp, WHEEL)
        with zipfile.ZipFile(wheel) as z, open(model, "wb") as out:
            out.write(z.read(MEMBER))
        got = sha256(model)
        if got != SHA256:
            sys.exit(f"sha256 mismatch for {model}: {got}, expected {SHA256}")
    print(f"model {model} sha256 {SHA256}")
    keys = os.path.join(args.dir, "ppocr_keys_v1.txt")
    with open(keys, "w", encoding="utf-8") as f:
        f.write(read_character(model) + "\n")
    got = sha256(keys)
    note = "" if got == DICT_SHA256 else f" (differs from the recorded {DICT_SHA256})"
    print(f"dict  {keys} sha256 {got}{note}")


if __name__ == "__main__":
    main()
