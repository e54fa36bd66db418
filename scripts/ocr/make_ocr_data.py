#!/usr/bin/env python3
"""Render a deterministic set of single-line text images for a PP-OCR recognizer.

Each sample is one printed text line (5-20 characters: words, numbers, codes,
dates, prices, mixed), drawn with a random system font (DejaVu, Liberation) at
a random size, with mild degradations (colour/contrast, small rotation, blur,
noise, JPEG), cropped with small random margins as a text detector would, and
then preprocessed exactly as PP-OCR's recognizer (PaddleOCR / RapidOCR
TextRecognizer.resize_norm_img) does:

  * resize to height 48 keeping the aspect ratio (width ceil(48*w/h), at most
    the fixed width W, default 320; longer lines are squeezed to W),
  * channels in BGR order (PaddleOCR reads images with cv2),
  * x/255, then (x-0.5)/0.5,
  * padded on the right with zeros (after normalization) up to W,
  * NCHW float32 [N, 3, 48, W].

Writes OUT.npy and a labels file (one ground-truth line per sample, UTF-8).
The same arguments (and the same fonts installed) give the same bytes.

Example:
  python make_ocr_data.py --out /work/ocr/ocr_eval.npy \
      --labels /work/ocr/ocr_eval_labels.txt --count 400 --seed 45
  python make_ocr_data.py --out /work/ocr/ocr_calib.npy \
      --labels /work/ocr/ocr_calib_labels.txt --count 300 --seed 4545 \
      --exclude-labels /work/ocr/ocr_eval_labels.txt

Needs numpy and pillow (and fonts: Debian's fonts-dejavu-core and
fonts-liberation).
"""
import argparse
import glob
import io
import math
import os
import random
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

H = 48

DEFAULT_FONT_GLOBS = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans*.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSerif*.ttf",
    "/usr/share/fonts/truetype/liberation/Liberation*.ttf",
]

# Common English words (for realistic word lines).
WORDS = """
the of and to in is for on that by with from at as this be are or an was it
not have all new more can will about page one home search free your which
data time other has its out use any may there only also contact info after
service first price date back top name year email number order report system
product business total public list city state group center world company
road street north south east west account office market school water local
power energy money credit total amount invoice receipt customer address phone
station hotel garden bank park bridge river window table paper letter open
close exit entry floor level room door green black white orange yellow blue
red silver golden coffee bread fresh milk sugar salt cheese apple lemon tomato
daily weekly monthly annual model serial batch version update status ready
warning notice please thank welcome cash card change discount member sale
""".split()

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
PUNCT = "-.,:/#()%&+@!?'*"
# Serial-number style codes leave out O and I (as VINs and many part numbers
# do); free random strings keep them, so some O/0 and I/l/1 ambiguity remains.
CODE_UPPER = "ABCDEFGHJKLMNPQRSTUVWXYZ"
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def cap(w, rng):
    r = rng.random()
    if r < 0.45:
        return w
    if r < 0.85:
        return w[:1].upper() + w[1:]
    return w.upper()


