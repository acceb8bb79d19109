"""toplu perf against a stub KServe v2 server (tests/serve_perf.cmake).

usage: test_perf.py TOPLU CASE

The stub (http.server.ThreadingHTTPServer, in this process) serves
  GET  /v2/models/NAME          metadata (inputs with datatypes and shapes)
  GET  /v2/models/NAME/config   {"max_batch_size": ...}
  GET  /metrics                 Triton's nv_inference_* counters, advanced per success:
                                queue 1234 us, compute input 11, infer 2000, output 7 per request
  POST /v2/models/NAME/infer    checks the body (binary extension or JSON: shapes, sizes, element
                                counts against the metadata) and answers after SERVICE_S seconds;
                                400 for a malformed body, 503 for every FAIL_EVERY-th request; every
                                SLOW_EVERY-th answers after slow_s (past a short --request-timeout)
  GET  /stub/stats              what the stub saw (shapes, counts, bad bodies), for the checks
Metadata answers after META_DELAY_S; once DEAD is set, every infer request's connection is closed
without an answer (a server gone away), counted in stats['dead_seen'].
Each CASE runs toplu perf and checks its exit status, table, CSV or PNG.
"""
import atexit
import csv
import http.server
import json
import os
import re
import struct
import shutil
import subprocess
import sys
import urllib.parse
import tempfile
import threading
import time

import numpy as np

EXE = sys.argv[1]
CASE = sys.argv[2]
SERVICE_S = 0.005
QUEUE_US, CIN_US, CINFER_US, COUT_US = 1234, 11, 2000, 7

MODELS = {
    # batching model with a variable non-batch dim
    'm': {'config': {'max_batch_size': 8},
          'inputs': [{'name': 'x', 'datatype': 'FP32', 'shape': [-1, 3, -1]}]},
    # two fixed inputs, no batching
    'two': {'config': {'max_batch_size': 0},
            'inputs': [{'name': 'a', 'datatype': 'INT64', 'shape': [1, 2]},
                       {'name': 'b', 'datatype': 'BOOL', 'shape': [1, 2]}]},
    # a string input (JSON tensors only here)
    'str': {'config': {'max_batch_size': 0}, 'inputs': [{'name': 's', 'datatype': 'BYTES', 'shape': [3]}]},
}
# 'm' under a name /metrics must escape (model="q\"\\z"): toplu perf read no server columns for it before 2026-12-05
ODD = 'q"\\z'
MODELS[ODD] = MODELS['m']
SIZES = {'FP32': 4, 'INT64': 8, 'BOOL': 1}

lock = threading.Lock()
stats = {'infer': 0, 'ok': 0, 'fail': 0, 'bad': [], 'shapes': {}, 'first_values': None, 'inflight': 0, 'max_inflight': 0,
         'dead_seen': 0, 'x_test': {}}
counters = {'success': 0, 'count': 0}
fail_every = [0]
slow_every = [0]  # every slow_every-th infer request answers after SLOW_S seconds (past --request-timeout)
slow_s = [1.5]  # seconds a slow answer takes
meta_delay = [0.0]  # seconds before a metadata or config answer
dead = [False]      # infer connections closed unanswered, counted in stats['dead_seen']


def check_shape(meta, shape):
    ms = meta['shape']
    return len(shape) == len(ms) and all(m == -1 or m == s for m, s in zip(ms, shape)) and all(s >= 1 for s in shape)


