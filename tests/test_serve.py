#!/usr/bin/python3
"""`toplu serve` over real HTTP: the dynamic batcher, queue policies, the model repository, the
response cache, metrics and the graceful stop (tests/serve.cmake).

  test_serve.py TOPLU WORKDIR CLS_MODEL MNIST_MODEL CASE

Each case starts its own server on a free port with a repository made in WORKDIR/CASE, talks to
it with http.client, and checks real outputs against `toplu run` on the same rows (the engine is
checked against ONNX Runtime elsewhere).  Exit status 0 pass, 1 fail.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402

TOPLU, WORK, CLS, MNIST, CASE = sys.argv[1:6]


class Failure(Exception):
    pass


def check(cond, what, detail=''):
    if not cond:
        raise Failure(f'{what}: {detail}' if detail else what)
    print(f'ok: {what}')


class Server:
    def __init__(self, models, extra=(), single=None, files=None, tag=''):
        self.dir = os.path.join(WORK, CASE + tag)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.repo = os.path.join(self.dir, 'repo')
        os.makedirs(self.repo)
        for name, (src, cfg) in models.items():
            os.makedirs(os.path.join(self.repo, name, '1'))
            os.symlink(os.path.abspath(src), os.path.join(self.repo, name, '1', 'model.onnx'))
            if cfg is not None:
                with open(os.path.join(self.repo, name, 'config.json'), 'w') as f:
                    json.dump(cfg, f)
        for rel, src in (files or {}).items():  # more files in the repository (a tune.json beside a model)
            shutil.copy(src, os.path.join(self.repo, rel))
        self.port = harness.free_port()
        self.log_path = os.path.join(self.dir, 'server.log')
        self.log = open(self.log_path, 'w')
        args = [TOPLU, 'serve', '--http-port', str(self.port), '--host', '127.0.0.1']
        args += [single] if single else ['--model-repository', self.repo]
        self.proc = harness.start(args + list(extra), self.port, self.log, subprocess.STDOUT, 120,
                                  lambda: self.text()[-800:], Failure)

    def text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def req(self, method, path, body=None, headers=None, timeout=60):
        return harness.request(self.port, method, path, body, headers, timeout)

    def metrics(self):
        return self.req('GET', '/metrics')[2].decode()

    def stop(self):
        if not harness.sigterm_wait(self.proc):
            raise Failure('server did not stop within 60 s of SIGTERM')
        text = self.text()
        for bad in harness.SANITIZER_MARKS:
            if bad in text:
                raise Failure(f'the server log has a sanitizer report: {text[text.index(bad):][:1500]}')
        return self.proc.returncode


def metric(text, name, model, **labels):
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith('#') or not (line.startswith(name + '{') or line.startswith(name + ' ')):
            continue
        if f'model="{model}"' not in line or any(f'{k}="{v}"' not in line for k, v in labels.items()):
            continue
        total += float(line.rsplit(' ', 1)[1])
        seen = True
    return total if seen else None


def binary_request(x, name='x', extra_params=None, inputs_params=None):
    p = {'binary_data_size': x.nbytes}
    p.update(inputs_params or {})
    params = {'binary_data_output': True}
    params.update(extra_params or {})
    hdr = json.dumps({'inputs': [{'name': name, 'shape': list(x.shape), 'datatype': 'FP32', 'parameters': p}],
                      'parameters': params}).encode()
    return hdr + x.astype('<f4').tobytes(), {'Inference-Header-Content-Length': str(len(hdr)),
                                               'Content-Type': 'application/octet-stream'}


def binary_output(status, headers, body):
    if status != 200 or 'inference-header-content-length' not in headers:
        return None
    n = int(headers['inference-header-content-length'])
    o = json.loads(body[:n])['outputs'][0]
    return np.frombuffer(body[n:n + o['parameters']['binary_data_size']], dtype='<f4').reshape(o['shape'])


def reference(x, model=None):
    """toplu run over the rows of x: the engine's own outputs."""
    model = model or CLS
    d = os.path.join(WORK, CASE)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, 'ref_in.npy'), x)
    out = os.path.join(d, 'ref_out')
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([TOPLU, 'run', model, '--input', f'x={d}/ref_in.npy', '--output', out, '-q'],
                       capture_output=True, text=True)
    if r.returncode:
        raise Failure('reference toplu run failed: ' + r.stderr[-400:])
    return np.load(os.path.join(out, 'softmax_0.tmp_0.npy'))


def close(a, b, tol=1e-4):
    return a is not None and a.shape == b.shape and float(np.max(np.abs(a - b))) <= tol


rng = np.random.default_rng(11)


def batched_cfg(name, delay=5000, **kw):
    cfg = {'name': name, 'max_batch_size': 32, 'dynamic_batching': {'max_queue_delay_microseconds': delay}}
    cfg.update(kw)
    return cfg



class StagedRequest:
    """A POST whose body is sent but for its last byte when made; finish() sends that byte and returns
    (status, headers, body).  The server queues a request when its body is complete, so a large request
    can be queued at a chosen moment without the time its upload takes."""

    def __init__(self, port, path, body, headers, timeout=60):
        self.c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
        self.c.putrequest('POST', path)
        for k, v in headers.items():
            self.c.putheader(k, v)
        self.c.putheader('Content-Length', str(len(body)))
        self.c.endheaders()
        self.c.send(body[:-1])
        self.last = body[-1:]

    def finish(self):
        try:
            self.c.send(self.last)
            r = self.c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            self.c.close()

def wait_pending_on(s, n, model, while_alive=None):
    """Until server s holds n requests of model (queued or running).  With while_alive (a thread), gives up
    and returns False as soon as that thread has ended without the count reached: the run that was to hold
    the queue ended first (a loaded machine), and the caller tries again."""
    t0 = time.time()
    while time.time() - t0 < 30:
        if (metric(s.metrics(), 'nv_inference_pending_request_count', model) or 0) >= n:
            return True
        if while_alive is not None and not while_alive.is_alive():
            return False
        time.sleep(0.002)
    raise Failure(f'the server never held {n} requests of {model}')


# ---------------------------------------------------------------- cases