def gen_text(rng):
    """One line of 5..20 printable ASCII characters (single inner spaces)."""
    kind = rng.choices(
        ["words", "word_num", "number", "price", "date", "time", "code",
         "phone", "random", "email"],
        weights=[28, 10, 8, 8, 8, 5, 12, 6, 6, 6])[0]
    if kind == "words":
        n = rng.randint(1, 3)
        s = " ".join(cap(rng.choice(WORDS), rng) for _ in range(n))
        if rng.random() < 0.25:
            s += rng.choice(".,:!?")
    elif kind == "word_num":
        s = cap(rng.choice(WORDS), rng) + rng.choice([" ", " No.", ": ", " #", "-"]) \
            + str(rng.randint(1, 99999))
    elif kind == "number":
        n = rng.randint(5, 12)
        s = "".join(rng.choice(DIGITS) for _ in range(n))
        if rng.random() < 0.4:
            s = f"{int(s):,}"
    elif kind == "price":
        cur = rng.choice(["$", "EUR ", "USD ", "", "Total "])
        s = f"{cur}{rng.randint(0, 99999)}.{rng.randint(0, 99):02d}"
    elif kind == "date":
        y, m, d = rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28)
        s = rng.choice([f"{y}-{m:02d}-{d:02d}", f"{d:02d}/{m:02d}/{y}",
                        f"{d} {MONTHS[m - 1]} {y}", f"{MONTHS[m - 1]} {d}, {y}",
                        f"{d:02d}.{m:02d}.{y}"])
    elif kind == "time":
        s = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        if rng.random() < 0.5:
            s = rng.choice(["at ", "Time ", "T"]) + s
    elif kind == "code":
        parts = []
        for _ in range(rng.randint(2, 4)):
            pool = rng.choice([CODE_UPPER + DIGITS, CODE_UPPER, DIGITS])
            parts.append("".join(rng.choice(pool) for _ in range(rng.randint(2, 5))))
        s = rng.choice(["-", "-", "/", "", "_", "."]).join(parts)
    elif kind == "phone":
        s = rng.choice(["+1 ", "+44 ", "(0", "Tel ", ""]) + \
            "".join(rng.choice(DIGITS) for _ in range(3)) + rng.choice(["-", " ", ""]) + \
            "".join(rng.choice(DIGITS) for _ in range(4))
        if s.startswith("(0"):
            s = s[:4] + ")" + s[4:]
    elif kind == "email":
        s = rng.choice(WORDS) + rng.choice([".", "_", ""]) + \
            str(rng.randint(0, 99)) + "@" + rng.choice(["mail", "web", "box", "corp"]) + \
            rng.choice([".com", ".org", ".net", ".de"])
    else:  # random mixed characters
        pool = UPPER + LOWER + DIGITS + PUNCT
        s = "".join(rng.choice(pool) for _ in range(rng.randint(5, 12)))
    s = " ".join(s.split())
    if len(s) < 5:
        s = s + rng.choice([" ", "-", ""]) + str(rng.randint(100, 9999))
    if len(s) > 20:
        s = s[:20].rstrip()
    if len(s) < 5:
        return gen_text(rng)
    return s


def list_fonts(globs):
    fonts = []
    for g in globs:
        fonts.extend(glob.glob(g))
    # Math fonts have odd ASCII metrics; leave them out.
    fonts = sorted(set(f for f in fonts if "Math" not in os.path.basename(f)))
    return fonts