def parse_infer(model, headers, body):
    """None when the body is a valid request for model, else why not."""
    hl = headers.get('Inference-Header-Content-Length')
    js_len = int(hl) if hl is not None else len(body)
    try:
        req = json.loads(body[:js_len])
    except Exception as e:
        return f'bad JSON: {e}'
    ins = {i['name']: i for i in MODELS[model]['inputs']}
    got = req.get('inputs', [])
    if sorted(i.get('name') for i in got) != sorted(ins):
        return f'inputs {[i.get("name") for i in got]}'
    off = js_len
    for i in got:
        meta = ins[i['name']]
        if i.get('datatype') != meta['datatype'] or not check_shape(meta, i.get('shape', [])):
            return f'input {i["name"]}: datatype {i.get("datatype")} shape {i.get("shape")}'
        n = int(np.prod(i['shape']))
        with lock:
            stats['shapes'][i['name']] = i['shape']
        if 'data' in i:
            if len(i['data']) != n:
                return f'input {i["name"]}: {len(i["data"])} values for {n}'
            if stats['first_values'] is None:
                stats['first_values'] = i['data'][:4]
        else:
            size = i.get('parameters', {}).get('binary_data_size')
            if size != n * SIZES[meta['datatype']]:
                return f'input {i["name"]}: binary_data_size {size} for {n} elements'
            if stats['first_values'] is None and meta['datatype'] == 'FP32':
                stats['first_values'] = list(struct.unpack('<4f', body[off:off + 16]))
            off += size
    if off != len(body):
        return f'body is {len(body)} bytes, the header says {off}'
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def log_message(self, *a):
        pass

    def send(self, code, obj, ctype='application/json'):
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(data)))
        try:
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (toplu perf's --request-timeout)

    def seen_header(self, kind):
        v = self.headers.get('X-Test')
        if v is not None:
            with lock:
                stats['x_test'][kind] = v

    def do_GET(self):
        p = [urllib.parse.unquote(x) for x in self.path.split('/')]
        self.seen_header('metrics' if self.path == '/metrics' else 'config' if self.path.endswith('/config') else 'meta')
        if self.path == '/metrics':
            with lock:
                s, c = counters['success'], counters['count']
            lines = ['# HELP nv_inference_request_success ok', '# TYPE nv_inference_request_success counter']
            for name, per in (('nv_inference_request_success', 1), ('nv_inference_count', None),
                              ('nv_inference_exec_count', 1),
                              ('nv_inference_queue_duration_us', QUEUE_US),
                              ('nv_inference_compute_input_duration_us', CIN_US),
                              ('nv_inference_compute_infer_duration_us', CINFER_US),
                              ('nv_inference_compute_output_duration_us', COUT_US)):
                v = c if per is None else s * per
                lines.append(f'{name}{{model="m",version="1"}} {v}')
                lines.append(f'{name}{{model="other",version="1"}} 99999')
                odd = ODD.replace('\\', '\\\\').replace('"', '\\"')
                lines.append(f'{name}{{model="{odd}",version="1"}} {v}')
            # the odd-named model has a response cache: 3 hits and 1 miss per success
            lines.append(f'nv_cache_num_hits_per_model{{model="{odd}",version="1"}} {3 * s}')
            lines.append(f'nv_cache_num_misses_per_model{{model="{odd}",version="1"}} {s}')
            self.send(200, ('\n'.join(lines) + '\n').encode(), 'text/plain')
        elif self.path == '/stub/stats':
            with lock:
                self.send(200, stats)
        elif len(p) >= 4 and p[1] == 'v2' and p[2] == 'models' and p[3] in MODELS:
            m = MODELS[p[3]]
            time.sleep(meta_delay[0])
            if len(p) == 5 and p[4] == 'config':
                self.send(200, dict(m['config'], name=p[3]))
            elif len(p) == 4:
                self.send(200, {'name': p[3], 'versions': ['1'], 'platform': 'stub', 'inputs': m['inputs'],
                                'outputs': [{'name': 'y', 'datatype': 'FP32', 'shape': [-1, 2]}]})
            else:
                self.send(404, {'error': 'no such endpoint'})
        else:
            self.send(404, {'error': f'unknown model in {self.path}'})

    def do_POST(self):
        n = int(self.headers.get('Content-Length', 0))
        body = self.rfile.read(n)
        p = [urllib.parse.unquote(x) for x in self.path.split('/')]
        if dead[0]:
            with lock:
                stats['dead_seen'] += 1
            self.close_connection = True
            return
        if not (len(p) == 5 and p[3] in MODELS and p[4] == 'infer'):
            return self.send(404, {'error': 'unknown model'})
        self.seen_header('infer')
        why = parse_infer(p[3], self.headers, body)
        with lock:
            stats['infer'] += 1
            k = stats['infer']
            if why:
                stats['bad'].append(why)
        if why:
            return self.send(400, {'error': why})
        with lock:
            stats['inflight'] += 1
            stats['max_inflight'] = max(stats['max_inflight'], stats['inflight'])
        time.sleep(slow_s[0] if slow_every[0] and k % slow_every[0] == 0 else SERVICE_S)
        with lock:
            stats['inflight'] -= 1
        if fail_every[0] and k % fail_every[0] == 0:
            with lock:
                stats['fail'] += 1
            return self.send(503, {'error': 'stub: queue full'})
        rows = stats['shapes'].get('x', [1])[0] if p[3] in ('m', ODD) else 1
        with lock:
            stats['ok'] += 1
            counters['success'] += 1
            counters['count'] += rows
        self.send(200, {'model_name': p[3], 'outputs': [{'name': 'y', 'datatype': 'FP32', 'shape': [rows, 2],
                                                         'data': [0.5] * (2 * rows)}]})


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


srv = Server(('127.0.0.1', 0), Handler)
PORT = srv.server_address[1]
threading.Thread(target=srv.serve_forever, daemon=True).start()
work = tempfile.mkdtemp(prefix='toplu-perf-')
atexit.register(shutil.rmtree, work, True)  # the models and outputs it made go with it
failures = []


def perf(*args, timeout=300):
    cmd = [EXE, 'perf', '-u', f'127.0.0.1:{PORT}', *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, detail=''):
    print(('ok   ' if cond else 'FAIL ') + what + ('' if cond else f': {detail}'))
    if not cond:
        failures.append(what)


def read_csv(path):
    with open(path) as f:
        return list(csv.reader(f))


def table_rows(out):
    """The table's data rows: {value: [columns...]}."""
    rows = {}
    for line in out.splitlines()[1:]:
        cols = line.split()
        if cols:
            rows[float(cols[0])] = line
    return rows


HEADER = ['Concurrency', 'Inferences/Second', 'Client Send', 'Network+Server Send/Recv', 'Server Queue',
          'Server Compute Input', 'Server Compute Infer', 'Server Compute Output', 'Client Recv', 'p50 latency',
          'p90 latency', 'p95 latency', 'p99 latency']

if CASE == 'closed':
    out = os.path.join(work, 'c.csv')
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--concurrency-range', '1:4:3', '-p', '500', '-f', out,
                      '--verbose-csv')
    check(code == 0, 'closed loop 1:4:3 exits 0', f'exit {code}: {e[-400:]}')
    rows = read_csv(out) if os.path.exists(out) else [[]]
    check(rows[0] == HEADER + ['Avg latency', 'request/response', 'response wait', 'Errors'],
          'CSV header is perf_analyzer\'s, then toplu\'s Errors last', rows[0])
    check(all(r[-1] == '0' for r in rows[1:]), 'no failed requests: Errors 0 on each row', rows)
    check(len(rows) == 3, 'a CSV row per level', rows)
    by = {int(float(r[0])): r for r in rows[1:]}
    # The stub saw at most 4 requests at once: the closed loop holds its concurrency.  Throughput against the
    # service time is checked loosely (a loaded machine slows the stub itself); Little's law below is exact.
    check(stats['max_inflight'] == 4, f'at most 4 requests in flight at the stub ({stats["max_inflight"]})')
    for conc in (1, 4):
        r = by.get(conc)
        ips = float(r[1]) if r else 0
        theory = conc / (SERVICE_S)
        check(0.35 * theory <= ips <= 1.1 * theory, f'concurrency {conc}: {ips:.0f} infer/s, at most the {theory:.0f} '
              f'the service time allows and not far below', f'row {r}')
        if r:
            lat = float(r[HEADER.index('p50 latency')])
            check(SERVICE_S * 1e6 <= lat <= 3 * SERVICE_S * 1e6, f'concurrency {conc}: p50 {lat:.0f} us is '
                  f'at least the service time', r)
            check([int(r[4]), int(r[5]), int(r[6]), int(r[7])] == [QUEUE_US, CIN_US, CINFER_US, COUT_US],
                  f'concurrency {conc}: server queue/compute columns are the stub\'s /metrics deltas per request', r)
            avg = float(r[13])
            check(abs(ips - conc / (avg / 1e6)) <= 0.15 * ips, f'concurrency {conc}: throughput agrees with '
                  f'concurrency / avg latency (Little\'s law) within 15%', r)
            p = [float(r[k]) for k in range(9, 13)]
            check(p == sorted(p), f'concurrency {conc}: p50 <= p90 <= p95 <= p99', p)
    check(not stats['bad'], 'every request body was valid (binary extension)', stats['bad'][:3])
    check(stats['shapes'].get('x') == [1, 3, 4], 'request shape [1, 3, 4] (batch 1 + --shape)', stats['shapes'])
    vals = stats['first_values'] or []
    check(len(vals) == 4 and all(0 <= v < 1 for v in vals) and len(set(vals)) > 1, 'random FP32 data in [0, 1)',
          vals)
    check('concurrency' in o.splitlines()[0] and len(table_rows(o)) == 2, 'table on stdout, a row per level', o)
    # a model name that /metrics escapes: the server columns are read all the same
    out2 = os.path.join(work, 'odd.csv')
    code, o, e = perf('-m', ODD, '--shape', 'x:3,4', '--concurrency-range', '1', '-p', '300', '-f', out2)
    rows = read_csv(out2) if os.path.exists(out2) else [[], []]
    check(code == 0 and len(rows) == 2 and rows[1][4:8] == [str(QUEUE_US), str(CIN_US), str(CINFER_US), str(COUT_US)],
          f'model {ODD}: the queue/compute columns come from /metrics, whose label escapes it', f'{rows} {e[-300:]}')
    # its response cache: hits and misses (perf_analyzer's "Cache hit count"), and a note that the rates are the
    # cache's when it answers most requests (cache lookups were reported as inferences)
    check(re.search(r'^1 +cache: \d+ hits, \d+ misses \(75\.0% of lookups answered from the response cache\)$', o,
                    re.M) is not None and 'most requests were answered from the model\'s response cache' in e,
          f'model {ODD}: cache hits and misses shown, and the cache noted', f'{o}\n{e[-400:]}')
    check('cache:' not in perf('-m', 'm', '--shape', 'x:3,4', '--concurrency-range', '1', '-p', '300')[1],
          'a model without a response cache: no cache line')

