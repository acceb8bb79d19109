#!/usr/bin/env python3
"""bench/under_load.py - toplu and ONNX Runtime on shared cores.

A server or batch job rarely has the machine to itself: HTTP threads, a
batcher, preprocessing or another tenant share the cores.  An engine whose
idle threads spin-wait at barriers then loses most of its speed (GNU
OpenMP's default spin-waiting once cost toplu 150x here, ONNX Runtime 4x).
This script measures each side's throughput idle and with BUSY processes
running a busy loop beside it (started and stopped by the script), and
reports loaded / idle as the share each side keeps.

For each cell (model:batch), PAIRS rounds of: toplu idle, ORT idle, toplu
loaded, ORT loaded (processes alternate, so a slow phase of the VM falls on
both).  Per side: the median over processes of each process's throughput on
the wall clock (rows of the timed runs over the timed loop's seconds,
`ips_wall`).  Until 2026-12-07 it was each process's median run time, which
on shared cores measures the runs that the scheduler left alone: a 1.3 ms
toplu run fits a scheduler slice, so its median stayed at the idle value
while the process completed half as many runs (PaddleOCR cls batch 8: "99%
kept" by medians, 49% by the clock).  Each --toplu-env
(e.g. GOMP_SPINCOUNT=300000) adds a toplu variant run with that environment,
to compare waiting policies; each --toplu-args (e.g. "--fixed-threads", the
whole batch on every thread, as before choose_threads became the default)
adds one run with those toplu_bench arguments.

    bench/under_load.py [--cells ppocr_cls:8,resnet50:8] [--pairs 3] [--seconds 4]
                        [--threads 2] [--busy 2] [--toplu-env K=V ...] [--toplu-args "ARGS" ...]
                        [--load busy|toplu:MODEL:BATCH] [--load-env K=V,...]

--load toplu:MODEL:BATCH makes the load another engine instead of busy
loops: toplu_bench processes of MODEL at BATCH with the same threads (two
shards or replicas on one machine), with --load-env's environment.

Needs build/toplu_bench (or $TOPLU_BUILD/toplu_bench) and the models of
bench/bench.py (scripts/fetch-models.sh).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (models, run_one, cache_dir)


def busy(n, load_cmd=None, load_env=None):
    """Start n load processes: busy loops, or load_cmd (another engine, e.g. a toplu_bench of 2
    threads, whose idle OpenMP threads spin at barriers as ours do); returns them."""
    if load_cmd:
        env = dict(os.environ, **(load_env or {}))
        return [subprocess.Popen(load_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                for _ in range(n)]
    return [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(n)]


def stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def runnable_others():
    """Tasks running or runnable now besides this script (/proc/loadavg's fourth field, this process counted in it),
    sampled 5 times 20 ms apart: the most seen."""
    seen = 0
    for _ in range(5):
        try:
            with open('/proc/loadavg') as f:
                seen = max(seen, int(f.read().split()[3].split('/')[0]) - 1)
        except (OSError, ValueError, IndexError):
            return -1
        time.sleep(0.02)
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--cells', default='ppocr_cls:8,resnet50:8')
    ap.add_argument('--pairs', type=int, default=3)
    ap.add_argument('--seconds', type=float, default=4)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--busy', type=int, default=2, help='busy-loop processes beside the engine (default 2)')
    ap.add_argument('--toplu-env', action='append', default=[], metavar='K=V[,K=V]',
                    help='an extra toplu variant with this environment')
    ap.add_argument('--toplu-args', action='append', default=[], metavar='"ARGS"',
                    help="an extra toplu variant with these toplu_bench arguments (e.g. --toplu-args=--fixed-threads)")
    ap.add_argument('--load', default='busy', metavar='busy|toplu:MODEL:BATCH',
                    help='what the --busy processes run: a busy loop (default), or toplu_bench of MODEL at BATCH '
                         'with --threads threads (two engines sharing the cores)')
    ap.add_argument('--load-env', default='', metavar='K=V[,K=V]', help='environment of toplu load processes')
    ap.add_argument('--shared', default=os.path.join(bench.ROOT, '..', 'shared'))
    args = ap.parse_args()
    build = os.environ.get('TOPLU_BUILD', os.path.join(bench.ROOT, 'build'))
    tb = os.path.join(build, 'toplu_bench')
    if not os.path.isfile(tb):
        sys.exit(f'{tb} missing: build toplu first (cmake --build build --target toplu_bench)')
    table = bench.models(bench.cache_dir(), args.shared)
    variants = [('toplu', {}, [])]
    for spec in args.toplu_env:
        env = dict(kv.split('=', 1) for kv in spec.split(','))
        variants.append((f'toplu {spec}', env, []))
    for spec in args.toplu_args:
        variants.append((f'toplu {spec}', {}, spec.split()))
    load_cmd, load_env = None, {}
    if args.load.startswith('toplu:'):
        _, lname, lb = args.load.split(':')
        ltm, _, lshape, _, _ = bench.model_files(table, lname)
        load_cmd = [tb, ltm, '--batch', lb, '--threads', str(args.threads), '--seconds', '100000'] + lshape
        load_env = dict(kv.split('=', 1) for kv in args.load_env.split(',') if kv)
    what = 'busy-loop' if not load_cmd else f'toplu_bench {args.load[6:]} ({args.load_env or "default env"})'
    print(f'# {args.busy} {what} processes beside {args.threads}-thread engines on {os.cpu_count()} cores; '
          f'{args.pairs} rounds, {args.seconds:g} s per process')
    print(f'{"cell":22s} {"side":34s} {"idle/s":>9s} {"loaded/s":>9s} {"kept":>6s}')
    worst = []
    for cell in args.cells.split(','):
        name, b = cell.split(':')
        tm, om, shape, oextra, _ = bench.model_files(table, name)
        common = ['--batch', b, '--threads', str(args.threads), '--seconds', str(args.seconds)] + shape
        res = {}
        others = []  # other runnable tasks seen before each idle process (/proc/loadavg's running count)
        for _ in range(args.pairs):
            for loaded in (0, 1):
                procs = busy(args.busy, load_cmd, load_env) if loaded else []
                time.sleep((2.0 if load_cmd else 0.3) if loaded else 0)
                try:
                    if not loaded:
                        others.append(runnable_others())
                    for label, env, extra in variants:
                        r = bench.run_one([tb, tm] + common + extra, 900, env)
                        if r:
                            res.setdefault((label, loaded), []).append(r.get('ips_wall', r['ips_median']))
                    r = bench.run_one(['node', os.path.join(bench.HERE, 'ort_bench.js'), om] + common + oextra, 900)
                    if r:
                        res.setdefault(('onnxruntime', loaded), []).append(r.get('ips_wall', r['ips_median']))
                finally:
                    stop(procs)
        kept = {}
        for label in [v[0] for v in variants] + ['onnxruntime']:
            idle, ld = res.get((label, 0)), res.get((label, 1))
            if not idle or not ld:
                print(f'{cell:22s} {label:34s} (failed)')
                continue
            i, l = statistics.median(idle), statistics.median(ld)
            kept[label] = l / i
            print(f'{cell:22s} {label:34s} {i:9.1f} {l:9.1f} {100 * l / i:5.0f}%')
        if others:  # the "idle" column is only as idle as the machine was (a fresh user could not tell, 2026-12-06)
            print(f'{cell:22s} other runnable tasks before the idle runs: {others} (on {os.cpu_count()} cores'
                  f'{"; not idle: rerun when the machine is" if max(others) > 0 else ""})')
        if 'toplu' in kept and 'onnxruntime' in kept:
            worst.append((cell, kept['toplu'], kept['onnxruntime']))
    for cell, t, o in worst:
        verdict = 'keeps at least as much as' if t >= o else 'keeps less than'
        print(f'{cell}: toplu {verdict} ONNX Runtime under load ({100 * t:.0f}% against {100 * o:.0f}%)')


if __name__ == '__main__':
    main()