def render(text, font_path, rng):
    size = rng.randint(18, 44)
    font = ImageFont.truetype(font_path, size)
    l, t, r, b = font.getbbox(text)
    asc, desc = font.getmetrics()
    tw, th = r - l, asc + desc
    # Margins as a detector's (unclipped) box would leave.
    ml, mr = rng.randint(1, max(2, size // 3)), rng.randint(1, max(2, size // 3))
    mt, mb = rng.randint(1, max(2, size // 5)), rng.randint(1, max(2, size // 5))
    W0, H0 = tw + ml + mr, th + mt + mb
    pad = size  # room for rotation before cropping
    bg_level = rng.randint(170, 255)
    fg_level = rng.randint(0, max(0, bg_level - 120))
    tint = [rng.randint(-25, 25) for _ in range(3)]
    bg = tuple(int(np.clip(bg_level + tint[i], 0, 255)) for i in range(3))
    ftint = [rng.randint(-30, 30) for _ in range(3)] if rng.random() < 0.3 else [0, 0, 0]
    fg = tuple(int(np.clip(fg_level + ftint[i], 0, 255)) for i in range(3))
    if rng.random() < 0.1:  # light text on a dark background
        bg, fg = tuple(255 - c for c in bg), tuple(255 - c for c in fg)
    img = Image.new("RGB", (W0 + 2 * pad, H0 + 2 * pad), bg)
    d = ImageDraw.Draw(img)
    d.text((pad + ml - l, pad + mt), text, font=font, fill=fg)
    angle = rng.uniform(-1.5, 1.5)
    if abs(angle) > 0.2:
        img = img.rotate(angle, resample=Image.BILINEAR, fillcolor=bg)
    dx, dy = rng.randint(-2, 2), rng.randint(-2, 2)
    img = img.crop((pad + dx, pad + dy, pad + dx + W0, pad + dy + H0))
    blur = rng.choice([0, 0, 0.3, 0.5, 0.7, 1.0])
    if blur:
        img = img.filter(ImageFilter.GaussianBlur(blur * size / 32))
    a = np.asarray(img).astype(np.float32)
    # Contrast/brightness jitter and sensor noise.
    c = rng.uniform(0.75, 1.1)
    a = (a - 128.0) * c + 128.0 + rng.uniform(-15, 15)
    sigma = rng.choice([0, 2, 4, 6, 8])
    if sigma:
        nrng = np.random.default_rng(rng.getrandbits(32))
        a = a + nrng.normal(0, sigma, a.shape)
    img = Image.fromarray(np.clip(a, 0, 255).round().astype(np.uint8))
    if rng.random() < 0.3:
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=rng.randint(40, 90))
        buf.seek(0)
        img = Image.open(buf).convert("RGB")
    return img


def preprocess(img, width):
    """PP-OCR rec preprocessing: BGR, height 48 keeping aspect, pad to width."""
    w, h = img.size
    rw = min(width, int(math.ceil(H * w / float(h))))
    im = img.resize((rw, H), Image.BILINEAR)
    a = np.asarray(im).astype(np.float32)[:, :, ::-1]  # RGB -> BGR
    a = a.transpose(2, 0, 1) / 255.0
    a = (a - 0.5) / 0.5
    out = np.zeros((3, H, width), dtype=np.float32)
    out[:, :, :rw] = a
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output .npy, [N,3,48,W] float32")
    ap.add_argument("--labels", required=True, help="output labels file, one line per sample")
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument("--width", type=int, default=320, help="fixed padded width (default 320)")
    ap.add_argument("--exclude-labels", help="labels file whose lines must not be reused "
                    "(to keep a calibration set disjoint from the eval set)")
    ap.add_argument("--font-glob", action="append",
                    help="font file glob (repeatable; default DejaVu + Liberation)")
    ap.add_argument("--png-dir", help="also save each rendered crop as PNG here (to look at)")
    args = ap.parse_args()

    fonts = list_fonts(args.font_glob or DEFAULT_FONT_GLOBS)
    if not fonts:
        sys.exit("no fonts found (apt-get install fonts-dejavu-core fonts-liberation)")
    exclude = set()
    if args.exclude_labels:
        with open(args.exclude_labels, encoding="utf-8") as f:
            exclude = set(f.read().split("\n"))
    rng = random.Random(args.seed)
    xs, labels, seen = [], [], set(exclude)
    if args.png_dir:
        os.makedirs(args.png_dir, exist_ok=True)
    while len(labels) < args.count:
        text = gen_text(rng)
        if text in seen:
            continue
        seen.add(text)
        font = fonts[rng.randrange(len(fonts))]
        img = render(text, font, rng)
        if args.png_dir:
            img.save(os.path.join(args.png_dir, f"{len(labels):04d}.png"))
        xs.append(preprocess(img, args.width))
        labels.append(text)
    x = np.stack(xs).astype(np.float32)
    np.save(args.out, x)
    with open(args.labels, "w", encoding="utf-8") as f:
        f.write("\n".join(labels) + "\n")
    print(f"wrote {args.out} {list(x.shape)} {x.dtype} and {args.labels} "
          f"({len(labels)} lines; {len(fonts)} fonts, seed {args.seed})")


if __name__ == "__main__":
    main()