elif CASE == 'rate':
    for dist, interval in (('constant', '1000'), ('poisson', '2000')):
        out = os.path.join(work, f'r_{dist}.csv')
        code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--request-rate-range', '100:200:100',
                          '--request-distribution', dist, '-p', interval, '--max-trials', '5', '-f', out)
        check(code == 0, f'{dist} rate 100:200:100 exits 0', f'exit {code}: {e[-400:]}')
        rows = read_csv(out) if os.path.exists(out) else [[]]
        check(rows[0][:2] == ['Request Rate', 'Inferences/Second'], f'{dist}: CSV starts "Request Rate"', rows[0])
        by = {int(float(r[0])): r for r in rows[1:]}
        for rate in (100, 200):
            ips = float(by[rate][1]) if rate in by else 0
            check(0.9 * rate <= ips <= 1.1 * rate, f'{dist}: rate {rate}: {ips:.1f} req/s within 10%', rows)
    # Open loop past the server: each answer takes 1.5 s, 3000 requests a second are due.  Until 2026-12-06
    # perf opened up to 4096 connections (a server taking 1024, as toplu serve's default, left the rest
    # unaccepted for 30 s); now 1000 at most by default, --max-connections N at most N, and the requests
    # due while all are busy wait (the start delay).  -r 1: one window (until 2026-12-06 at least 3 ran).
    slow_every[0], slow_s[0] = 1, 1.5
    for extra, cap in (([], 1000), (['--max-connections', '7'], 7)):
        t0 = time.monotonic()
        code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--request-rate-range', '3000', '-p', '500', '-r', '1',
                          '--request-timeout', '1000', *extra)
        took = time.monotonic() - t0
        # every request started timed out: as many as there were connections (1500 were due)
        m = re.search(r'(\d+) x no response \((\d+) timed out\)', table_rows(o).get(3000.0, ''))
        check(m is not None and int(m.group(2)) == cap, f'open loop {" ".join(extra) or "(default)"}: '
              f'{cap} connections at most, all used', o[-300:])
        check(len(re.findall(r'window \d+:', e)) == 1 and took < 5, f'-r 1: one window ({took:.1f} s)', e[-400:])
        check(code == 1, 'answers past --request-timeout: exit 1', f'exit {code}')
        while stats['inflight']:  # the stub's threads still sleeping on the abandoned requests
            time.sleep(0.1)
    slow_every[0], slow_s[0] = 0, 1.5