def case_batching():
    """32 concurrent clients on the direction classifier with a 5 ms delay: batches average >= 8 rows,
    every response holds its own row."""
    x = rng.uniform(-1, 1, size=(256, 3, 48, 192)).astype(np.float32)
    ref = reference(x)
    s = Server({'cls': (CLS, batched_cfg('cls'))})
    try:
        m0 = s.metrics()
        res, errs = {}, []
        # The requests are encoded before the clients start, and the clients start together: what the
        # average batch measures is the batcher, not how fast 32 Python threads under one GIL encode
        # 110 KB bodies while the server's inference takes both cores (a CI run saw 6.6 rows a batch).
        reqs = [binary_request(x[i:i + 1]) for i in range(256)]
        go = threading.Barrier(32)

        def client(k):
            c = http.client.HTTPConnection('127.0.0.1', s.port, timeout=120)
            try:
                go.wait(timeout=60)
                for j in range(8):
                    i = k * 8 + j
                    body, h = reqs[i]
                    c.request('POST', '/v2/models/cls/infer', body=body, headers=h)
                    r = c.getresponse()
                    res[i] = binary_output(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
            except Exception as e:  # noqa: BLE001
                errs.append(repr(e))
            finally:
                c.close()

        th = [threading.Thread(target=client, args=(k,)) for k in range(32)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        good = sum(close(res.get(i), ref[i:i + 1]) for i in range(256))
        check(good == 256 and not errs, f'256 responses from 32 clients, each its own row ({good} right)', str(errs[:2]))
        m1 = s.metrics()
        rows = metric(m1, 'nv_inference_count', 'cls') - (metric(m0, 'nv_inference_count', 'cls') or 0)
        batches = metric(m1, 'nv_inference_exec_count', 'cls') - (metric(m0, 'nv_inference_exec_count', 'cls') or 0)
        check(rows == 256, f'nv_inference_count counts the 256 rows ({rows})')
        check(batches > 0 and rows / batches >= 8, f'average batch {rows / max(batches, 1):.1f} rows >= 8 ({batches:.0f} batches)')
        ok = metric(m1, 'nv_inference_request_success', 'cls')
        check(ok == 256, f'nv_inference_request_success 256 ({ok})')
        hist = metric(m1, 'toplu_inference_batch_size_count', 'cls')
        check(hist == batches, f'the batch-size histogram counts every batch ({hist} == {batches})')
    finally:
        check(s.stop() == 0, 'server exits 0 on SIGTERM')


def case_shapes():
    """Requests of two widths in one window run in separate batches and each gets its own answer."""
    a = rng.uniform(-1, 1, size=(6, 3, 48, 192)).astype(np.float32)
    b = rng.uniform(-1, 1, size=(6, 3, 48, 160)).astype(np.float32)
    ra, rb = reference(a), reference(b)
    s = Server({'cls': (CLS, batched_cfg('cls', delay=50000))})
    try:
        out = {}

        def one(key, x, i):
            body, h = binary_request(x[i:i + 1])
            out[(key, i)] = binary_output(*s.req('POST', '/v2/models/cls/infer', body, h))

        th = [threading.Thread(target=one, args=(k, x, i)) for i in range(6) for k, x in (('a', a), ('b', b))]
        for t in th:
            t.start()
        for t in th:
            t.join()
        check(all(close(out.get(('a', i)), ra[i:i + 1]) for i in range(6)), 'width 192: every request its own output')
        check(all(close(out.get(('b', i)), rb[i:i + 1]) for i in range(6)), 'width 160: every request its own output')
        st = json.loads(s.req('GET', '/v2/models/cls/stats')[2])['model_stats'][0]
        check(st['inference_count'] == 12 and st['execution_count'] >= 2,
              f'12 rows in at least 2 batches ({st["inference_count"]} rows, {st["execution_count"]} batches)')
        # Multi-row requests are packed and split back.
        body, h = binary_request(a[:4])
        check(close(binary_output(*s.req('POST', '/v2/models/cls/infer', body, h)), ra[:4]), 'a 4-row request gets its 4 rows')
        # 3 and 5 rows run padded to the plan sizes 4 and 8: the answers hold their own rows only.
        for k in (3, 5):
            body, h = binary_request(a[:k])
            check(close(binary_output(*s.req('POST', '/v2/models/cls/infer', body, h)), ra[:k]), f'a {k}-row request gets its {k} rows')
        m = s.metrics()
        check(metric(m, 'nv_inference_count', 'cls') == 12 + 4 + 3 + 5, 'nv_inference_count counts real rows, not padding')
    finally:
        s.stop()


def case_plan_cache():
    """--plan-cache-bytes bounds what each new shape's plan leaves behind: one-row requests of 8 widths, each a
    plan of its own (6-8 MB of arena here, 56 MB together), keep the model's memory within the bound, and a width
    whose plan was dropped is built again and answered right."""
    bound = 25_000_000
    s = Server({'cls': (CLS, batched_cfg('cls', delay=100))}, extra=('--plan-cache-bytes', str(bound)))
    try:
        mem = lambda: metric(s.metrics(), 'toplu_memory_bytes', 'cls')
        m0, peak, xs = mem(), 0, {}
        for w in range(2000, 2800, 100):
            xs[w] = rng.uniform(-1, 1, size=(1, 3, 48, w)).astype(np.float32)
            body, h = binary_request(xs[w])
            got = binary_output(*s.req('POST', '/v2/models/cls/infer', body, h))
            check(close(got, reference(xs[w])), f'width {w}: the engine\'s answer')
            peak = max(peak, mem() - m0)
        check(0 < peak <= bound, f'the model\'s memory above its start stayed within --plan-cache-bytes ({peak:,.0f} <= {bound:,})')
        body, h = binary_request(xs[2000])
        check(close(binary_output(*s.req('POST', '/v2/models/cls/infer', body, h)), reference(xs[2000])),
              'width 2000 again (its plan dropped, built again): the same answer')
    finally:
        s.stop()


def slow_input():
    # about 300-500 ms a run on 2 cores (192 x 400 ran 146-255 ms on an Intel Xeon pair, under the 200 ms the
    # queue-timeout checks need)
    return rng.uniform(-1, 1, size=(1, 3, 48, 192 * 800)).astype(np.float32)


def case_queue_policy():
    """While a slow batch runs: a 100 ms queue timeout answers 503 at 100-130 ms, a full queue answers 503
    at once, and a request whose client went away is dropped without running.  A queue timeout never ends a
    run that has started (Triton): a request alone whose run outlasts its 20 ms timeout gets 200; with
    timeout_action DELAY (1 ms) a slow request alone and a request queued behind it past its timeout both
    get 200."""
    cfg = batched_cfg('cls', delay=0, dynamic_batching={
        'max_queue_delay_microseconds': 0,
        'default_queue_policy': {'timeout_action': 'REJECT', 'default_timeout_microseconds': 100000000,
                                 'allow_timeout_override': True, 'max_queue_size': 2}})
    cfg_delay = batched_cfg('cls_delay', delay=0, dynamic_batching={
        'max_queue_delay_microseconds': 0,
        'default_queue_policy': {'timeout_action': 'DELAY', 'default_timeout_microseconds': 1000}})
    s = Server({'cls': (CLS, cfg)})
    try:
        slow = slow_input()
        x = rng.uniform(-1, 1, size=(1, 3, 48, 192)).astype(np.float32)
        # Warm the slow shape once so its plan exists, and time it.
        body_slow, h_slow = binary_request(slow)
        t = time.time()
        st = s.req('POST', '/v2/models/cls/infer', body_slow, h_slow)[0]
        slow_s = time.time() - t
        t = time.time()
        s.req('POST', '/v2/models/cls/infer', body_slow, h_slow)
        slow_s = time.time() - t
        check(st == 200 and slow_s > 0.2, f'the slow request takes {slow_s * 1000:.0f} ms (> 200 ms needed)')
        body, h = binary_request(x)
        s.req('POST', '/v2/models/cls/infer', body, h)  # the small plan

        def run_slow():
            s.req('POST', '/v2/models/cls/infer', body_slow, h_slow)

        def wait_pending(n, model='cls'):
            wait_pending_on(s, n, model)  # s: whichever server this case runs then

        # 1. A queue timeout fires while the slow batch runs.
        th = threading.Thread(target=run_slow)
        th.start()
        wait_pending(1)
        body_t, h_t = binary_request(x, extra_params={'timeout': 100000})
        t = time.time()
        st, _, b = s.req('POST', '/v2/models/cls/infer', body_t, h_t)
        dt = (time.time() - t) * 1000
        check(st == 503 and 'timed out' in json.loads(b)['error'] and 95 <= dt <= 130,
              f'queue timeout of 100 ms: 503 after {dt:.0f} ms', b[:200])
        th.join()
        # 2. A full queue answers at once.
        th = threading.Thread(target=run_slow)
        th.start()
        wait_pending(1)
        queued = []
        qs = [threading.Thread(target=lambda: queued.append(s.req('POST', '/v2/models/cls/infer', body, h)[0]))
              for _ in range(2)]
        for q in qs:
            q.start()
        wait_pending(3)
        t = time.time()
        st, _, b = s.req('POST', '/v2/models/cls/infer', body, h)
        dt = (time.time() - t) * 1000
        check(st == 503 and 'queue is full' in json.loads(b)['error'] and dt < 50,
              f'a full queue (max_queue_size 2) answers 503 in {dt:.1f} ms', b[:200])
        for q in qs:
            q.join()
        th.join()
        # 3. A client that went away before its batch formed: dropped, never run.
        m0 = s.metrics()
        th = threading.Thread(target=run_slow)
        th.start()
        wait_pending(1)
        body_long, h_long = binary_request(x, extra_params={'timeout': 60000000})
        c = socket.create_connection(('127.0.0.1', s.port))
        c.sendall(b'POST /v2/models/cls/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n' % len(body_long) +
                  ''.join(f'{k}: {v}\r\n' for k, v in h_long.items()).encode() + b'\r\n' + body_long)
        wait_pending(2)
        c.close()
        th.join()
        time.sleep(0.2)
        m1 = s.metrics()
        canceled = (metric(m1, 'nv_inference_request_failure', 'cls', reason='CANCELED') or 0) - \
            (metric(m0, 'nv_inference_request_failure', 'cls', reason='CANCELED') or 0)
        rows = metric(m1, 'nv_inference_count', 'cls') - metric(m0, 'nv_inference_count', 'cls')
        check(canceled == 1 and rows == 1, f'the abandoned request is dropped: 1 CANCELED, 1 row run (the slow one): {canceled}, {rows}')
        # 4. A queue timeout does not end a run: alone on an idle model, a run of > 200 ms with a 20 ms timeout.
        body_20, h_20 = binary_request(slow, extra_params={'timeout': 20000})
        st, _, b = s.req('POST', '/v2/models/cls/infer', body_20, h_20)
        check(st == 200, f'a run that outlasts its 20 ms queue timeout: {st} (want 200)', b[:200])
        check(s.req('GET', '/v2/health/live')[0] == 200, 'server live after all that')
    finally:
        s.stop()
    # 5. DELAY: a slow request alone, and a small one that waits past its 1 ms timeout behind it (a model
    # served alone, as above: two models would share the cores' threads).
    s = Server({'cls_delay': (CLS, cfg_delay)})
    try:
        s.req('POST', '/v2/models/cls_delay/infer', body_slow, h_slow)  # the slow plan
        st, _, b = s.req('POST', '/v2/models/cls_delay/infer', body_slow, h_slow)
        check(st == 200, f'DELAY, 1 ms timeout, a slow request alone: {st} (want 200)', b[:200])
        s.req('POST', '/v2/models/cls_delay/infer', body, h)  # the small plan
        m0 = s.metrics()
        th = threading.Thread(target=lambda: s.req('POST', '/v2/models/cls_delay/infer', body_slow, h_slow))
        th.start()
        wait_pending(1, 'cls_delay')
        t = time.time()
        st, _, b = s.req('POST', '/v2/models/cls_delay/infer', body, h)
        dt = (time.time() - t) * 1000
        th.join()
        m1 = s.metrics()
        ok_n = metric(m1, 'nv_inference_request_success', 'cls_delay') - metric(m0, 'nv_inference_request_success', 'cls_delay')
        check(st == 200 and dt > 20 and ok_n == 2,
              f'DELAY: a request queued {dt:.0f} ms behind a slow batch (timeout 1 ms): {st}, successes {ok_n} '
              f'(want 200 after > 20 ms, 2)', b[:200])
        check(s.req('GET', '/v2/health/live')[0] == 200, 'server live after all that')
    finally:
        s.stop()


def case_queue_triton():
    """Queue policies read as Triton's PriorityQueue and PolicyQueue do (a fresh user's findings of 2026-12-06):
    a priority_queue_policy entry is a whole policy (its unset fields at the proto defaults, not the default
    policy's); allow_timeout_override needs a default timeout to go below (with none, a request's timeout is
    not used); a DELAY timeout moves a request behind the requests of its level still in time."""
    cfg = batched_cfg('cls', delay=0, dynamic_batching={
        'max_queue_delay_microseconds': 0, 'priority_levels': 2, 'default_priority_level': 2,
        'default_queue_policy': {'timeout_action': 'REJECT', 'default_timeout_microseconds': 1000,
                                 'allow_timeout_override': True, 'max_queue_size': 2},
        'priority_queue_policy': {'1': {'max_queue_size': 100}}})
    cfg_delay = batched_cfg('cls_d', delay=0, dynamic_batching={
        'max_queue_delay_microseconds': 0,
        'default_queue_policy': {'timeout_action': 'DELAY', 'default_timeout_microseconds': 5000000,
                                 'allow_timeout_override': True}})
    cfg_none = batched_cfg('cls_n', delay=0, dynamic_batching={
        'max_queue_delay_microseconds': 0, 'default_queue_policy': {'allow_timeout_override': True}})
    s = Server({'cls': (CLS, cfg)})
    try:
        got = json.loads(s.req('GET', '/v2/models/cls/config')[2])['dynamic_batching']
        lvl1 = got.get('priority_queue_policy', {}).get('1', {})
        check(lvl1.get('max_queue_size') in (100, '100') and lvl1.get('default_timeout_microseconds') in (None, 0, '0')
              and lvl1.get('timeout_action', 'REJECT') == 'REJECT' and not lvl1.get('allow_timeout_override', False),
              'level 1: max_queue_size 100, no timeout, no override (not the default policy\'s 1 ms)', str(got)[:600])
    finally:
        s.stop()
    slow = slow_input()
    x = rng.uniform(-1, 1, size=(1, 3, 48, 192)).astype(np.float32)
    x2 = rng.uniform(-1, 1, size=(1, 3, 48, 96)).astype(np.float32)
    body_slow, h_slow = binary_request(slow)
    s = Server({'cls_n': (CLS, cfg_none), 'cls_d': (CLS, cfg_delay)})
    try:
        # allow_timeout_override without a default timeout: a 1 ms request timeout queued behind a slow run is
        # not a timeout (it was: 503 after 1 ms)
        for body, h in (binary_request(x), (body_slow, h_slow)):
            s.req('POST', '/v2/models/cls_n/infer', body, h)  # the plans
        th = threading.Thread(target=lambda: s.req('POST', '/v2/models/cls_n/infer', body_slow, h_slow))
        th.start()
        wait_pending_on(s, 1, 'cls_n')
        b1, h1 = binary_request(x, extra_params={'timeout': 1000})
        st, _, b = s.req('POST', '/v2/models/cls_n/infer', b1, h1)
        th.join()
        check(st == 200, f'no default timeout: a request timeout of 1 ms is not used, 200 behind a slow run ({st})',
              b[:200])
        # DELAY: two requests of one shape whose 1 ms timeouts pass while a slow run goes, then one of another
        # shape still in time (the default 5 s): it runs before the two delayed ones (it ran after them)
        for body, h in (binary_request(x), binary_request(x2), (body_slow, h_slow)):
            s.req('POST', '/v2/models/cls_d/infer', body, h)
        bs, hs = binary_request(slow, extra_params={'timeout': 1000})
        bc, hc = binary_request(x2)
        for attempt in range(4):
            # the scene holds only while the first slow run still goes when the two late requests and then the
            # one in time are queued (pending 3, then 4: the run, the two, the one). Their 88 MB bodies are sent
            # before the run starts, all but the last byte (a request is queued when its body is complete), so
            # that on a fast machine the run does not end while they upload (it did on a Zen 5, 2026-12-07: four
            # attempts in four); should it end all the same, the attempt is made again
            done = {}
            staged = [StagedRequest(s.port, '/v2/models/cls_d/infer', bs, hs) for _ in range(2)]

            def send(tag, body, h):
                st = s.req('POST', '/v2/models/cls_d/infer', body, h)[0]
                done[tag] = (st, time.time())

            def finish(tag, r):
                st = r.finish()[0]
                done[tag] = (st, time.time())
            th = threading.Thread(target=lambda: s.req('POST', '/v2/models/cls_d/infer', body_slow, h_slow))
            th.start()
            wait_pending_on(s, 1, 'cls_d')
            late = [threading.Thread(target=finish, args=('delayed%d' % k, r)) for k, r in enumerate(staged)]
            for t in late:
                t.start()
            held = wait_pending_on(s, 3, 'cls_d', while_alive=th)
            intime = None
            if held:
                time.sleep(0.01)
                intime = threading.Thread(target=send, args=('in_time', bc, hc))
                intime.start()
                held = wait_pending_on(s, 4, 'cls_d', while_alive=th)
            for t in late + [intime, th]:
                if t is not None:
                    t.join()
            if held:
                break
            print(f'note: the slow run ended before the late requests were queued (attempt {attempt + 1})')
        else:
            raise Failure('the slow run always ended before the late requests were queued (4 attempts)')
        check(all(v[0] == 200 for v in done.values()) and len(done) == 3, 'all three answered 200', done)
        check(done['in_time'][1] < min(done['delayed0'][1], done['delayed1'][1]),
              'the request still in time is answered before the two whose DELAY timeout passed',
              {k: round(v[1] - done['in_time'][1], 3) for k, v in done.items()})
    finally:
        s.stop()


def case_metrics_add_up():
    """Every response to an infer request is counted once: success + failure (by reason) = responses."""
    s = Server({'cls': (CLS, batched_cfg('cls', delay=1000))})
    try:
        x = rng.uniform(-1, 1, size=(1, 3, 48, 192)).astype(np.float32)
        body, h = binary_request(x)
        statuses = []
        bad = [b'{', json.dumps({'inputs': [{'name': 'x', 'shape': [1, 3, 4], 'datatype': 'FP32', 'data': [0] * 12}]}).encode(),
               json.dumps({'inputs': [{'name': 'x', 'shape': [1, 3, 48, 1], 'datatype': 'FP32', 'data': [0.5] * 144}]}).encode()]
        for k in range(30):
            if k % 3 == 0:
                st, _, b = s.req('POST', '/v2/models/cls/infer', bad[k // 3 % 3])
                statuses.append(st)
                if k // 3 % 3 < 2:
                    check(st == 400 and 'error' in json.loads(b), f'bad request {k // 3 % 3}: {st} with an error', b[:200])
            else:
                statuses.append(s.req('POST', '/v2/models/cls/infer', body, h)[0])
        m = s.metrics()
        ok = metric(m, 'nv_inference_request_success', 'cls')
        fail = metric(m, 'nv_inference_request_failure', 'cls')
        check(ok == statuses.count(200), f'successes {ok} = 200 responses {statuses.count(200)}')
        check(ok + fail == len(statuses), f'success + failure = {ok + fail} = {len(statuses)} responses')
        check(metric(m, 'nv_inference_request_failure', 'cls', reason='BAD_REQUEST') >= 7, 'bad requests under reason BAD_REQUEST')
        # the host's CPU and memory, as Triton's nv_cpu_* (the 20 runs above kept a core busy part of the time)
        host = {ln.split(' ')[0]: float(ln.rsplit(' ', 1)[1]) for ln in m.splitlines()
                if ln.startswith('nv_cpu_')}
        u, tot, used = (host.get(k) for k in ('nv_cpu_utilization', 'nv_cpu_memory_total_bytes', 'nv_cpu_memory_used_bytes'))
        check(u is not None and 0 < u <= 1, f'nv_cpu_utilization in (0, 1] after the runs: {u}')
        check(tot and used and (1 << 20) < used < tot, f'nv_cpu_memory_used_bytes {used} < _total_bytes {tot}')
        check(s.req('GET', '/v2/health/live')[0] == 200, 'live after a request the engine refused (width 1)')
    finally:
        s.stop()


def case_cache():
    """response_cache: a repeated request is a hit (not an inference), with its own id; a reload drops entries."""
    s = Server({'cls': (CLS, batched_cfg('cls', delay=0, response_cache={'enable': True}))})
    try:
        x = rng.uniform(-1, 1, size=(2, 3, 48, 32)).astype(np.float32)
        ref = reference(x)
        req = {'inputs': [{'name': 'x', 'shape': list(x.shape), 'datatype': 'FP32', 'data': x.reshape(-1).tolist()}]}
        outs = []
        for i in range(3):
            req['id'] = f'r{i}'
            st, _, b = s.req('POST', '/v2/models/cls/infer', json.dumps(req))
            d = json.loads(b)
            outs.append(d)
            check(st == 200 and d.get('id') == f'r{i}', f'request {i} answered with its id', b[:200])
        check(all(close(np.array(d['outputs'][0]['data'], np.float32).reshape(2, 2), ref) for d in outs), 'hits hold the outputs')
        m = s.metrics()
        check(metric(m, 'nv_cache_num_hits_per_model', 'cls') == 2, 'two cache hits', str(metric(m, 'nv_cache_num_hits_per_model', 'cls')))
        check(metric(m, 'nv_inference_count', 'cls') == 2, 'one inference of 2 rows (hits are not inferences)')
        check(metric(m, 'nv_inference_request_success', 'cls') == 3, 'three successes')
        st = s.req('POST', '/v2/repository/models/cls/load')[0]
        check(st == 200, 'reload answers 200')
        req['id'] = 'after'
        s.req('POST', '/v2/models/cls/infer', json.dumps(req))
        m = s.metrics()
        misses0 = metric(m, 'nv_cache_num_misses_per_model', 'cls')
        check(misses0 == 2 and metric(m, 'nv_cache_num_hits_per_model', 'cls') == 2,
              'after a reload the same request misses (entries dropped; the counters go on from 1 miss and 2 hits)',
              str(misses0))
    finally:
        s.stop()


def case_repository():
    """Load, unload and reload without dropping traffic; the index; metadata, config and errors."""
    s = Server({'cls': (CLS, batched_cfg('cls', delay=2000)), 'mnist': (MNIST, {'max_batch_size': 0})})
    try:
        x = rng.uniform(-1, 1, size=(1, 3, 48, 192)).astype(np.float32)
        ref = reference(x)
        body, h = binary_request(x)
        stop, res = threading.Event(), []

        def traffic():
            while not stop.is_set():
                res.append(binary_output(*s.req('POST', '/v2/models/cls/infer', body, h)))

        th = [threading.Thread(target=traffic) for _ in range(8)]
        for t in th:
            t.start()
        for _ in range(6):
            time.sleep(0.15)
            st, _, b = s.req('POST', '/v2/repository/models/cls/load')
            check(st == 200, 'reload under traffic answers 200', b[:200])
        time.sleep(0.2)
        stop.set()
        for t in th:
            t.join()
        check(len(res) > 10 and all(close(r, ref) for r in res), f'{len(res)} requests during 6 reloads all answered right')
        idx = json.loads(s.req('POST', '/v2/repository/index')[2])
        check({(m['name'], m.get('state')) for m in idx} == {('cls', 'READY'), ('mnist', 'READY')}, 'index lists both READY', str(idx))
        check(s.req('POST', '/v2/repository/models/mnist/unload')[0] == 200, 'unload mnist')
        st, _, b = s.req('GET', '/v2/models/mnist/ready')
        check(st == 404 and b"model 'mnist' is not ready (not loaded)" in b, 'mnist not ready after unload', b)
        # a name the repository does not have is unknown, as infer and metadata say (a fresh user's finding)
        st, _, b = s.req('GET', '/v2/models/nope/ready')
        check(st == 404 and b"unknown model 'nope'" in b, 'ready of a model the repository does not have', b)
        idx = json.loads(s.req('POST', '/v2/repository/index')[2])
        check(any(m['name'] == 'mnist' and m['state'] == 'UNAVAILABLE' for m in idx), 'index shows mnist UNAVAILABLE', str(idx))
        check(s.req('POST', '/v2/repository/models/mnist/load')[0] == 200, 'load mnist again')
        check(s.req('GET', '/v2/models/mnist/ready')[0] == 200, 'mnist ready again')
        st, _, b = s.req('POST', '/v2/repository/models/mnist/unload')
        idx = json.loads(s.req('POST', '/v2/repository/index', json.dumps({'ready': True}))[2])
        check([m['name'] for m in idx] == ['cls'], 'index with ready: true lists only the READY model', str(idx))
        st, _, b = s.req('POST', '/v2/repository/models/mnist/load',
                         json.dumps({'parameters': {'config': json.dumps({'max_batch_size': 0, 'response_cache': {'enable': True}})}}))
        mc = json.loads(s.req('GET', '/v2/models/mnist/config')[2])
        check(st == 200 and mc['response_cache']['enable'] is True, 'load with parameters.config uses that configuration', str(mc)[:200])
        # A max_batch_size whose plan cannot fit in memory is refused before the warm-up would build it (a
        # fresh user's 100,000,000 on an MLP grew the server past 11 GB), and the loaded version keeps serving.
        st, _, b = s.req('POST', '/v2/repository/models/mnist/load',
                         json.dumps({'parameters': {'config': json.dumps({'max_batch_size': 2000000000})}}))
        e = json.loads(b).get('error', '') if st != 200 else ''
        check(st == 400 and 'does not fit in memory' in e and 'rows fit' in e and '2000000000' in e,
              'max_batch_size 2,000,000,000: 400, does not fit in memory, how many rows fit', b[:300])
        mc = json.loads(s.req('GET', '/v2/models/mnist/config')[2])
        check(s.req('GET', '/v2/models/mnist/ready')[0] == 200 and mc['response_cache']['enable'] is True,
              'and the version loaded before keeps serving', str(mc)[:200])
        st, _, b = s.req('POST', '/v2/repository/models/mnist/load', b'not json')
        check(st == 400 and 'JSON' in json.loads(b)['error'], 'a load body that is not JSON: 400', b[:200])
        st, _, b = s.req('POST', '/v2/repository/models/mnist/load', json.dumps({'parameters': {'file:1/model.onnx': 'AAAA'}}))
        check(st == 400 and 'not supported' in json.loads(b)['error'], 'parameters.file: is refused, not ignored', b[:200])
        st, _, b = s.req('POST', '/v2/repository/models/nosuch/load')
        check(st == 404 and 'nosuch' in json.loads(b)['error'], 'loading an unknown model: 404 naming it', b[:200])
        md = json.loads(s.req('GET', '/v2/models/cls')[2])
        check(md['inputs'][0] == {'name': 'x', 'datatype': 'FP32', 'shape': [-1, 3, -1, -1]} and md['versions'] == ['1'],
              'metadata: x FP32 [-1, 3, -1, -1], versions ["1"]', str(md))
        cfg = json.loads(s.req('GET', '/v2/models/cls/config')[2])
        check(cfg.get('max_batch_size') == 32 and cfg.get('dynamic_batching', {}).get('max_queue_delay_microseconds') in (2000, '2000'),
              'config: max_batch_size 32, the delay', str(cfg)[:300])
        check(s.req('GET', '/v2/models/cls/versions/1/ready')[0] == 200, 'versions/1/ready')
        mc = json.loads(s.req('GET', '/v2/models/mnist/config')[2])
        check(mc.get('name') == 'mnist' and mc.get('max_batch_size') == 0, 'a config.json without name: the folder name', str(mc)[:200])
        st, _, b = s.req('GET', '/v2/models/cls/versions/7')
        check(st == 404 and 'error' in json.loads(b), 'an unknown version: 404', b[:200])
        check(s.req('GET', '/v2/models/cls/infer')[0] == 405, 'GET on infer: 405')
        st, _, b = s.req('GET', '/v2/nothing/here')
        check(st == 404 and 'error' in json.loads(b), 'an unknown endpoint: 404 with a JSON error')
        d = json.loads(s.req('GET', '/v2')[2])
        check(d['name'] == 'toplu' and 'model_repository' in d['extensions'], '/v2 lists the extensions')
    finally:
        s.stop()


def case_auto_batch():
    """No max_batch_size: the planner's choice, said in the log and in .../config; an output without the
    batch dim turns batching off with a log line naming it."""
    import onnx
    from onnx import TensorProto as T, helper
    d = os.path.join(WORK, CASE + '_models')
    os.makedirs(d, exist_ok=True)
    g = helper.make_graph([helper.make_node('ReduceSum', ['x'], ['total'], keepdims=0, axes=[0])], 'sum0',
                          [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])],
                          [helper.make_tensor_value_info('total', T.FLOAT, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 11)])
    m.ir_version = 7
    onnx.save(m, os.path.join(d, 'sum0.onnx'))
    s = Server({'cls': (CLS, {'name': 'cls', 'dynamic_batching': {}}), 'sum0': (os.path.join(d, 'sum0.onnx'), None)})
    try:
        log = s.text()
        check("model 'cls' version 1: max_batch_size" in log and 'planner' in log, 'the log says where cls batch size came from',
              log[-600:])
        cfg = json.loads(s.req('GET', '/v2/models/cls/config')[2])
        src = cfg.get('parameters', {}).get('max_batch_size_source', {}).get('string_value', '')
        check(cfg.get('max_batch_size', 0) >= 1 and 'planner' in src, f'config: max_batch_size {cfg.get("max_batch_size")} from the planner', src)
        check("output 'total'" in log and 'without batching' in log, 'sum0 served without batching, the log names the output', log[-600:])
        st, _, b = s.req('POST', '/v2/models/sum0/infer', json.dumps({'inputs': [{'name': 'x', 'shape': [2, 3], 'datatype': 'FP32',
                                                                            'data': [1, 2, 3, 4, 5, 6]}]}))
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [5, 7, 9], 'sum0 runs the whole request', b[:200])
    finally:
        s.stop()
    # A tune result beside the model gives max_batch_size, but only one measured on this model: a copy of another
    # model's tune.json (here sum0's) is not used, with a warning (it was taken until 2026-12-06).
    tunes = {}
    for name, src, sizes in (('sum0', os.path.join(d, 'sum0.onnx'), '1,2'), ('cls', CLS, '1,3')):
        out = os.path.join(WORK, CASE + '_tune_' + name)
        shutil.rmtree(out, ignore_errors=True)
        r = subprocess.run([TOPLU, 'tune', src, '--batch-sizes', sizes, '--threads', '1', '--max-seconds', '0.3',
                            '--out', out], capture_output=True, text=True, timeout=300)
        if r.returncode:
            raise Failure(f'toplu tune {name}: exit {r.returncode}: {r.stderr[-400:]}')
        tunes[name] = os.path.join(out, 'tune.json')
    want = json.load(open(tunes['cls']))['recommended_batch_size']
    s = Server({'own': (CLS, None), 'other': (CLS, None)}, tag='_tune',
               files={'own/tune.json': tunes['cls'], 'other/tune.json': tunes['sum0']})
    try:
        log = s.text()
        cfg = json.loads(s.req('GET', '/v2/models/own/config')[2])
        src = cfg.get('parameters', {}).get('max_batch_size_source', {}).get('string_value', '')
        check(cfg.get('max_batch_size') == want and 'tune result' in src,
              f"own: max_batch_size {cfg.get('max_batch_size')} from its tune result ({want})", src)
        cfg = json.loads(s.req('GET', '/v2/models/other/config')[2])
        src = cfg.get('parameters', {}).get('max_batch_size_source', {}).get('string_value', '')
        check('planner' in src and 'tune result' not in src, "other: another model's tune.json is not used", src)
        check("model 'other': tune result" in log and 'another model' in log, 'the log says why', log[-800:])
    finally:
        s.stop()


def case_small_memory():
    """A server in little memory (TOPLU_MEMORY_AVAILABLE=400000000, as a 400 MB container's cgroup limit): the body and
    in-flight bounds follow the memory (a 16-row JSON request's parse got such a server killed), a max_batch_size is
    checked with room for two plans of it, and a size toplu chose is lowered to what fits, not refused."""
    os.environ['TOPLU_MEMORY_AVAILABLE'] = '400000000'
    try:
        s = Server({'cls': (CLS, {'name': 'cls', 'max_batch_size': 8, 'dynamic_batching': {}}),
                    'mnist': (MNIST, {'name': 'mnist', 'max_batch_size': 8})})
    finally:
        del os.environ['TOPLU_MEMORY_AVAILABLE']
    try:
        zeros = b'{"inputs":[{"name":"x","shape":[2500000],"datatype":"FP32","data":[' + b','.join([b'0'] * 2500000) + b']}]}'
        st, _, b = s.req('POST', '/v2/models/cls/infer', zeros, {'Content-Type': 'application/json'})
        check(st == 413 and b'max_inflight_bytes' in b, f'a 5 MB JSON body whose parse takes ~120 MB: 413 ({st})', b[:300])
        st, _, b = s.req('POST', '/v2/repository/models/mnist/load',
                         json.dumps({'parameters': {'config': json.dumps({'max_batch_size': 1000000})}}).encode())
        check(st == 400 and b'does not fit in memory' in b and b'two plans' in b and b'rows fit' in b,
              f'MNIST max_batch_size 1000000 in 400 MB: 400, naming the two plans and what fits ({st})', b[:400])
        x = rng.uniform(-1, 1, size=(8, 3, 48, 192)).astype(np.float32)
        body, h = binary_request(x)
        check(close(binary_output(*s.req('POST', '/v2/models/cls/infer', body, h)), reference(x)), 'cls still serves 8 rows')
    finally:
        check(s.stop() == 0, 'exit 0')


def case_single_model():
    """toplu serve MODEL.onnx: one model named after the file, batching from the planner."""
    s = Server({}, single=CLS)
    try:
        name = os.path.basename(CLS)[:-5]
        x = rng.uniform(-1, 1, size=(3, 3, 48, 64)).astype(np.float32)
        body, h = binary_request(x)
        check(close(binary_output(*s.req('POST', f'/v2/models/{name}/infer', body, h)), reference(x)), f'model {name} serves 3 rows')
    finally:
        check(s.stop() == 0, 'exit 0')


def case_sigterm():
    """SIGTERM under load: every request read gets 200 or 503, nothing dropped, exit 0."""
    s = Server({'cls': (CLS, batched_cfg('cls', delay=2000))})
    x = rng.uniform(-1, 1, size=(1, 3, 48, 192)).astype(np.float32)
    body, h = binary_request(x)
    answered, lost, stop = [], [], threading.Event()

    def loader():
        while not stop.is_set():
            try:
                c = http.client.HTTPConnection('127.0.0.1', s.port, timeout=60)
                c.connect()
            except OSError:
                return
            try:
                c.request('POST', '/v2/models/cls/infer', body=body, headers=h)
                r = c.getresponse()
                r.read()
                answered.append(r.status)
            except (http.client.RemoteDisconnected, http.client.IncompleteRead) as e:
                lost.append(repr(e))
            except OSError:
                return
            finally:
                c.close()

    th = [threading.Thread(target=loader) for _ in range(12)]
    for t in th:
        t.start()
    time.sleep(1.0)
    code = s.stop()
    stop.set()
    for t in th:
        t.join()
    check(not lost and answered and all(a in (200, 503) for a in answered),
          f'{len(answered)} answered ({answered.count(200)} x 200, {answered.count(503)} x 503), {len(lost)} dropped', str(lost[:2]))
    check(code == 0, f'exit status {code}')
    log = s.text()
    check('shutting down' in log, 'the log says it is shutting down')
    import re
    m = re.search(r"model 'cls' version 1: (\d+) success, (\d+) failure", log)
    check(m and int(m.group(1)) == answered.count(200) and int(m.group(2)) == answered.count(503),
          f'the final counts add up to the responses: {m.group(0) if m else "no count line"} '
          f'vs {answered.count(200)} x 200, {answered.count(503)} x 503')
    # SIGTERM while the models load (warm-up runs at 8 batch sizes): the loading stops at the next warm-up run,
    # nothing listens, exit 0 (it was the default action, exit 143, before the handler came first; then, until
    # 2026-12-05, a stop once every model had loaded and warmed up, the socket opened after the signal)
    cfg = batched_cfg('cls', delay=2000)
    cfg['model_warmup'] = [{'name': f'w{n}', 'batch_size': n,
                            'inputs': {'x': {'data_type': 'TYPE_FP32', 'dims': [3, 48, 192], 'random_data': True}}}
                           for n in (1, 2, 4, 8, 16, 32, 3, 5)]
    with open(os.path.join(s.repo, 'cls', 'config.json'), 'w') as f:
        json.dump(cfg, f)
    with open(os.path.join(s.dir, 'server2.log'), 'w') as lf:
        p = subprocess.Popen([TOPLU, 'serve', '--http-port', str(harness.free_port()), '--host', '127.0.0.1',
                              '--model-repository', s.repo], stdout=lf, stderr=subprocess.STDOUT)
        time.sleep(0.3)
        loading = p.poll() is None
        p.send_signal(signal.SIGTERM)
        t_sig = time.monotonic()
        try:
            code = p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            code = 'none (killed after 60 s)'
        took = time.monotonic() - t_sig
    with open(os.path.join(s.dir, 'server2.log')) as f:
        log2 = f.read()
    check(loading and code == 0 and 'stopped by a signal while the models loaded; not listening' in log2 and
          'listening on' not in log2 and took < 5,
          f'SIGTERM 0.3 s after start, while warming up: exit status {code} after {took:.2f} s (want 0, within 5 s, '
          f'the log saying it stopped before listening)', log2[-400:])


def case_priorities():
    """priority_levels 2: while a slow batch runs, a level-1 request queued after level-2 ones runs first."""
    cfg = batched_cfg('cls', dynamic_batching={'max_queue_delay_microseconds': 0, 'priority_levels': 2,
                                               'default_priority_level': 2})
    cfg['max_batch_size'] = 1
    s = Server({'cls': (CLS, cfg)})
    try:
        slow = slow_input()
        # Each queued request runs ~15 ms, so that their answers come back further apart than the
        # client threads' own scheduling jitter (the order is read from when the answers arrive).
        x = rng.uniform(-1, 1, size=(1, 3, 48, 192 * 16)).astype(np.float32)
        body_slow, h_slow = binary_request(slow)
        s.req('POST', '/v2/models/cls/infer', body_slow, h_slow)
        body, h = binary_request(x)
        s.req('POST', '/v2/models/cls/infer', body, h)  # the plan of the queued requests' shape
        order, lock = [], threading.Lock()

        def send(tag, prio):
            body, h = binary_request(x, extra_params={'priority': prio} if prio else None)
            st = s.req('POST', '/v2/models/cls/infer', body, h)[0]
            with lock:
                order.append((tag, st))

        def pending():
            return metric(s.metrics(), 'nv_inference_pending_request_count', 'cls') or 0

        th = [threading.Thread(target=lambda: s.req('POST', '/v2/models/cls/infer', body_slow, h_slow))]
        th[0].start()
        while pending() < 1:
            time.sleep(0.002)
        for k in range(3):
            t = threading.Thread(target=send, args=(f'low{k}', 0))
            t.start()
            th.append(t)
            while pending() < 2 + k:
                time.sleep(0.002)
        t = threading.Thread(target=send, args=('high', 1))
        t.start()
        th.append(t)
        for t in th:
            t.join()
        check([tag for tag, _ in order][0] == 'high' and all(st == 200 for _, st in order),
              f'the level-1 request overtakes three level-2 ones: {order}')
        body, h = binary_request(x, extra_params={'priority': 3})
        st, _, b = s.req('POST', '/v2/models/cls/infer', body, h)
        check(st == 200, 'priority 3 of 2 levels: the default level, 200 (Triton\'s SetPriority)', b[:200])
    finally:
        s.stop()


def case_versions_warmup():
    """version_policy all serves both versions; model_warmup runs before ready; instance_group count 2."""
    s = Server({'cls': (CLS, {'name': 'cls', 'max_batch_size': 8, 'dynamic_batching': {},
                             'version_policy': {'all': {}}, 'instance_group': [{'count': 2}],
                             'model_warmup': [{'name': 'w8', 'batch_size': 8, 'inputs': {
                                 'x': {'data_type': 'TYPE_FP32', 'dims': [3, 48, 96], 'random_data': True}}}]})})
    try:
        os.symlink(os.path.abspath(CLS), os.path.join(s.repo, 'cls', '1', '..', 'v2.onnx'))
        os.makedirs(os.path.join(s.repo, 'cls', '2'))
        os.rename(os.path.join(s.repo, 'cls', 'v2.onnx'), os.path.join(s.repo, 'cls', '2', 'model.onnx'))
        check(s.req('POST', '/v2/repository/models/cls/load')[0] == 200, 'reload picks up version 2')
        md = json.loads(s.req('GET', '/v2/models/cls')[2])
        check(sorted(md['versions']) == ['1', '2'], f'both versions listed: {md["versions"]}')
        x = rng.uniform(-1, 1, size=(5, 3, 48, 96)).astype(np.float32)
        ref = reference(x)
        for v in ('1', '2'):
            body, h = binary_request(x)
            st, hd, b = s.req('POST', f'/v2/models/cls/versions/{v}/infer', body, h)
            meta = json.loads(b[:int(hd['inference-header-content-length'])])
            check(meta['model_version'] == v and close(binary_output(st, hd, b), ref), f'version {v} answers 5 rows')
        st = json.loads(s.req('GET', '/v2/models/cls/versions/2/stats')[2])['model_stats']
        check(len(st) == 1 and st[0]['version'] == '2' and st[0]['inference_count'] == 5, 'stats of version 2 alone', str(st)[:300])
        # Two instances: concurrent requests of two shapes both answered right.
        out = {}

        def one(i, w):
            xi = rng.uniform(-1, 1, size=(1, 3, 48, w)).astype(np.float32)
            body, h = binary_request(xi)
            out[i] = (xi, binary_output(*s.req('POST', '/v2/models/cls/infer', body, h)))

        th = [threading.Thread(target=one, args=(i, 64 if i % 2 else 96)) for i in range(8)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        check(all(v[1] is not None for v in out.values()), 'two instances answer 8 concurrent requests')
        log = s.text()
        check('listening' in log, 'the server logged that it listens')
    finally:
        s.stop()
    # No model_warmup, but the config's dims fix the model's free width: every plan size warms up before the
    # server listens (until 2026-12-05 only the model's own dims counted, and the first requests built the plans)
    s = Server({'cls': (CLS, {'name': 'cls', 'max_batch_size': 4,
                             'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [3, 48, 192]}]})})
    try:
        log = s.text()
        warm = [f'input [{b}, 3, 48, 192]: chose' for b in (1, 2, 4)]
        check(all(w in log and log.index(w) < log.index('listening on') for w in warm) and
              'inputs with free dims' not in log, 'the config\'s dims fix the width: plans at 1, 2 and 4 rows warm '
              'up before it listens', log[-600:])
    finally:
        s.stop()


def case_slow_body():
    """A body trickling in past --request-timeout gets 408; the server stays live."""
    s = Server({'cls': (CLS, batched_cfg('cls'))}, extra=['--request-timeout', '1'])
    try:
        c = socket.create_connection(('127.0.0.1', s.port))
        c.sendall(b'POST /v2/models/cls/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n')
        got, closed = b'', False
        c.settimeout(0.3)
        t0 = time.time()
        while time.time() - t0 < 5 and b'\r\n\r\n' not in got:
            try:
                c.sendall(b' ')
            except OSError:
                closed = True
                break
            try:
                d = c.recv(4096)
                if not d:
                    closed = True
                    break
                got += d
            except socket.timeout:
                pass
        dt = time.time() - t0
        c.close()
        # libmicrohttpd closes the connection once the 408 is queued; a client still sending may not see it.
        check((got.startswith(b'HTTP/1.1 408') or (closed and not got)) and 0.9 <= dt <= 3,
              f'the trickling request is cut after {dt:.1f} s ({got[:12]!r}, closed {closed})', got[:200])
        # A client that sends part of its body and goes silent is disconnected after the request timeout
        # (it kept the connection for the 60 s connection timeout before).
        c = socket.create_connection(('127.0.0.1', s.port))
        c.sendall(b'POST /v2/models/cls/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\nhello')
        c.settimeout(10)
        t0 = time.time()
        try:
            d = c.recv(4096)
        except (socket.timeout, OSError):
            d = None
        dt = time.time() - t0
        c.close()
        check(d is not None and not d.startswith(b'HTTP/1.1 2') and 0.9 <= dt <= 4,
              f'a body that stops arriving: the connection ends after {dt:.1f} s (want 1-4 s; got {d!r:.40})')
        check(s.req('GET', '/v2/health/live')[0] == 200, 'live afterwards')
    finally:
        s.stop()


CASES = {k[5:]: v for k, v in globals().items() if k.startswith('case_')}

if __name__ == '__main__':
    try:
        CASES[CASE]()
    except Failure as e:
        print(f'FAIL: {e}')
        sys.exit(1)