elif CASE == 'errors':
    fail_every[0] = 4
    out = os.path.join(work, 'e.csv')
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--concurrency-range', '2', '-p', '500', '-f', out)
    check(code == 1 and re.search(r'\d+ of \d+ requests failed at concurrency 2', e),
          'some 503 answers: exit 1 saying how many failed (perf_analyzer fails such a run)', f'exit {code}: {e[-300:]}')
    line = table_rows(o).get(2.0, '')
    m = re.search(r'(\d+) x HTTP 503', line)
    nums = line.split()
    req_s = float(nums[2]) if len(nums) > 2 else 0
    n503 = int(m.group(1)) if m else 0
    # a quarter of the responses are 503: errors / (errors + successes) about 0.25
    ok_n = req_s * 1.5  # 3 windows of 0.5 s
    share = n503 / (n503 + ok_n) if n503 + ok_n else 0
    check(m is not None and 0.18 <= share <= 0.32, f'503s counted by status ({n503}, share {share:.2f} of ~0.25)',
          line)
    check('first error response: HTTP 503: stub: queue full' in e, 'the first error body is reported', e[-300:])
    rows = read_csv(out) if os.path.exists(out) else [[], []]
    check(rows[0][-1] == 'Errors' and len(rows) == 2 and rows[1][-1] == str(n503) and n503 > 0,
          f'the CSV\'s last column, Errors, is the table\'s {n503} failed requests', rows)
    fail_every[0] = 1
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--concurrency-range', '1:3', '-p', '300')
    check(code == 1, 'every request failing: exit 1', f'exit {code}')
    check('every request failed at concurrency 1' in e, 'says the level where every request failed', e[-300:])
    check(len(table_rows(o)) == 1, 'the failed level is reported and the sweep stops', o)

elif CASE == 'timeouts':
    # every request outlives --request-timeout (1 s) while the windows are 0.3 s: they time out after the
    # windows ended, and must still count as errors (they were 'none', 0 requests, before 2026-12-04)
    slow_every[0] = 1
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--concurrency-range', '2', '-p', '300', '--request-timeout', '1000')
    line = table_rows(o).get(2.0, '')
    m = re.search(r'(\d+) x no response \((\d+) timed out\)', line)
    check(m is not None and int(m.group(2)) >= 2 and m.group(1) == m.group(2),
          'a server that answers nothing in time: its requests are counted as timed out', line)
    check(code == 1 and 'every request failed at concurrency 2' in e, 'and every request failed: exit 1', f'exit {code}: {e[-300:]}')
    check('timed out' in e, 'the first error says timed out', e[-300:])
    # one request in five outlives the timeout: those count, the others succeed
    slow_every[0] = 5
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--concurrency-range', '2', '-p', '600', '--request-timeout', '200')
    line = table_rows(o).get(2.0, '')
    m = re.search(r'(\d+) x no response \((\d+) timed out\)', line)
    check(code == 1 and m is not None and int(m.group(2)) >= 1 and 'requests failed at concurrency 2' in e,
          'some requests past the timeout: counted as timed out, exit 1', f'exit {code}: {line} {e[-300:]}')
    slow_every[0] = 0
    # A response whole after --request-timeout is a timeout even when it arrives before perf's own sweep:
    # answers after 60 ms, timeout 30 ms.  Until 2026-12-06 the loop handled the socket first (its wait
    # was up to 100 ms) and counted most of them as successes, with latencies past the timeout.
    slow_every[0], slow_s[0] = 1, 0.06
    out = os.path.join(work, 'late.csv')
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--concurrency-range', '2', '-p', '500', '-r', '3',
                      '--request-timeout', '30', '-f', out)
    line = table_rows(o).get(2.0, '')
    m = re.search(r'(\d+) x no response \((\d+) timed out\)', line)
    rows = read_csv(out) if os.path.exists(out) else [[], ['0', '-1']]
    check(code == 1 and m is not None and m.group(1) == m.group(2) and float(rows[1][1]) == 0,
          'answers at 60 ms with --request-timeout 30: all timed out, no successes', f'exit {code}: {line} {rows}')
    slow_every[0], slow_s[0] = 0, 1.5
    # --request-timeout times the inferences only: metadata that takes 50 ms is still read at 20 ms
    meta_delay[0] = 0.05
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--concurrency-range', '1', '-p', '300', '--request-timeout', '20')
    line = table_rows(o).get(1.0, '')
    check(code == 0 and line.rstrip().split()[-1] in ('none', '(unstable)') and 'none' in line,
          '--request-timeout 20 with 50 ms metadata: the metadata GET is not timed by it, no errors, exit 0',
          f'exit {code}: {line} {e[-300:]}')
    meta_delay[0] = 0.0

elif CASE == 'usage':
    for args, word in ((['-m', 'm', '--concurrency-range', 'x'], '--concurrency-range'),
                       (['-m', 'm', '-i', 'grpc'], 'grpc'),
                       (['-m', 'm', '--bogus'], '--bogus'),
                       (['-m', 'm', '--request-distribution', 'uniform'], '--request-distribution'),
                       (['-m', 'm', '--shape', 'x'], '--shape'),
                       (['-m', 'm', '-b', '0'], '-b'),
                       (['-m', 'm', '--concurrency-range', '1.5'], '--concurrency-range'),
                       (['-m', 'm', '--max-connections', '0'], '--max-connections'),
                       (['-m', 'm', '--concurrency-range', '0'], 'START is 0'),
                       (['-m', 'm', '--concurrency-range', '4:2'], 'END 2 is below START 4'),
                       (['-m', 'm', '--concurrency-range', '1:4:0'], 'STEP is 0'),
                       (['-m', 'm', '--request-rate-range', '0'], 'START is 0'),
                       (['-m', 'm', '--request-rate-range', '100:50'], 'END 50 is below START 100'),
                       (['-m', 'm', '--input-tensor-format', 'xml'], '--input-tensor-format'),
                       (['-m', 'm', '--shared-memory', 'system'], '--shared-memory'),
                       (['--concurrency-range', '1'], '-m')):
        code, o, e = perf(*args)
        check(code == 2 and word in e, f'{" ".join(args)}: exit 2 naming {word}', f'exit {code}: {e[:200]}')
    code, o, e = perf('-m', 'm', '-p', '200')
    check(code == 2 and "input 'x'" in e and '--shape' in e, 'a variable dim without --shape: exit 2 naming the input',
          f'exit {code}: {e[:300]}')
    code, o, e = perf('-m', 'm', '--shape', 'y:3,4', '-p', '200')
    check(code == 2 and "'y'" in e, '--shape for an input the model lacks: exit 2', f'exit {code}: {e[:300]}')
    code, o, e = perf('-m', 'm', '--shape', 'x:2,4', '-p', '200')
    check(code == 2 and "'x'" in e, '--shape against a fixed dim: exit 2', f'exit {code}: {e[:300]}')
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '-b', '9', '-p', '200')
    check(code == 2 and 'max_batch_size' in e, '-b over max_batch_size: exit 2', f'exit {code}: {e[:300]}')
    code, o, e = perf('-m', 'two', '-b', '2', '-p', '200')
    check(code == 2 and 'does not batch' in e, '-b 2 on a model without batching: exit 2', f'exit {code}: {e[:300]}')
    code, o, e = perf('-m', 'nosuch', '-p', '200')
    check(code == 1 and '404' in e and 'nosuch' in e, 'unknown model: exit 1 with the 404', f'exit {code}: {e[:300]}')
    # getopt's attached values: -mm -p200 -r3 -b2
    code, o, e = perf('-mm', '--shape', 'x:3,4', '-p200', '-r3', '-b2', '--concurrency-range', '1')
    check(code == 0 and len(table_rows(o)) == 1 and stats['shapes'].get('x') == [2, 3, 4],
          '-mm -p200 -r3 -b2: one-letter options with attached values', f'exit {code}: {e[:300]} {stats["shapes"]}')
    code, o, e = perf('-mm', '--shape', 'x:3,4', '-p0')
    check(code == 2 and '-p 0' in e, '-p0: the attached value is checked like a separate one', f'exit {code}: {e[:300]}')
    # perf_analyzer's -H (a header on every request) and its client modes --async/-a/--sync (no-ops here) were
    # "unknown option" (a fresh user's finding of 2026-12-06)
    code, o, e = perf('-mm', '--shape', 'x:3,4', '-p200', '-r3', '-H', 'X-Test: abc', '--async', '-a', '--sync')
    check(code == 0 and stats['x_test'] == {'meta': 'abc', 'config': 'abc', 'infer': 'abc', 'metrics': 'abc'},
          '-H X-Test: abc reaches the metadata, config, infer and /metrics requests; --async, -a, --sync accepted',
          f'exit {code}: {e[:300]} {stats["x_test"]}')
    for bad in ('NoColon', ': empty name'):
        code, o, e = perf('-mm', '--shape', 'x:3,4', '-H', bad)
        check(code == 2 and '-H' in e, f'-H {bad!r}: exit 2 naming -H', f'exit {code}: {e[:300]}')
    p = subprocess.run([EXE, 'perf', '-m', 'm', '-u', '127.0.0.1:1', '-p', '200'], capture_output=True, text=True)
    check(p.returncode == 1 and 'cannot reach the server at http://127.0.0.1:1' in p.stderr,
          'unreachable server: exit 1 with a clear message', f'exit {p.returncode}: {p.stderr[:300]}')

elif CASE == 'data':
    # JSON tensors both ways, two inputs of other dtypes, no batching
    code, o, e = perf('-m', 'two', '--input-tensor-format', 'json', '--output-tensor-format', 'json', '-p', '200',
                      '--input-data', 'zero')
    check(code == 0 and not stats['bad'], 'JSON tensors, INT64 + BOOL inputs, zero data: valid bodies',
          f'exit {code}: {e[-300:]} {stats["bad"][:3]}')
    check(stats['shapes'].get('a') == [1, 2] and stats['first_values'] == [0, 0], 'full shapes, zeros',
          (stats['shapes'], stats['first_values']))
    # perf_analyzer's input-data JSON, with batch 2 (rows repeated)
    stats['first_values'] = None
    path = os.path.join(work, 'data.json')
    with open(path, 'w') as f:
        json.dump({'data': [{'x': {'content': [0.25] * 15, 'shape': [3, 5]}}, {'x': [0.75] * 15}]}, f)
    code, o, e = perf('-m', 'm', '-b', '2', '--input-data', path, '-p', '200', '--input-tensor-format', 'json')
    check(code == 0 and not stats['bad'], 'input-data JSON file: valid bodies', f'exit {code}: {e[-300:]} '
          f'{stats["bad"][:3]}')
    check(stats['shapes'].get('x') == [2, 3, 5], 'its shape, batch 2: [2, 3, 5]', stats['shapes'])
    check(stats['first_values'] in ([0.25] * 4, [0.75] * 4), 'its values sent', stats['first_values'])
    # a .npy file, binary
    stats['first_values'] = None
    npy = os.path.join(work, 'x.npy')
    np.save(npy, np.arange(12, dtype=np.float32).reshape(1, 3, 4))
    code, o, e = perf('-m', 'm', '--input-data', npy, '-p', '200')
    check(code == 0 and stats['shapes'].get('x') == [1, 3, 4] and stats['first_values'] == [0, 1, 2, 3],
          '.npy input data: its shape and values, binary', f'exit {code}: {e[-300:]} {stats["shapes"]} '
          f'{stats["first_values"]}')
    # a .npy file with the batch dim and no -b: its first dim is the batch size
    stats['first_values'] = None
    np.save(npy, np.arange(48, dtype=np.float32).reshape(4, 3, 4))
    code, o, e = perf('-m', 'm', '--input-data', npy, '-p', '200')
    check(code == 0 and stats['shapes'].get('x') == [4, 3, 4] and stats['first_values'] == [0, 1, 2, 3]
          and 'batch size 4' in e, '.npy [4,3,4] without -b: sent whole as batch 4, said so',
          f'exit {code}: {e[-300:]} {stats["shapes"]} {stats["first_values"]}')
    code, o, e = perf('-m', 'm', '-b', '2', '--input-data', npy, '-p', '200')
    check(code == 2 and '4 rows' in e and '-b 4' in e, '.npy [4,3,4] with -b 2: exit 2 saying the file holds 4 rows',
          f'exit {code}: {e[:300]}')
    bad = os.path.join(work, 'bad.json')
    with open(bad, 'w') as f:
        json.dump({'data': [{'x': [1, 2, 3]}]}, f)
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--input-data', bad, '-p', '200')
    check(code == 2 and 'data[0].x: 3 values for a shape of 12 elements' in e,
          'input data that does not fit: exit 2 naming the entry and both counts', f'exit {code}: {e[:300]}')
    # perf_analyzer's {"b64": ...}: the raw little-endian bytes
    import base64
    stats['first_values'] = None
    b64 = os.path.join(work, 'b64.json')
    raw = np.arange(12, dtype='<f4') + 0.5
    with open(b64, 'w') as f:
        json.dump({'data': [{'x': {'b64': base64.b64encode(raw.tobytes()).decode()}}]}, f)
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--input-data', b64, '-p', '200')
    check(code == 0 and stats['shapes'].get('x') == [1, 3, 4] and stats['first_values'] == [0.5, 1.5, 2.5, 3.5],
          '{"b64": ...} input data: its values sent', f'exit {code}: {e[-300:]} {stats["shapes"]} {stats["first_values"]}')
    stats['first_values'] = None
    with open(b64, 'w') as f:
        json.dump({'data': [{'x': {'content': {'b64': base64.b64encode(raw[:6].tobytes()).decode()}, 'shape': [3, 2]}}]}, f)
    code, o, e = perf('-m', 'm', '--input-data', b64, '-p', '200')
    check(code == 0 and stats['shapes'].get('x') == [1, 3, 2] and stats['first_values'] == [0.5, 1.5, 2.5, 3.5],
          '{"content": {"b64": ...}, "shape": [3, 2]}: that shape and values', f'exit {code}: {e[-300:]} {stats["shapes"]}')
    with open(b64, 'w') as f:
        json.dump({'data': [{'x': {'b64': base64.b64encode(raw[:5].tobytes()).decode()}}]}, f)
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--input-data', b64, '-p', '200')
    check(code == 2 and 'data[0].x.b64: 20 bytes for a shape of 12 elements of 4 bytes (48 bytes)' in e,
          'b64 of the wrong size: exit 2 giving both sizes', f'exit {code}: {e[:300]}')
    with open(b64, 'w') as f:
        json.dump({'data': [{'x': {'b64': 'not*base64'}}]}, f)
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--input-data', b64, '-p', '200')
    check(code == 2 and 'data[0].x.b64: not base64' in e, 'b64 that is not base64: exit 2', f'exit {code}: {e[:300]}')

    # perf_analyzer's input-data directory: one file per input, named as the input, one request's raw bytes
    # ("is a directory, not a --input-data file" until 2026-12-07: a fresh user's perf_analyzer command failed)
    stats['first_values'] = None
    ddir = os.path.join(work, 'datadir')
    os.makedirs(ddir, exist_ok=True)
    (np.arange(12, dtype='<f4') + 0.25).tofile(os.path.join(ddir, 'x'))
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--input-data', ddir, '-p', '200')
    check(code == 0 and not stats['bad'] and stats['shapes'].get('x') == [1, 3, 4]
          and stats['first_values'] == [0.25, 1.25, 2.25, 3.25],
          'input-data directory: the file x as one request, shape [1, 3, 4], its values',
          f'exit {code}: {e[-300:]} {stats["shapes"]} {stats["first_values"]}')
    stats['first_values'] = None
    code, o, e = perf('-m', 'm', '-b', '2', '--input-data', ddir, '-p', '200', '--input-tensor-format', 'json')
    check(code == 0 and not stats['bad'] and stats['shapes'].get('x') == [2, 3, 4] and stats['first_values'] == [0.25, 1.25, 2.25, 3.25],
          "input-data directory, batch 2, no --shape: the open dim read off the file's 48 bytes ([2, 3, 4])",
          f'exit {code}: {e[-300:]} {stats["shapes"]} {stats["first_values"]}')
    (np.arange(10, dtype='<f4')).tofile(os.path.join(ddir, 'x'))
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--input-data', ddir, '-p', '200')
    check(code == 2 and os.path.join(ddir, 'x') + ': 40 bytes for a shape of 12 elements of 4 bytes (48 bytes)' in e,
          'a file of the wrong size: exit 2 naming it and both sizes', f'exit {code}: {e[:300]}')
    two = os.path.join(work, 'datadir_two')
    os.makedirs(two, exist_ok=True)
    np.array([[7, 9]], '<i8').tofile(os.path.join(two, 'a'))
    code, o, e = perf('-m', 'two', '--input-data', two, '-p', '200')
    check(code == 2 and os.path.join(two, 'b') in e and "named as the input: 'b'" in e,
          'a directory without the file of input b: exit 2 naming the file', f'exit {code}: {e[:300]}')
    np.array([[1, 0]], np.bool_).tofile(os.path.join(two, 'b'))
    code, o, e = perf('-m', 'two', '--input-data', two, '-p', '200', '--input-tensor-format', 'json')
    check(code == 0 and not stats['bad'] and stats['shapes'].get('a') == [1, 2] and stats['shapes'].get('b') == [1, 2],
          'input-data directory of an INT64 and a BOOL input, no batching: valid bodies',
          f'exit {code}: {e[-300:]} {stats["shapes"]} {stats["bad"][:3]}')
    stats['first_values'] = None
    sdir = os.path.join(work, 'datadir_str')
    os.makedirs(sdir, exist_ok=True)
    with open(os.path.join(sdir, 's'), 'wb') as f:
        f.write(b'hello\r\nw\xc3\xb6rld\nlast line')  # CRLF, UTF-8, no newline at the end
    code, o, e = perf('-m', 'str', '--input-data', sdir, '-p', '200', '--input-tensor-format', 'json')
    check(code == 0 and not stats['bad'] and stats['first_values'] == ['hello', 'w\u00f6rld', 'last line'],
          'input-data directory of a BYTES input: its lines as the strings', f'exit {code}: {e[-300:]} '
          f'{stats["first_values"]} {stats["bad"][:3]}')

elif CASE == 'wire':
    # toplu perf's own HTTP/1.1 client (src/serve/perf_http.c) against a raw-socket stub that answers
    # the same request in every framing a server may use, cycling through them: Content-Length with
    # keep-alive, chunked with chunk extensions and a trailer, "Connection: close" then a close, an
    # interim 100 Continue first, a response written in pieces with pauses, and an idle keep-alive
    # connection closed by the server between requests (the client must resend on a fresh connection
    # without counting an error).  /metrics comes chunked.  Then a stub that answers garbage.
    import socket
    import socketserver
    wire = {'requests': 0, 'bad': [], 'conns': 0, 'mode': 'cycle'}
    OK_BODY = json.dumps({'model_name': 'm', 'outputs': [{'name': 'y', 'datatype': 'FP32', 'shape': [1, 2],
                                                          'data': [0.5, 0.5]}]}).encode()

    def chunked(data, pieces=3):
        out, step = b'', max(1, len(data) // pieces)
        for i in range(0, len(data), step):
            part = data[i:i + step]
            out += b'%x;ext=1\r\n' % len(part) + part + b'\r\n'
        return out + b'0\r\nX-Trailer: t\r\n\r\n'

    class Wire(socketserver.BaseRequestHandler):
        def handle(self):
            with lock:
                wire['conns'] += 1
            sock, buf = self.request, b''
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                while b'\r\n\r\n' not in buf:
                    d = sock.recv(65536)
                    if not d:
                        return
                    buf += d
                head, buf = buf.split(b'\r\n\r\n', 1)
                lines = head.decode('latin-1').split('\r\n')
                method, path, _ = lines[0].split(' ')
                hdr = {k.strip().lower(): v.strip() for k, v in (l.split(':', 1) for l in lines[1:])}
                n = int(hdr.get('content-length', 0))
                while len(buf) < n:
                    d = sock.recv(65536)
                    if not d:
                        return
                    buf += d
                body, buf = buf[:n], buf[n:]
                if method == 'GET' and path == '/metrics':
                    with lock:
                        s = counters['success']
                    text = ''.join(f'{name}{{model="m",version="1"}} {s * per}\n' for name, per in (
                        ('nv_inference_request_success', 1), ('nv_inference_count', 1), ('nv_inference_exec_count', 1),
                        ('nv_inference_queue_duration_us', QUEUE_US),
                        ('nv_inference_compute_input_duration_us', CIN_US),
                        ('nv_inference_compute_infer_duration_us', CINFER_US),
                        ('nv_inference_compute_output_duration_us', COUT_US))).encode()
                    sock.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n'
                                 + chunked(text))
                    continue
                if method == 'GET':
                    m = MODELS['m']
                    obj = m['config'] if path.endswith('/config') else {
                        'name': 'm', 'versions': ['1'], 'inputs': m['inputs'],
                        'outputs': [{'name': 'y', 'datatype': 'FP32', 'shape': [-1, 2]}]}
                    data = json.dumps(obj).encode()
                    sock.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n' % len(data) + data)
                    continue
                why = parse_infer('m', {'Inference-Header-Content-Length': hdr.get('inference-header-content-length')},
                                  body)
                with lock:
                    wire['requests'] += 1
                    k = wire['requests']
                    if why or 'host' not in hdr:
                        wire['bad'].append(why or 'no Host header')
                    else:
                        counters['success'] += 1
                if wire['mode'] == 'garbage':
                    sock.sendall(b'HTTP/1.1 2x0 Nonsense\r\n\r\n')
                    return
                mode = k % 6
                if mode == 0:
                    sock.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n' % len(OK_BODY) + OK_BODY)
                elif mode == 1:
                    sock.sendall(b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n' + chunked(OK_BODY))
                elif mode == 2:
                    sock.sendall(b'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n' % len(OK_BODY)
                                 + OK_BODY)
                    return
                elif mode == 3:
                    sock.sendall(b'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n'
                                 % len(OK_BODY) + OK_BODY)
                elif mode == 4:
                    msg = b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n' % len(OK_BODY) + OK_BODY
                    for i in range(0, len(msg), 7):
                        sock.sendall(msg[i:i + 7])
                        if i % 28 == 0:
                            time.sleep(0.001)
                else:
                    sock.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n' % len(OK_BODY) + OK_BODY)
                    time.sleep(0.02)  # then close this keep-alive connection while the client holds it idle
                    sock.shutdown(socket.SHUT_RDWR)
                    return

    class WireServer(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    ws = WireServer(('127.0.0.1', 0), Wire)
    threading.Thread(target=ws.serve_forever, daemon=True).start()
    wport = ws.server_address[1]
    out = os.path.join(work, 'w.csv')
    p = subprocess.run([EXE, 'perf', '-m', 'm', '-u', f'127.0.0.1:{wport}', '--shape', 'x:3,4000',
                        '--concurrency-range', '2', '-p', '600', '-f', out], capture_output=True, text=True,
                       timeout=120)
    line = table_rows(p.stdout).get(2.0, '')
    check(p.returncode == 0 and (line.rstrip().endswith('none') or line.rstrip().endswith('none (unstable)')),
          'every framing read as a success: no errors', f'exit {p.returncode}: {line} {p.stderr[-300:]}')
    check(not wire['bad'] and wire['requests'] >= 30, f'{wire["requests"]} requests, each whole and valid '
          '(48 KiB binary body, Host header)', wire['bad'][:3])
    check(wire['conns'] >= wire['requests'] // 6, f'closed connections were reopened ({wire["conns"]} connections)')
    rows = read_csv(out) if os.path.exists(out) else [[], []]
    r = rows[1] if len(rows) > 1 else []
    check(len(r) > 7 and [int(r[4]), int(r[5]), int(r[6]), int(r[7])] == [QUEUE_US, CIN_US, CINFER_US, COUT_US],
          'a chunked /metrics is read: the server columns are its deltas', r)
    ok_before = wire['requests']
    wire['mode'] = 'garbage'
    p = subprocess.run([EXE, 'perf', '-m', 'm', '-u', f'127.0.0.1:{wport}', '--shape', 'x:3,4',
                        '--concurrency-range', '1', '-p', '300'], capture_output=True, text=True, timeout=120)
    check(p.returncode == 1 and 'malformed response' in p.stderr and wire['requests'] > ok_before,
          'a malformed response: counted as a failure with the reason, exit 1', f'exit {p.returncode}: {p.stderr[-300:]}')
    ws.shutdown()

elif CASE == 'dead':
    # the server goes away 0.7 s into the run: the clients back off instead of reconnecting in a busy
    # loop, the run exits 1, and the CSV's Errors column shows the failures
    out = os.path.join(work, 'd.csv')
    cmd = [EXE, 'perf', '-u', f'127.0.0.1:{PORT}', '-m', 'm', '--shape', 'x:3,4', '-p', '500', '-r', '6',
           '--concurrency-range', '2', '-f', out]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.7)
    dead[0] = True
    o, e = proc.communicate(timeout=120)
    took = time.time() - t0
    seen = stats['dead_seen']
    check(proc.returncode == 1, 'requests failed: exit 1', f'exit {proc.returncode}: {e[-300:]}')
    check(0 < seen <= 80, f'{seen} connections while the server was gone (2 clients backing off from 10 ms to 1 s; '
          'a busy loop made tens of thousands)', seen)
    rows = read_csv(out) if os.path.exists(out) else [[], []]
    errs = int(rows[1][-1]) if len(rows) > 1 and rows[1] and rows[1][-1].isdigit() else -1
    check(rows[0][-1] == 'Errors' and errs > 0, f'the CSV row shows the failed requests ({errs})', rows)
    check(took < 30, f'the run ends ({took:.1f} s)')
    dead[0] = False

elif CASE == 'plot':
    png = os.path.join(work, 'p.png')
    code, o, e = perf('-m', 'm', '--shape', 'x:3,4', '--concurrency-range', '1:3', '-p', '300', '--plot', png)
    ok = code == 0 and os.path.exists(png)
    check(ok, '--plot writes a file', f'exit {code}: {e[-300:]}')
    if ok:
        data = open(png, 'rb').read()
        w, h = struct.unpack('>II', data[16:24])
        check(data[:8] == b'\x89PNG\r\n\x1a\n' and (w, h) == (800, 500), 'a PNG of 800x500', (data[:8], w, h))
        import zlib
        # decode the rows (filter bytes + RGB) and count the two line colours
        idat = b''
        pos = 8
        while pos < len(data):
            n, = struct.unpack('>I', data[pos:pos + 4])
            if data[pos + 4:pos + 8] == b'IDAT':
                idat += data[pos + 8:pos + 8 + n]
            pos += 12 + n
        raw = zlib.decompress(idat)
        check(len(raw) == h * (1 + 3 * w), 'PNG rows decode', len(raw))
        # filters make exact colours hard to count; require that the image is not blank
        check(len(set(raw)) > 10, 'the plot is not blank')
else:
    print(f'unknown case {CASE}')
    sys.exit(2)

srv.shutdown()
print(f'{CASE}: {len(failures)} failure(s)')
sys.exit(1 if failures else 0)
