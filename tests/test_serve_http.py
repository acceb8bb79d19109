#!/usr/bin/python3
"""The KServe v2 protocol of `toplu serve` over real HTTP (tests/serve_http_protocol.cmake).

  test_serve_http.py TOPLU WORKDIR CLS_MODEL MNIST_MODEL CASE

One server per process on a free port, with a repository of one Identity model per datatype
(tests/serve_protocol_models.py, max_batch_size 8), an unbatched FP32 Identity, a two-input model,
the PaddleOCR direction classifier (max_batch_size 32) and MNIST (max_batch_size 0).  Clients are
http.client and raw sockets only.  Cases:

  endpoints  every endpoint (health, metadata, ready, config, stats, infer with and without
             versions/1, repository index/load/unload, metrics), wrong methods (405), unknown
             paths (404 JSON), unknown models and versions
  datatypes  every datatype: JSON flat and nested, binary in and out (binary_data_output and
             per-output binary_data), exact values at the extremes, requested outputs, id echo
  bytes      BYTES refused with a clear message, its length prefixes validated first
  malformed  bad JSON, bad shapes, counts that disagree with the shape (JSON and binary), unknown
             datatypes, bad Inference-Header-Content-Length, binary tails off, duplicate, missing
             and extra inputs, wrong nesting, malformed HTTP on raw sockets
  limits     a body over --max-request-bytes (Content-Length and chunked) is 413 JSON
  alloc      200 requests declaring 2^40 elements with tiny bodies: all 400, server RSS grows < 50 MB

Every error case checks the status, a JSON {"error"} whose message names the field, and that
GET /v2/health/live is 200 afterwards.  At the end the server must still be running, stop on
SIGTERM with status 0, and its stderr must hold no sanitizer report (the same suite runs against
build-asan/toplu).  Exit status 0 pass, 1 fail (every failed check is listed).
"""
import gzip
import http.client
import json
import math
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402
from serve_harness import FAILED, Failure, check  # noqa: E402

TOPLU, WORK, CLS, MNIST, CASE = sys.argv[1:6]
HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------- the repository

DTYPES = {  # KServe datatype -> (file suffix, numpy dtype)
    'BOOL': ('bool', np.bool_), 'UINT8': ('uint8', np.uint8), 'UINT16': ('uint16', np.uint16),
    'UINT32': ('uint32', np.uint32), 'UINT64': ('uint64', np.uint64), 'INT8': ('int8', np.int8),
    'INT16': ('int16', np.int16), 'INT32': ('int32', np.int32), 'INT64': ('int64', np.int64),
    'FP16': ('float16', np.float16), 'FP32': ('float32', np.float32), 'FP64': ('float64', np.float64),
}


def make_repo(repo):
    gen = os.path.join(os.path.dirname(repo), 'onnx')
    r = subprocess.run([sys.executable, os.path.join(HERE, 'serve_protocol_models.py'), gen],
                       capture_output=True, text=True)
    if r.returncode:
        raise Failure('serve_protocol_models.py failed: ' + r.stderr[-400:])
    for path, what in ((CLS, 'the PaddleOCR direction classifier'), (MNIST, 'MNIST')):
        if not os.path.exists(path):
            raise Failure(f'{what} is missing: {path}')
    models = {}
    for dt, (suffix, _) in DTYPES.items():
        models[f'identity_{suffix}'] = (os.path.join(gen, f'identity_{suffix}.onnx'), 8)
    models['identity_nb'] = (os.path.join(gen, 'identity_float32.onnx'), 0)
    models['two'] = (os.path.join(gen, 'two.onnx'), 8)
    models['any_rank'] = (os.path.join(gen, 'any_rank.onnx'), 0)
    models['reshape_s'] = (os.path.join(gen, 'reshape_s.onnx'), 0)
    models['cls'] = (CLS, 32)
    models['mnist'] = (MNIST, 0)
    for name, (src, mbs) in models.items():
        os.makedirs(os.path.join(repo, name, '1'))
        os.symlink(os.path.abspath(src), os.path.join(repo, name, '1', 'model.onnx'))
        cfg = {'name': name, 'max_batch_size': mbs}
        if name.startswith('identity_') or name == 'two':  # the protocol's exact round trips, NaN and Inf included
            cfg['parameters'] = {'allow_nonfinite': {'string_value': 'true'}}
        with open(os.path.join(repo, name, 'config.json'), 'w') as f:
            json.dump(cfg, f)


class Server:
    """toplu serve on a free port; stdout and stderr kept apart (sanitizer reports go to stderr)."""

    def __init__(self, extra=(), tag=''):
        self.dir = os.path.join(WORK, CASE + tag)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.repo = os.path.join(self.dir, 'repo')
        os.makedirs(self.repo)
        make_repo(self.repo)
        self.port = harness.free_port()
        self.out_path = os.path.join(self.dir, 'server.out')
        self.err_path = os.path.join(self.dir, 'server.err')
        self.out = open(self.out_path, 'w')
        self.err = open(self.err_path, 'w')
        args = [TOPLU, 'serve', '--model-repository', self.repo, '--http-port', str(self.port),
                '--host', '127.0.0.1', '--threads', '1', '--exit-on-error'] + list(extra)
        self.proc = harness.start(args, self.port, self.out, self.err, 300, lambda: self.stderr()[-1500:], Failure)

    def stderr(self):
        self.err.flush()
        with open(self.err_path, errors='replace') as f:
            return f.read()

    def req(self, method, path, body=None, headers=None, timeout=60, chunked=False):
        return harness.request(self.port, method, path, body, headers, timeout, chunked)

    def raw(self, data, timeout=10):
        """Send raw bytes on a fresh socket; the bytes that come back until the server closes or
        goes quiet (half a second)."""
        s = socket.create_connection(('127.0.0.1', self.port), timeout=timeout)
        got = b''
        try:
            s.sendall(data)
            s.settimeout(0.5 if data.endswith(b'\r\n\r\n') or b'Content-Length' in data else timeout)
            while True:
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    break
                except ConnectionResetError:
                    break
                if not b:
                    break
                got += b
        finally:
            s.close()
        return got

    def live(self):
        try:
            return self.req('GET', '/v2/health/live', timeout=10)[0] == 200
        except OSError:
            return False

    def finish(self):
        """The end of every case: still running, live, a clean stop, no sanitizer report."""
        alive = self.proc.poll() is None
        check(alive, 'the server process is still running at the end',
              f'exit status {self.proc.returncode}: {self.stderr()[-1500:]}')
        if alive:
            check(self.live(), 'GET /v2/health/live is 200 at the end')
            code = self.sigterm()
            check(code == 0, f'the server stops on SIGTERM with status 0 ({code})', self.stderr()[-1500:])
        text = self.stderr()
        # the library never prints: stderr holds only the command's log lines ("2026-...Z level: ...")
        # and sanitizer reports (checked below); libmicrohttpd's own warnings must go through the log
        stray = [ln for ln in text.splitlines() if ln.strip() and not re.match(r'\d{4}-\d\d-\d\dT[\d:.]+Z \w+: ', ln)
                 and not ln.startswith(('toplu serve:', '=', '    #', 'SUMMARY:', '  ', 'Shadow', 'READ', 'WRITE'))]
        check(not stray, 'the server\'s stderr holds only its log lines', '\n'.join(stray[:5]))
        self.check_sanitizers()

    def sigterm(self):
        """SIGTERM, then the exit status (None: killed after 120 s)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None

    def check_sanitizers(self):
        text = self.stderr()
        for mark in harness.SANITIZER_MARKS:
            at = text.find(mark)
            check(at < 0, f'no "{mark}" in the server\'s stderr', text[max(0, at - 200):at + 2500])


# ---------------------------------------------------------------- request helpers

def jbody(obj):
    return json.dumps(obj).encode(), {'Content-Type': 'application/json'}


def infer_json(s, model, obj, version=None):
    path = f'/v2/models/{model}' + (f'/versions/{version}' if version else '') + '/infer'
    body, h = jbody(obj)
    return s.req('POST', path, body, h)


def binary_body(header, tail):
    hdr = json.dumps(header).encode()
    return hdr + tail, {'Inference-Header-Content-Length': str(len(hdr)), 'Content-Type': 'application/octet-stream'}


def split_response(headers, body):
    """(JSON header object, the binary part) of a response."""
    n = int(headers.get('inference-header-content-length', len(body)))
    return json.loads(body[:n]), body[n:]


def error_message(status, body):
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get('error'), str):
        return None
    return obj['error']


def expect_error(s, what, want, resp, *names):
    """resp = (status, headers, body): status want, a JSON {"error"} naming each of names, then live."""
    status, headers, body = resp
    msg = error_message(status, body)
    ok = check(status == want, f'{what}: status {want}', f'got {status}: {body[:300]!r}')
    if ok:
        check(msg is not None, f'{what}: the body is JSON {{"error": ...}}', repr(body[:300]))
        check('json' in headers.get('content-type', ''), f'{what}: Content-Type is JSON',
              headers.get('content-type'))
        if msg is not None:
            missing = [n for n in names if n not in msg]
            check(not missing, f'{what}: the message names {names}', f'{msg!r} lacks {missing}')
    check(s.live(), f'{what}: the server stays live')
    return msg


def to_json_values(arr):
    """A numpy array as JSON values the protocol takes (NaN/Infinity as its strings)."""
    out = []
    for v in arr.reshape(-1).tolist():
        if isinstance(v, float) and not math.isfinite(v):
            out.append('NaN' if v != v else 'Infinity' if v > 0 else '-Infinity')
        else:
            out.append(v)
    return out


def from_json_values(vals, dtype):
    """Response JSON values back into a numpy array of dtype (exact: ints stay ints)."""
    conv = []
    for v in vals:
        if isinstance(v, str):
            v = {'NaN': float('nan'), 'Infinity': float('inf'), '-Infinity': float('-inf')}[v]
        conv.append(v)
    return np.array(conv, dtype=dtype)


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------- endpoints

def reference(x, model, in_name, out_name):
    """`toplu run` on x: the engine's own output, for the served answers to match."""
    d = os.path.join(WORK, CASE)
    np.save(os.path.join(d, 'ref_in.npy'), x)
    out = os.path.join(d, 'ref_out')
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([TOPLU, 'run', model, '--input', f'{in_name}={d}/ref_in.npy', '--output', out, '-q'],
                       capture_output=True, text=True)
    if r.returncode:
        raise Failure('reference toplu run failed: ' + r.stderr[-400:])
    return np.load(os.path.join(out, f'{out_name}.npy'))


def case_endpoints():
    s = Server()
    try:
        st, h, b = s.req('GET', '/v2/health/live')
        check(st == 200, f'GET /v2/health/live 200 ({st})')
        st, h, b = s.req('GET', '/v2/health/ready')
        check(st == 200, f'GET /v2/health/ready 200 ({st})')
        st, h, b = s.req('GET', '/v2')
        meta = json.loads(b) if st == 200 else {}
        check(st == 200 and meta.get('name') == 'toplu' and 'binary_tensor_data' in meta.get('extensions', [])
              and isinstance(meta.get('version'), str), 'GET /v2: name, version, extensions', b[:300])

        st, h, b = s.req('GET', '/v2/models/cls')
        m = json.loads(b) if st == 200 else {}
        check(st == 200 and m.get('name') == 'cls' and m.get('versions') == ['1'] and m.get('platform') == 'toplu_onnx',
              'GET /v2/models/cls: name, versions, platform', b[:300])
        check(m.get('inputs') == [{'name': 'x', 'datatype': 'FP32', 'shape': [-1, 3, -1, -1]}],
              'GET /v2/models/cls: input x FP32 [-1,3,-1,-1] (batch and symbolic dims -1)', str(m.get('inputs')))
        check(m.get('outputs') == [{'name': 'softmax_0.tmp_0', 'datatype': 'FP32', 'shape': [-1, 2]}],
              'GET /v2/models/cls: output softmax_0.tmp_0 FP32 [-1,2]', str(m.get('outputs')))
        st, h, b = s.req('GET', '/v2/models/mnist/versions/1')
        m = json.loads(b) if st == 200 else {}
        check(st == 200 and m.get('name') == 'mnist' and m.get('versions') == ['1'] and
              m.get('inputs') == [{'name': 'Input3', 'datatype': 'FP32', 'shape': [1, 1, 28, 28]}],
              'GET /v2/models/mnist/versions/1: unbatched shape [1,1,28,28]', b[:300])
        for path in ('/v2/models/cls/ready', '/v2/models/cls/versions/1/ready', '/v2/models/mnist/ready'):
            st, h, b = s.req('GET', path)
            check(st == 200, f'GET {path} 200 ({st})')
        for path, mbs in (('/v2/models/cls/config', 32), ('/v2/models/cls/versions/1/config', 32),
                          ('/v2/models/mnist/config', 0)):
            st, h, b = s.req('GET', path)
            c = json.loads(b) if st == 200 else {}
            check(st == 200 and c.get('max_batch_size') == mbs and c.get('name') == path.split('/')[3],
                  f'GET {path}: name and max_batch_size {mbs}', b[:300])

        # infer: JSON and binary, with and without versions/1, against `toplu run`
        rng = np.random.default_rng(5)
        x = rng.uniform(-1, 1, size=(2, 3, 48, 192)).astype(np.float32)
        ref = reference(x, CLS, 'x', 'softmax_0.tmp_0')
        st, h, b = infer_json(s, 'cls', {'id': 'e1', 'inputs': [{'name': 'x', 'shape': [2, 3, 48, 192],
                                                                  'datatype': 'FP32', 'data': x.reshape(-1).tolist()}]})
        r = json.loads(b) if st == 200 else {}
        out = r.get('outputs', [{}])[0]
        y = np.array(out.get('data', []), dtype=np.float32)
        check(st == 200 and r.get('id') == 'e1' and r.get('model_name') == 'cls' and r.get('model_version') == '1' and
              out.get('name') == 'softmax_0.tmp_0' and out.get('shape') == [2, 2] and out.get('datatype') == 'FP32',
              'POST /v2/models/cls/infer (JSON): id, model, output name, shape, datatype', b[:300])
        check(y.size == 4 and float(np.max(np.abs(y.reshape(2, 2) - ref))) <= 1e-4,
              'POST /v2/models/cls/infer (JSON): the values of toplu run', f'{y} vs {ref.reshape(-1)}')
        body, hh = binary_body({'inputs': [{'name': 'x', 'shape': [2, 3, 48, 192], 'datatype': 'FP32',
                                             'parameters': {'binary_data_size': x.nbytes}}],
                                 'parameters': {'binary_data_output': True}}, x.tobytes())
        st, h, b = s.req('POST', '/v2/models/cls/versions/1/infer', body, hh)
        ok = st == 200 and 'inference-header-content-length' in h
        if check(ok, 'POST /v2/models/cls/versions/1/infer (binary): 200 with Inference-Header-Content-Length',
                 f'{st} {h} {b[:200]!r}'):
            j, tail = split_response(h, b)
            o = j['outputs'][0]
            check(o.get('parameters', {}).get('binary_data_size') == 16 and len(tail) == 16 and 'data' not in o,
                  'binary output: binary_data_size 16, 16 bytes after the header', str(o))
            yb = np.frombuffer(tail, dtype='<f4').reshape(2, 2)
            check(float(np.max(np.abs(yb - ref))) <= 1e-4, 'binary output: the values of toplu run')
            check(h.get('content-type') == 'application/octet-stream', 'binary response Content-Type octet-stream',
                  h.get('content-type'))
        xm = rng.uniform(0, 1, size=(1, 1, 28, 28)).astype(np.float32)
        refm = reference(xm, MNIST, 'Input3', 'Plus214_Output_0')
        for ver in (None, '1'):
            st, h, b = infer_json(s, 'mnist', {'inputs': [{'name': 'Input3', 'shape': [1, 1, 28, 28], 'datatype': 'FP32',
                                                           'data': xm.reshape(1, 1, 28, 28).tolist()}]}, ver)
            r = json.loads(b) if st == 200 else {}
            o = r.get('outputs', [{}])[0]
            y = np.array(o.get('data', []), dtype=np.float32)
            check(st == 200 and 'id' not in r and o.get('shape') == [1, 10] and y.size == 10 and
                  float(np.max(np.abs(y - refm.reshape(-1)))) <= 1e-3,
                  f'POST mnist infer (nested JSON, version {ver}): [1,10], the values of toplu run', b[:300])

        # statistics
        st, h, b = s.req('GET', '/v2/models/cls/stats')
        j = json.loads(b) if st == 200 else {}
        ms = j.get('model_stats', [])
        check(st == 200 and len(ms) == 1 and ms[0].get('name') == 'cls' and ms[0].get('version') == '1',
              'GET /v2/models/cls/stats: one model_stats entry for cls version 1', b[:300])
        if ms:
            succ = ms[0].get('inference_stats', {}).get('success', {}).get('count')
            check(succ == 2 and ms[0].get('inference_count') == 4,
                  'cls stats: 2 successful requests, inference_count 4 rows', json.dumps(ms[0])[:400])
        st, h, b = s.req('GET', '/v2/models/cls/versions/1/stats')
        check(st == 200 and len(json.loads(b).get('model_stats', [])) == 1, 'GET /v2/models/cls/versions/1/stats', b[:200])
        st, h, b = s.req('GET', '/v2/models/stats')
        names = sorted(e.get('name') for e in json.loads(b).get('model_stats', [])) if st == 200 else []
        check(st == 200 and 'cls' in names and 'mnist' in names and 'identity_int64' in names and len(names) == 18,
              f'GET /v2/models/stats: all 18 models ({len(names)})', str(names))

        # repository
        st, h, b = s.req('POST', '/v2/repository/index', b'{}', {'Content-Type': 'application/json'})
        idx = json.loads(b) if st == 200 else []
        ent = {e.get('name'): e for e in idx} if isinstance(idx, list) else {}
        check(st == 200 and len(ent) == 18 and ent.get('cls', {}).get('state') == 'READY' and
              ent.get('cls', {}).get('version') == '1', 'POST /v2/repository/index: 18 models, cls READY', b[:300])
        st, h, b = s.req('POST', '/v2/repository/index')
        check(st == 200, f'POST /v2/repository/index without a body ({st})')
        st, h, b = s.req('POST', '/v2/repository/models/identity_int8/unload', b'{}', {'Content-Type': 'application/json'})
        check(st == 200, f'POST .../identity_int8/unload 200 ({st})', b[:200])
        st, h, b = s.req('GET', '/v2/models/identity_int8/ready')
        check(st in (404, 503) and st != 200, f'identity_int8 not ready after unload ({st})')
        expect_error(s, 'infer on an unloaded model', 404,
                     infer_json(s, 'identity_int8', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'INT8',
                                                                 'data': [1, 2, 3]}]}), 'identity_int8')
        st, h, b = s.req('POST', '/v2/repository/index')
        ent = {e.get('name'): e for e in json.loads(b)} if st == 200 else {}
        check(ent.get('identity_int8', {}).get('state') not in (None, 'READY'),
              'the index shows identity_int8 not READY after unload', str(ent.get('identity_int8')))
        st, h, b = s.req('POST', '/v2/repository/models/identity_int8/load')
        check(st == 200, f'POST .../identity_int8/load 200 ({st})', b[:200])
        st, h, b = s.req('GET', '/v2/models/identity_int8/ready')
        check(st == 200, f'identity_int8 ready after load ({st})')
        st, h, b = infer_json(s, 'identity_int8', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'INT8',
                                                                'data': [1, -2, 3]}]})
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [1, -2, 3], 'infer after reload', b[:200])
        expect_error(s, 'load of an unknown model', 404, s.req('POST', '/v2/repository/models/nosuch/load'), 'nosuch')
        # Triton: "unloading a model that is not loaded has no effect and success code will be returned"
        st, _, b = s.req('POST', '/v2/repository/models/nosuch/unload')
        check(st == 200, f'unload of an unknown model: 200, as Triton answers ({st})', b[:200])

        # metrics
        st, h, b = s.req('GET', '/metrics')
        text = b.decode(errors='replace')
        line = [ln for ln in text.splitlines() if ln.startswith('nv_inference_request_success{') and 'model="cls"' in ln]
        check(st == 200 and 'text/plain' in h.get('content-type', '') and line and float(line[0].rsplit(' ', 1)[1]) == 2,
              'GET /metrics: text/plain, nv_inference_request_success for cls is 2', str(line))

        # wrong methods, unknown paths, unknown models and versions
        for method, path in (('POST', '/v2/health/live'), ('POST', '/v2/health/ready'), ('PUT', '/v2'),
                             ('DELETE', '/v2/models/cls'), ('POST', '/v2/models/cls/ready'),
                             ('POST', '/v2/models/cls/config'), ('POST', '/v2/models/cls/stats'),
                             ('POST', '/v2/models/stats'), ('GET', '/v2/models/cls/infer'),
                             ('GET', '/v2/models/cls/versions/1/infer'), ('PUT', '/v2/models/cls/infer'),
                             ('GET', '/v2/repository/index'), ('GET', '/v2/repository/models/cls/load'),
                             ('POST', '/metrics')):
            allowed = 'POST' if path.endswith('/infer') or '/repository/' in path else 'GET'
            resp = s.req(method, path)
            expect_error(s, f'{method} {path}', 405, resp, f'use {allowed}')
            # RFC 9110 15.5.6: a 405 response MUST carry an Allow header naming the methods the target takes
            check(allowed in resp[1].get('allow', ''), f'{method} {path}: 405 with an Allow header',
                  str(resp[1]))
        for method, path in (('GET', '/'), ('GET', '/v3'), ('GET', '/v2/nothing'), ('GET', '/v2/health/dead'),
                             ('GET', '/v2/models/cls/bogus'), ('GET', '/v2/models/cls/versions/1/bogus'),
                             ('GET', '/v2/models/cls/versions'), ('GET', '/v2/models/cls/ready/more'),
                             ('POST', '/v2/repository/bogus'), ('POST', '/v2/repository/models/cls/reload'),
                             ('GET', '/metrics/x'), ('GET', '/v2/models/' + 'n' * 600)):
            expect_error(s, f'{method} {path[:60]}', 404, s.req(method, path), 'no such endpoint')
        expect_error(s, 'GET /v2/models/nosuch', 404, s.req('GET', '/v2/models/nosuch'), "'nosuch'")
        expect_error(s, 'GET /v2/models/nosuch/ready', 404, s.req('GET', '/v2/models/nosuch/ready'), "'nosuch'")
        expect_error(s, 'GET /v2/models/nosuch/stats', 404, s.req('GET', '/v2/models/nosuch/stats'), "'nosuch'")
        expect_error(s, 'POST /v2/models/nosuch/infer', 404,
                     infer_json(s, 'nosuch', {'inputs': []}), "'nosuch'")
        for path in ('/v2/models/cls/versions/7', '/v2/models/cls/versions/7/ready', '/v2/models/cls/versions/7/config',
                     '/v2/models/cls/versions/7/stats'):
            expect_error(s, f'GET {path}', 404, s.req('GET', path), '7')
        expect_error(s, 'POST /v2/models/cls/versions/7/infer', 404,
                     infer_json(s, 'cls', {'inputs': []}, version='7'), "version '7'")
    finally:
        s.finish()


# ---------------------------------------------------------------- datatypes

# six values per datatype (shape [2,3]) at the extremes; FP values as doubles the server rounds
VALUES = {
    'BOOL': [True, False, True, False, False, True],
    'UINT8': [0, 255, 1, 128, 7, 254],
    'UINT16': [0, 65535, 1, 32768, 7, 65534],
    'UINT32': [0, 4294967295, 1, 2147483648, 7, 4294967294],
    'UINT64': [0, 18446744073709551615, 1, 9223372036854775808, 9223372036854775807, 18446744073709551614],
    'INT8': [-128, 127, 0, -1, 1, 7],
    'INT16': [-32768, 32767, 0, -1, 1, 7],
    'INT32': [-2147483648, 2147483647, 0, -1, 1, 7],
    'INT64': [-9223372036854775808, 9223372036854775807, 0, -1, 9007199254740993, -9007199254740993],
    # 0.1 rounds; 2049 and 2051 are ties (to even: 2048, 2052); 1 + 2^-11 + 2^-40 is just above a tie
    # (1 + 2^-10; via float it would double-round to 1.0); 65504 the largest half; -0; the smallest subnormal
    'FP16': [0.1, 2049.0, 2051.0, 1.0004882812500009, 65504.0, -0.0],
    'FP32': [0.1, 3.4028234663852886e38, -0.0, 1.401298464324817e-45, 16777217.0, -1.5],
    'FP64': [0.1, 1.7976931348623157e308, -0.0, 5e-324, 9007199254740993.0, -2.5],
}


def expected_array(dt):
    npdt = DTYPES[dt][1]
    return np.array(VALUES[dt], dtype=npdt).reshape(2, 3)


def json_data_of(dt):
    vals = list(VALUES[dt])
    if dt == 'FP64':
        vals[4] = 9007199254740993  # an integer literal beyond 2^53 for an FP64 input: rounds to ...992
    return vals


def output_array(o, dt):
    return from_json_values(o.get('data', []), DTYPES[dt][1]).reshape(o.get('shape', [-1]))


def case_datatypes():
    s = Server()
    try:
        for dt, (suffix, npdt) in DTYPES.items():
            model = f'identity_{suffix}'
            want = expected_array(dt)
            le = want.astype(want.dtype.newbyteorder('<'))
            flat = json_data_of(dt)
            nested = [flat[0:3], flat[3:6]]
            for how, data in (('flat', flat), ('nested', nested)):
                st, h, b = infer_json(s, model, {'id': f'{dt}-{how}', 'inputs': [{'name': 'x', 'shape': [2, 3],
                                                                                  'datatype': dt, 'data': data}]})
                r = json.loads(b) if st == 200 else {}
                o = (r.get('outputs') or [{}])[0]
                check(st == 200 and r.get('id') == f'{dt}-{how}' and r.get('model_name') == model and
                      r.get('model_version') == '1' and o.get('name') == 'y' and o.get('datatype') == dt and
                      o.get('shape') == [2, 3], f'{dt} JSON {how}: 200, id echoed, y {dt} [2,3]', b[:300])
                if st == 200:
                    got = output_array(o, dt)
                    check(same_bits(got, want), f'{dt} JSON {how}: exact values', f'{got.reshape(-1)} vs {want.reshape(-1)}')
                    if dt in ('FP16', 'FP32', 'FP64'):
                        check(isinstance(o['data'][VALUES[dt].index(-0.0)], float) and
                              math.copysign(1, o['data'][VALUES[dt].index(-0.0)]) < 0,
                              f'{dt}: negative zero comes back as -0', str(o['data']))
            # binary in, JSON out
            body, hh = binary_body({'inputs': [{'name': 'x', 'shape': [2, 3], 'datatype': dt,
                                                'parameters': {'binary_data_size': le.nbytes}}]}, le.tobytes())
            st, h, b = s.req('POST', f'/v2/models/{model}/infer', body, hh)
            r = json.loads(b) if st == 200 else {}
            o = (r.get('outputs') or [{}])[0]
            check(st == 200 and 'inference-header-content-length' not in h and same_bits(output_array(o, dt), want),
                  f'{dt} binary in, JSON out: exact values', b[:300])
            # JSON in, binary out (binary_data_output)
            st, h, b = infer_json(s, model, {'inputs': [{'name': 'x', 'shape': [2, 3], 'datatype': dt, 'data': flat}],
                                             'parameters': {'binary_data_output': True}})
            if check(st == 200 and 'inference-header-content-length' in h, f'{dt} JSON in, binary out: 200 + header',
                     f'{st} {b[:200]!r}'):
                j, tail = split_response(h, b)
                o = j['outputs'][0]
                check(o.get('parameters', {}).get('binary_data_size') == le.nbytes and tail == le.tobytes() and
                      'data' not in o and o.get('datatype') == dt and o.get('shape') == [2, 3],
                      f'{dt} JSON in, binary out: the exact little-endian bytes', f'{o} {tail!r}')
            # binary in, binary out (per-output binary_data)
            body, hh = binary_body({'inputs': [{'name': 'x', 'shape': [2, 3], 'datatype': dt,
                                                'parameters': {'binary_data_size': le.nbytes}}],
                                    'outputs': [{'name': 'y', 'parameters': {'binary_data': True}}]}, le.tobytes())
            st, h, b = s.req('POST', f'/v2/models/{model}/versions/1/infer', body, hh)
            if check(st == 200 and 'inference-header-content-length' in h, f'{dt} binary in, binary out: 200 + header',
                     f'{st} {b[:200]!r}'):
                j, tail = split_response(h, b)
                check(tail == le.tobytes(), f'{dt} binary in, binary out: the same bytes')
            # batch of 8 (max_batch_size), nested, one row at a time the same as the rows
            rows = np.resize(want.reshape(-1), 24).reshape(8, 3)
            st, h, b = infer_json(s, model, {'inputs': [{'name': 'x', 'shape': [8, 3], 'datatype': dt,
                                                         'data': [to_json_values(r_) for r_ in rows]}]})
            o = (json.loads(b).get('outputs') or [{}])[0] if st == 200 else {}
            check(st == 200 and o.get('shape') == [8, 3] and same_bits(output_array(o, dt), rows),
                  f'{dt}: a batch of 8 rows (max_batch_size) comes back exact', b[:200])

        # the id is echoed exactly, whatever characters it holds
        for rid in ('', 'a"b\\c', 'line\nbreak\ttab\u0001', 'ünïcødé ✓ 𝄞', 'x' * 5000):
            st, h, b = infer_json(s, 'identity_int8', {'id': rid, 'inputs': [{'name': 'x', 'shape': [1, 3],
                                                                               'datatype': 'INT8', 'data': [1, 2, 3]}]})
            check(st == 200 and json.loads(b).get('id') == rid and b.startswith(b'{"id":'),
                  f'id {rid[:20]!r} echoed exactly, first', b[:120])

        # integers: integral reals are taken, fractions and out-of-range values refused, naming the element
        st, h, b = infer_json(s, 'identity_int32', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'INT32',
                                                                 'data': [7.0, -3e3, 0.0]}]})
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [7, -3000, 0], 'INT32 takes 7.0 and -3e3', b[:200])
        for dt, bad in (('UINT8', 256), ('UINT8', -1), ('INT8', 128), ('INT8', -129), ('UINT16', 65536),
                        ('INT16', -32769), ('UINT32', 4294967296), ('INT32', 2147483648),
                        ('INT64', 9223372036854775808), ('INT64', -9223372036854775809),
                        ('UINT64', 18446744073709551616), ('UINT64', -1), ('INT32', 2.5)):
            suffix = DTYPES[dt][0]
            expect_error(s, f'{dt} value {bad}', 400,
                         infer_json(s, f'identity_{suffix}', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': dt,
                                                                          'data': [1, bad, 2]}]}),
                         "inputs[0] ('x').data", 'element 1', dt)
        for dt, bad in (('FP16', 65520.0), ('FP32', 1e39), ('FP16', 'nan'), ('FP32', True), ('BOOL', 1), ('BOOL', 'true')):
            suffix = DTYPES[dt][0]
            expect_error(s, f'{dt} value {bad!r}', 400,
                         infer_json(s, f'identity_{suffix}', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': dt,
                                                                          'data': [bad, bad, bad] if dt == 'BOOL' else [0, bad, 1]}]}),
                         "inputs[0] ('x').data", 'element')
        # NaN and the infinities, which JSON lacks, as strings both ways; binary keeps the NaN payload class
        for dt in ('FP16', 'FP32', 'FP64'):
            suffix, npdt = DTYPES[dt]
            st, h, b = infer_json(s, f'identity_{suffix}', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': dt,
                                                                         'data': ['NaN', 'Infinity', '-Infinity']}]})
            check(st == 200 and json.loads(b)['outputs'][0]['data'] == ['NaN', 'Infinity', '-Infinity'],
                  f'{dt}: "NaN", "Infinity", "-Infinity" round trip', b[:200])
        # without allow_nonfinite, NaN and Inf inputs are refused (a ReLU fused into a convolution turns NaN into 0:
        # the PaddleOCR classifier answered a NaN image with finite probabilities), JSON and binary alike
        img = np.random.default_rng(3).random((1, 3, 48, 192), dtype=np.float32)
        for bad, word, where in ((np.nan, 'NaN', 5), (np.inf, 'infinite', 7), (-np.inf, 'infinite', 0)):
            x = img.copy()
            x.reshape(-1)[where] = bad
            expect_error(s, f'cls: a {word} input element (JSON)', 400,
                         infer_json(s, 'cls', {'inputs': [{'name': 'x', 'shape': [1, 3, 48, 192], 'datatype': 'FP32',
                                                           'data': to_json_values(x.reshape(-1))}]}),
                         "inputs ('x').data", f'element {where} is {word}', 'allow_nonfinite')
            body, hh = binary_body({'inputs': [{'name': 'x', 'shape': [1, 3, 48, 192], 'datatype': 'FP32',
                                                'parameters': {'binary_data_size': x.nbytes}}]}, x.tobytes())
            expect_error(s, f'cls: a {word} input element (binary)', 400,
                         s.req('POST', '/v2/models/cls/infer', body, hh), f'element {where} is {word}')
        st, h, b = infer_json(s, 'cls', {'inputs': [{'name': 'x', 'shape': [1, 3, 48, 192], 'datatype': 'FP32',
                                                     'data': img.reshape(-1).tolist()}]})
        check(st == 200, 'cls: the same image without the NaN is answered', b[:200])
        # binary BOOL bytes must be 0 or 1
        body, hh = binary_body({'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'BOOL',
                                            'parameters': {'binary_data_size': 3}}]}, b'\x01\x02\x00')
        expect_error(s, 'binary BOOL byte 2', 400, s.req('POST', '/v2/models/identity_bool/infer', body, hh),
                     "inputs[0] ('x')", 'BOOL element 1')

        # requested outputs on the two-input model
        a = np.array([[1.5, -2.25, 3.0]], dtype=np.float32)
        bb = np.array([[-9223372036854775808, 9223372036854775807]], dtype=np.int64)
        two_in = [{'name': 'a', 'shape': [1, 3], 'datatype': 'FP32', 'data': a.reshape(-1).tolist()},
                  {'name': 'b', 'shape': [1, 2], 'datatype': 'INT64', 'data': bb.reshape(-1).tolist()}]
        st, h, b = infer_json(s, 'two', {'id': 'sub', 'inputs': two_in})
        outs = json.loads(b).get('outputs', []) if st == 200 else []
        check([o.get('name') for o in outs] == ['ya', 'yb'] and outs[1].get('data') == bb.reshape(-1).tolist(),
              'two: no outputs named -> both, in model order', b[:300])
        st, h, b = infer_json(s, 'two', {'inputs': two_in[::-1], 'outputs': [{'name': 'yb'}]})
        outs = json.loads(b).get('outputs', []) if st == 200 else []
        check(st == 200 and [o.get('name') for o in outs] == ['yb'] and outs[0].get('data') == bb.reshape(-1).tolist(),
              'two: inputs in any order, outputs [yb] -> yb only', b[:300])
        st, h, b = infer_json(s, 'two', {'inputs': two_in, 'outputs': [{'name': 'yb', 'parameters': {'binary_data': True}},
                                                                      {'name': 'ya'}]})
        if check(st == 200 and 'inference-header-content-length' in h, 'two: yb binary, ya JSON -> a binary part',
                 f'{st} {b[:200]!r}'):
            j, tail = split_response(h, b)
            outs = j['outputs']
            check([o['name'] for o in outs] == ['yb', 'ya'] and outs[0]['parameters']['binary_data_size'] == 16 and
                  tail == bb.astype('<i8').tobytes() and outs[1]['data'] == a.reshape(-1).tolist(),
                  'two: outputs in request order, yb as 16 bytes, ya as JSON', json.dumps(j)[:300])
        st, h, b = infer_json(s, 'two', {'inputs': two_in, 'parameters': {'binary_data_output': True},
                                         'outputs': [{'name': 'ya', 'parameters': {'binary_data': False}}, {'name': 'yb'}]})
        if check(st == 200 and 'inference-header-content-length' in h, 'two: binary_data_output with ya binary_data false',
                 f'{st} {b[:200]!r}'):
            j, tail = split_response(h, b)
            outs = j['outputs']
            check('data' in outs[0] and outs[1].get('parameters', {}).get('binary_data_size') == 16 and
                  tail == bb.astype('<i8').tobytes(), 'two: ya JSON, yb binary (per-output overrides the request)',
                  json.dumps(j)[:300])
        # mixed binary and JSON inputs: binary data follows the header in input order
        body, hh = binary_body({'inputs': [{'name': 'b', 'shape': [1, 2], 'datatype': 'INT64',
                                            'parameters': {'binary_data_size': 16}},
                                           {'name': 'a', 'shape': [1, 3], 'datatype': 'FP32', 'data': a.reshape(-1).tolist()}]},
                               bb.astype('<i8').tobytes())
        st, h, b = s.req('POST', '/v2/models/two/infer', body, hh)
        outs = json.loads(b).get('outputs', []) if st == 200 else []
        check(st == 200 and outs and outs[1].get('data') == bb.reshape(-1).tolist() and
              outs[0].get('data') == a.reshape(-1).tolist(), 'two: b binary + a JSON in one request', b[:300])
        expect_error(s, 'an unknown requested output', 400,
                     infer_json(s, 'two', {'inputs': two_in, 'outputs': [{'name': 'zz'}]}), 'outputs[0]', "'zz'", "'ya'")
        expect_error(s, 'an output requested twice', 400,
                     infer_json(s, 'two', {'inputs': two_in, 'outputs': [{'name': 'ya'}, {'name': 'ya'}]}),
                     'outputs[1]', 'twice')
        expect_error(s, 'outputs[0].parameters.binary_data not a bool', 400,
                     infer_json(s, 'two', {'inputs': two_in, 'outputs': [{'name': 'ya', 'parameters': {'binary_data': 1}}]}),
                     'outputs[0]', 'binary_data')
        expect_error(s, 'a classification output', 400,
                     infer_json(s, 'two', {'inputs': two_in, 'outputs': [{'name': 'ya', 'parameters': {'classification': 2}}]}),
                     'outputs[0]', 'classification')
        # rows that disagree between inputs
        expect_error(s, 'inputs with different batch rows', 400,
                     infer_json(s, 'two', {'inputs': [two_in[0], {'name': 'b', 'shape': [2, 2], 'datatype': 'INT64',
                                                                   'data': [1, 2, 3, 4]}]}), 'inputs[1].shape[0]', 'rows')
    finally:
        s.finish()


# ---------------------------------------------------------------- BYTES

def bytes_elems(*items):
    return b''.join(struct.pack('<I', len(x)) + x for x in items)


def case_bytes():
    s = Server()
    try:
        expect_error(s, 'BYTES (JSON strings) into a UINT8 input', 400,
                     infer_json(s, 'identity_uint8', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'BYTES',
                                                                  'data': ['a', 'bc', '']}]}),
                     "inputs[0] ('x')", 'BYTES', 'UINT8')
        expect_error(s, 'BYTES JSON with a number among the strings', 400,
                     infer_json(s, 'identity_uint8', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'BYTES',
                                                                  'data': ['a', 5, '']}]}),
                     "inputs[0] ('x').data", 'BYTES')
        expect_error(s, 'BYTES JSON with 2 strings for 3 elements', 400,
                     infer_json(s, 'identity_uint8', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'BYTES',
                                                                  'data': ['a', 'b']}]}),
                     "inputs[0] ('x').data", '2 values')

        def send(tail, size=None, shape=(1, 3)):
            body, hh = binary_body({'inputs': [{'name': 'x', 'shape': list(shape), 'datatype': 'BYTES',
                                                'parameters': {'binary_data_size': len(tail) if size is None else size}}]},
                                   tail)
            return s.req('POST', '/v2/models/identity_uint8/infer', body, hh)

        expect_error(s, 'binary BYTES, well formed, into a UINT8 input', 400, send(bytes_elems(b'a', b'bc', b'')),
                     "inputs[0] ('x')", 'BYTES does not match', 'UINT8')
        expect_error(s, 'binary BYTES length prefix overruns binary_data_size', 400,
                     send(bytes_elems(b'a') + struct.pack('<I', 1000) + b'xyz'),
                     "inputs[0] ('x')", 'BYTES element 1', 'length 1000', 'binary_data_size')
        expect_error(s, 'binary BYTES length prefix 0xFFFFFFFF', 400, send(struct.pack('<I', 0xFFFFFFFF) + b'abcd'),
                     "inputs[0] ('x')", 'BYTES element 0', 'binary_data_size')
        expect_error(s, 'binary BYTES length prefix cut short', 400, send(bytes_elems(b'a', b'b') + b'\x01\x00'),
                     "inputs[0] ('x')", 'BYTES element 2', '4-byte length', 'binary_data_size')
        expect_error(s, 'binary BYTES: 2 elements for shape [1,3]', 400, send(bytes_elems(b'a', b'b')),
                     "inputs[0] ('x')", '2 BYTES elements', '[1, 3]')
        expect_error(s, 'binary BYTES: 4 elements for shape [1,3]', 400, send(bytes_elems(b'a', b'b', b'c', b'd')),
                     "inputs[0] ('x')", '4 BYTES elements')
        expect_error(s, 'binary BYTES binary_data_size beyond the tail', 400, send(bytes_elems(b'a', b'b', b'c'), size=4096),
                     "inputs[0] ('x').parameters.binary_data_size", 'run past')
        expect_error(s, 'binary BYTES of shape 2^40 with a 12-byte tail', 400,
                     send(bytes_elems(b'a', b'b', b'c'), shape=(1, 1099511627776)), 'inputs[0].shape[1]')
    finally:
        s.finish()


# ---------------------------------------------------------------- malformed input

# the direction classifier's x is [N, 3, H, W] with H and W symbolic: a shape of about 2^40 elements
BIG_CLS = [16, 3, 131072, 174762]
BIG_CLS_NUMEL = 16 * 3 * 131072 * 174762  # 1099507433472 = 2^40 - 4194304


def fp32_in(shape, data=None, **extra):
    d = {'name': 'x', 'shape': shape, 'datatype': 'FP32'}
    if data is not None:
        d['data'] = data
    d.update(extra)
    return d


def case_malformed():
    s = Server()
    idp = '/v2/models/identity_float32/infer'
    H = {'Content-Type': 'application/json'}
    try:
        # sanity: the well-formed request these break
        st, h, b = infer_json(s, 'identity_float32', {'inputs': [fp32_in([1, 3], [1, 2, 3])]})
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [1, 2, 3], 'the well-formed request is 200', b[:200])

        # bad JSON
        expect_error(s, 'truncated JSON', 400, s.req('POST', idp, b'{"inputs": [', H), 'invalid JSON', 'line 1')
        expect_error(s, 'empty body', 400, s.req('POST', idp, b'', H), 'invalid JSON')
        expect_error(s, 'trailing garbage after the object', 400, s.req('POST', idp, b'{"inputs": []} xyz', H), 'invalid JSON')
        expect_error(s, 'binary garbage', 400, s.req('POST', idp, bytes(range(256)) * 4, H), 'invalid JSON')
        expect_error(s, 'invalid UTF-8 in a string', 400, s.req('POST', idp, b'{"id": "\xff\xfe", "inputs": []}', H),
                     'invalid JSON')
        expect_error(s, 'duplicate keys', 400, s.req('POST', idp, b'{"inputs": [], "inputs": []}', H), 'invalid JSON')
        expect_error(s, 'a JSON array body', 400, s.req('POST', idp, b'[1, 2]', H), 'an array', 'not a JSON object')
        expect_error(s, 'deeply nested JSON', 400, s.req('POST', idp, b'[' * 100000 + b']' * 100000, H), 'JSON')

        def bad(what, obj, *names, model='identity_float32'):
            expect_error(s, what, 400, infer_json(s, model, obj), *names)

        bad('inputs missing', {}, 'inputs: missing')
        bad('inputs not an array', {'inputs': {'x': 1}}, 'inputs: expected an array')
        bad('an input that is not an object', {'inputs': [5]}, 'inputs[0]: expected an object')
        bad('input name missing', {'inputs': [{'shape': [1, 3], 'datatype': 'FP32', 'data': [1, 2, 3]}]}, 'inputs[0].name')
        bad('id not a string', {'id': 5, 'inputs': [fp32_in([1, 3], [1, 2, 3])]}, 'id:')
        bad('parameters not an object', {'parameters': [], 'inputs': [fp32_in([1, 3], [1, 2, 3])]}, 'parameters:')
        bad('binary_data_output not a bool', {'parameters': {'binary_data_output': 'yes'},
                                             'inputs': [fp32_in([1, 3], [1, 2, 3])]}, 'parameters.binary_data_output')
        bad('priority negative', {'parameters': {'priority': -1}, 'inputs': [fp32_in([1, 3], [1, 2, 3])]},
            'parameters.priority')
        bad('timeout beyond int64', {'parameters': {'timeout': 99999999999999999999},
                                    'inputs': [fp32_in([1, 3], [1, 2, 3])]}, 'parameters.timeout', 'beyond int64')
        # shapes
        bad('shape missing', {'inputs': [fp32_in(None, [1, 2, 3])]}, 'inputs[0].shape')
        bad('shape not an array', {'inputs': [fp32_in('1,3', [1, 2, 3])]}, 'inputs[0].shape', 'expected an array')
        bad('shape with a negative dim', {'inputs': [fp32_in([-1, 3], [1, 2, 3])]}, 'inputs[0].shape[0]', '-1')
        bad('shape with a negative non-batch dim', {'inputs': [fp32_in([1, -3], [1, 2, 3])]}, 'inputs[0].shape[1]', '-3')
        bad('shape with an absurd dim', {'inputs': [fp32_in([1, 1000000000000], [1, 2, 3])]}, 'inputs[0].shape[1]',
            '1000000000000')
        bad('shape with a dim beyond int64', {'inputs': [fp32_in([1, 99999999999999999999], [1, 2, 3])]},
            'inputs[0].shape[1]', 'beyond int64')
        bad('shape with a string dim', {'inputs': [fp32_in([1, '3'], [1, 2, 3])]}, 'inputs[0].shape[1]', 'a string')
        bad('shape with a fractional dim', {'inputs': [fp32_in([1, 3.5], [1, 2, 3])]}, 'inputs[0].shape[1]')
        bad('shape whose product overflows int64', {'inputs': [{'name': 'x', 'shape': [32, 2147483647, 2147483647, 2147483647],
                                                               'datatype': 'FP32', 'data': [1]}]},
            'inputs[0].shape', 'elements', model='cls')
        bad('shape of ~2^40 elements with 3 values', {'inputs': [fp32_in(BIG_CLS, [1, 2, 3])]},
            "inputs[0] ('x').data", '3 values', model='cls')
        bad('shape of 2^40 + 2^20 elements', {'inputs': [fp32_in([16, 3, 131072, 174763], [1, 2, 3])]},
            'inputs[0].shape', 'elements', model='cls')
        st, h, b = infer_json(s, 'identity_nb', {'inputs': [fp32_in([20, 3], list(range(60)))]})
        check(st == 200 and json.loads(b)['outputs'][0]['shape'] == [20, 3],
              'unbatched identity_nb: dim 0 of 20 (symbolic, no max_batch_size) is taken', b[:200])
        bad('shape of rank 1 for a rank-2 input', {'inputs': [fp32_in([3], [1, 2, 3])]}, 'inputs[0].shape', 'rank')
        bad('shape of rank 9', {'inputs': [fp32_in([1] * 9, [1])]}, 'inputs[0].shape', '9 dims')
        bad('a scalar for a batched model', {'inputs': [fp32_in([], [1])]}, 'inputs[0].shape')
        bad('batch 0', {'inputs': [fp32_in([0, 3], [])]}, 'inputs[0].shape[0]', 'max_batch_size')
        bad('batch 9 over max_batch_size 8', {'inputs': [fp32_in([9, 3], [0] * 27)]}, 'inputs[0].shape[0]', 'max_batch_size')
        bad('a fixed dim that differs', {'inputs': [fp32_in([1, 4], [1, 2, 3, 4])]}, 'inputs[0].shape[1]')
        bad('cls: a fixed dim that differs', {'inputs': [{'name': 'x', 'shape': [1, 4, 48, 192], 'datatype': 'FP32',
                                                         'data': [0] * 36864}]}, 'inputs[0].shape[1]', model='cls')
        bad('mnist: batch 2 where the model is [1,1,28,28]', {'inputs': [{'name': 'Input3', 'shape': [2, 1, 28, 28],
                                                                         'datatype': 'FP32', 'data': [0] * 1568}]},
            'inputs[0].shape[0]', model='mnist')
        # element counts against the shape (JSON)
        bad('JSON: 4 values for shape [1,3]', {'inputs': [fp32_in([1, 3], [1, 2, 3, 4])]}, "inputs[0] ('x').data", '4 values')
        bad('JSON: 2 values for shape [1,3]', {'inputs': [fp32_in([1, 3], [1, 2])]}, "inputs[0] ('x').data", '2 values')
        bad('JSON: no values for shape [1,3]', {'inputs': [fp32_in([1, 3], [])]}, "inputs[0] ('x').data", '0 values')
        bad('JSON nested: a short row', {'inputs': [fp32_in([2, 3], [[1, 2, 3], [4, 5]])]}, "inputs[0] ('x').data[1]",
            '2 values')
        bad('JSON nested: a long row', {'inputs': [fp32_in([2, 3], [[1, 2, 3], [4, 5, 6, 7]])]}, "inputs[0] ('x').data[1]",
            '4 values')
        bad('JSON nested: 3 rows for 2', {'inputs': [fp32_in([2, 3], [[1, 2, 3], [4, 5, 6], [7, 8, 9]])]},
            "inputs[0] ('x').data", '3 values')
        bad('JSON nested: too deep, 7 values', {'inputs': [fp32_in([2, 3], [[[1], [2], [3]], [[4], [5], [6, 7]]])]},
            "inputs[0] ('x').data", '7 values (nested arrays, flattened)')
        bad('JSON nested: too shallow (a number among rows)', {'inputs': [fp32_in([2, 3], [[1, 2, 3], 4])]},
            "inputs[0] ('x').data[1]", 'an integer')
        bad('JSON nested: one level for rank 2 with 5 values', {'inputs': [fp32_in([2, 3], [[1, 2, 3, 4, 5]])]},
            "inputs[0] ('x').data", '1 values')
        bad('data not an array', {'inputs': [fp32_in([1, 3], 'abc')]}, "inputs[0] ('x').data", 'expected an array')
        bad('data missing', {'inputs': [fp32_in([1, 3])]}, "inputs[0] ('x').data", 'missing')
        bad('data with a null', {'inputs': [fp32_in([1, 3], [1, None, 3])]}, "inputs[0] ('x').data", 'element 1', 'null')
        bad('data with a string', {'inputs': [fp32_in([1, 3], [1, 'two', 3])]}, "inputs[0] ('x').data", 'element 1')
        # datatypes
        bad('an unknown datatype', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'FP8', 'data': [1, 2, 3]}]},
            "inputs[0] ('x').datatype", "unknown datatype 'FP8'")
        bad('a lower-case datatype', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'fp32', 'data': [1, 2, 3]}]},
            "inputs[0] ('x').datatype", "'fp32'")
        bad('datatype missing', {'inputs': [{'name': 'x', 'shape': [1, 3], 'data': [1, 2, 3]}]}, "inputs[0] ('x').datatype")
        bad('datatype not a string', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 32, 'data': [1, 2, 3]}]},
            "inputs[0] ('x').datatype")
        bad('a datatype the model does not take', {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'FP64',
                                                               'data': [1, 2, 3]}]}, "inputs[0] ('x')", 'FP64', 'FP32')
        # inputs
        bad('a duplicate input', {'inputs': [fp32_in([1, 3], [1, 2, 3]), fp32_in([1, 3], [1, 2, 3])]}, 'inputs[1]',
            'twice')
        bad('an extra input', {'inputs': [fp32_in([1, 3], [1, 2, 3]), {'name': 'z', 'shape': [1, 3], 'datatype': 'FP32',
                                                                       'data': [1, 2, 3]}]}, 'inputs[1]', "'z'", "'x'")
        bad('no inputs', {'inputs': []}, 'inputs', "'x'", 'missing')
        bad('a missing input (two)', {'inputs': [{'name': 'a', 'shape': [1, 3], 'datatype': 'FP32', 'data': [1, 2, 3]}]},
            'inputs', "'b'", 'missing', model='two')
        bad('both data and binary_data_size', {'inputs': [fp32_in([1, 3], [1, 2, 3], parameters={'binary_data_size': 12})]},
            "inputs[0] ('x')", 'both')
        bad('input parameters not an object', {'inputs': [fp32_in([1, 3], [1, 2, 3], parameters=5)]},
            "inputs[0] ('x').parameters")

        # Inference-Header-Content-Length and the binary tail
        x3 = np.array([1, 2, 3], dtype='<f4').tobytes()

        def bin_req(tail, size=12, shape=(1, 3), ihcl=None, model='identity_float32'):
            hdr = json.dumps({'inputs': [fp32_in(list(shape), parameters={'binary_data_size': size})]}).encode()
            h = {'Content-Type': 'application/octet-stream',
                 'Inference-Header-Content-Length': str(len(hdr)) if ihcl is None else ihcl}
            return s.req('POST', f'/v2/models/{model}/infer', hdr + tail, h)

        st, h, b = bin_req(x3)
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [1, 2, 3], 'the well-formed binary request is 200', b[:200])
        expect_error(s, 'Inference-Header-Content-Length beyond the body', 400, bin_req(x3, ihcl='100000'),
                     'Inference-Header-Content-Length', 'beyond')
        expect_error(s, 'Inference-Header-Content-Length 2^63-1', 400, bin_req(x3, ihcl='9223372036854775807'),
                     'Inference-Header-Content-Length', 'beyond')
        for v in ('abc', '-5', '+5', '5x', '', ' ', '0x10', '99999999999999999999', '1e3'):
            expect_error(s, f'Inference-Header-Content-Length {v!r}', 400, bin_req(x3, ihcl=v),
                         'Inference-Header-Content-Length')
        expect_error(s, 'Inference-Header-Content-Length 0 (an empty header)', 400, bin_req(x3, ihcl='0'), 'invalid JSON')
        expect_error(s, 'Inference-Header-Content-Length one byte short of the JSON', 400,
                     bin_req(x3, ihcl=str(len(json.dumps({'inputs': [fp32_in([1, 3], parameters={'binary_data_size': 12})]})) - 1)),
                     'invalid JSON header')
        expect_error(s, 'binary tail 4 bytes shorter than binary_data_size', 400, bin_req(x3[:8]),
                     "inputs[0] ('x').parameters.binary_data_size", 'run past', '8 bytes')
        expect_error(s, 'binary tail 4 bytes longer than binary_data_size', 400, bin_req(x3 + b'\0\0\0\0'),
                     'binary data', '16 bytes', '12')
        expect_error(s, 'binary: 16 bytes for shape [1,3] of FP32 (more)', 400, bin_req(x3 + b'\0\0\0\0', size=16),
                     "inputs[0] ('x').parameters.binary_data_size", '16 bytes', '[1, 3]')
        expect_error(s, 'binary: 8 bytes for shape [1,3] of FP32 (fewer)', 400, bin_req(x3[:8], size=8),
                     "inputs[0] ('x').parameters.binary_data_size", '8 bytes', '[1, 3]')
        expect_error(s, 'binary: 13 bytes, not a multiple of 4', 400, bin_req(x3 + b'\0', size=13),
                     "inputs[0] ('x').parameters.binary_data_size", '13 bytes')
        expect_error(s, 'binary_data_size negative', 400, bin_req(x3, size=-12),
                     "inputs[0] ('x').parameters.binary_data_size", 'non-negative')
        expect_error(s, 'binary_data_size a string', 400, bin_req(x3, size='12'),
                     "inputs[0] ('x').parameters.binary_data_size")
        expect_error(s, 'binary_data_size 2^62 with a 12-byte tail', 400, bin_req(x3, size=1 << 62),
                     "inputs[0] ('x').parameters.binary_data_size", 'run past')
        expect_error(s, 'binary_data_size beyond int64', 400, bin_req(x3, size=1 << 64),
                     "inputs[0] ('x').parameters.binary_data_size", 'beyond int64')
        expect_error(s, 'binary: 2^40 elements declared, binary_data_size 2^42, 12 bytes sent', 400,
                     bin_req(x3, size=BIG_CLS_NUMEL * 4, shape=BIG_CLS, model='cls'),
                     "inputs[0] ('x').parameters.binary_data_size", 'run past')
        hdr = json.dumps({'inputs': [fp32_in([1, 3], parameters={'binary_data_size': 12})]}).encode()
        expect_error(s, 'binary data without Inference-Header-Content-Length', 400,
                     s.req('POST', idp, hdr + x3, {'Content-Type': 'application/octet-stream'}), 'JSON')
        expect_error(s, 'binary_data_size with no binary part (no header)', 400, s.req('POST', idp, hdr, H),
                     "inputs[0] ('x').parameters.binary_data_size", 'Inference-Header-Content-Length')

        # Inference-Header-Content-Length equal to the body: all JSON, no binary part
        body = json.dumps({'inputs': [fp32_in([1, 3], [7, 8, 9])]}).encode()
        st, h, b = s.req('POST', idp, body, {'Inference-Header-Content-Length': str(len(body))})
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [7, 8, 9],
              'Inference-Header-Content-Length equal to the body length: 200', b[:200])
        # errors keep the connection usable: bad, good, bad, good on one keep-alive connection
        c = http.client.HTTPConnection('127.0.0.1', s.port, timeout=30)
        seq = []
        for payload in (b'{"inputs": [', body, b'[]', body, b'{"inputs": [{"name": "x"}]}', body):
            c.request('POST', idp, body=payload, headers=H)
            r = c.getresponse()
            seq.append((r.status, r.read()))
        c.close()
        check([st for st, _ in seq] == [400, 200, 400, 200, 400, 200] and
              all(b'[7,8,9]' in b for st, b in seq if st == 200),
              'one keep-alive connection: 400, 200, 400, 200, 400, 200', str([st for st, _ in seq]))

        # malformed and good requests from 8 clients at once: every answer the right one
        import threading
        mix = [(b'{"inputs": [', 400), (body, 200), (b'{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", '
                                                      b'"data": [1, 2]}]}', 400), (body, 200)]
        wrong = []

        def client(k):
            cc = http.client.HTTPConnection('127.0.0.1', s.port, timeout=60)
            try:
                for j in range(24):
                    payload, want = mix[(k + j) % len(mix)]
                    cc.request('POST', idp, body=payload, headers=H)
                    r = cc.getresponse()
                    got = r.read()
                    if r.status != want or (want == 200 and b'[7,8,9]' not in got):
                        wrong.append((r.status, want, got[:100]))
            except Exception as e:  # noqa: BLE001
                wrong.append(repr(e))
            finally:
                cc.close()

        th = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        check(not wrong, '8 clients x 24 mixed good and malformed requests: every status right', str(wrong[:3]))

        # malformed HTTP on raw sockets: whatever the answer, the server stays live
        port = s.port
        for what, data in (('a garbage request line', b'GARBAGE\r\n\r\n'),
                           ('an HTTP/9 request', b'GET /v2/health/live HTTP/9.9\r\n\r\n'),
                           ('a header without a colon', b'GET /v2 HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n'),
                           ('Content-Length not a number',
                            b'POST ' + idp.encode() + b' HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}'),
                           ('a negative Content-Length',
                            b'POST ' + idp.encode() + b' HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}'),
                           ('bad chunk sizes',
                            b'POST ' + idp.encode() + b' HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n'),
                           ('a body cut short (Content-Length 1000, 10 bytes, close)',
                            b'POST ' + idp.encode() + b' HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"inputs":'),
                           ('headers of 200 KB', b'GET /v2 HTTP/1.1\r\nHost: x\r\nX-Big: ' + b'a' * 200000 + b'\r\n\r\n'),
                           ('a URL of 100 KB', b'GET /' + b'v' * 100000 + b' HTTP/1.1\r\nHost: x\r\n\r\n'),
                           ('a NUL in the path', b'GET /v2/health\x00/live HTTP/1.1\r\nHost: x\r\n\r\n')):
            try:
                got = s.raw(data)
            except OSError as e:
                got = repr(e).encode()
            check(s.live(), f'raw HTTP, {what}: the server stays live', got[:200])
            if got.startswith(b'HTTP/1.1 2'):
                check(False, f'raw HTTP, {what}: not answered 2xx', got[:200])
        got = s.raw(b'POST ' + idp.encode() + b' HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
                    b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"inp\r\n3\r\nuts\r\n0\r\n\r\n')
        check(got.startswith(b'HTTP/1.1 400') and b'invalid JSON' in got,
              'raw HTTP, a chunked body of bad JSON: 400 invalid JSON', got[:300])
        body = json.dumps({'inputs': [fp32_in([1, 3], [4, 5, 6])]}).encode()
        got = s.raw(b'POST ' + idp.encode() + b' HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n' +
                    b''.join(b'%x\r\n%s\r\n' % (1, body[i:i + 1]) for i in range(len(body))) + b'0\r\n\r\n')
        check(got.startswith(b'HTTP/1.1 200') and b'[4,5,6]' in got.replace(b' ', b''),
              'raw HTTP, a chunked body one byte per chunk: 200', got[:300])
        # two Content-Length headers that differ: 400 and the connection closed (it was served with the first:
        # a proxy that read the other would see a different request, RFC 9112 6.3); two that agree are served
        for cls, want in (((len(body), 5), b'HTTP/1.1 400'), ((len(body), len(body)), b'HTTP/1.1 200')):
            got = s.raw(b'POST ' + idp.encode() + b' HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
                        b''.join(b'Content-Length: %d\r\n' % n for n in cls) + b'\r\n' + body)
            check(got.startswith(want) and (want.endswith(b'200') or (b'Content-Length given 2 times with different '
                                                                        b'values' in got and b'Connection: close' in got)),
                  f'raw HTTP, Content-Length {cls[0]} and {cls[1]}: {want.decode()}', got[:300])
        del port
    finally:
        s.finish()


# ---------------------------------------------------------------- the body limit

def case_limits():
    s = Server(extra=['--max-request-bytes', '100000'])
    try:
        big = json.dumps({'inputs': [fp32_in([1, 3], [1, 2, 3])], 'id': 'p' * 200000}).encode()
        check(len(big) > 200000, f'the body is {len(big)} bytes')
        for path in ('/v2/models/identity_float32/infer', '/v2/models/identity_float32/versions/1/infer',
                     '/v2/repository/index'):
            expect_error(s, f'{len(big)} bytes with Content-Length to {path}', 413,
                         s.req('POST', path, big, {'Content-Type': 'application/json'}), '100000')
            expect_error(s, f'{len(big)} bytes chunked to {path}', 413,
                         s.req('POST', path, big, {'Content-Type': 'application/json'}, chunked=True), '100000')
        # a Content-Length over the limit with no body sent yet: answered (or closed) without waiting for it
        try:
            got = s.raw(b'POST /v2/models/identity_float32/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n',
                        timeout=5)
        except OSError as e:
            got = repr(e).encode()
        check(s.live(), 'Content-Length 10^10 with no body: the server stays live', got[:200])
        # just under the limit still works
        ok = json.dumps({'inputs': [fp32_in([1, 3], [1, 2, 3])], 'id': 'q' * 90000}).encode()
        st, h, b = s.req('POST', '/v2/models/identity_float32/infer', ok, {'Content-Type': 'application/json'})
        check(st == 200 and json.loads(b).get('id') == 'q' * 90000, f'{len(ok)} bytes (under the limit) is 200', b[:100])
        st, h, b = s.req('POST', '/v2/models/identity_float32/infer', ok, {'Content-Type': 'application/json'}, chunked=True)
        check(st == 200, f'{len(ok)} bytes chunked (under the limit) is 200 ({st})', b[:100])
        # headers: toplu's own limit (max_header_bytes, 64 KiB), answered in JSON; libmicrohttpd's
        # connection memory is larger so that bodies arrive in few reads
        expect_error(s, 'a 70,000-byte header', 431, s.req('GET', '/v2/health/live', None, {'X-Big': 'a' * 70000}),
                     'max_header_bytes', '65536')
        expect_error(s, 'a 70,000-byte header on an inference request with a body', 431,
                     s.req('POST', '/v2/models/identity_float32/infer', ok,
                           {'Content-Type': 'application/json', 'X-Big': 'a' * 70000}), 'max_header_bytes')
        st, h, b = s.req('GET', '/v2/health/live', None, {'X-Big': 'a' * 40000})
        check(st == 200, f'a 40,000-byte header (under the limit) is 200 ({st})')
        st, h, b = s.req('GET', '/metrics')
        check(st == 200, 'GET /metrics after the 413s and 431s')
    finally:
        s.finish()


# ---------------------------------------------------------------- allocation bound

def rss_kb(pid):
    return harness.vm_kb(pid, 'VmRSS')


def case_alloc():
    s = Server()
    try:
        big = BIG_CLS  # ~2^40 elements: 4 TiB of FP32
        hdr_j = json.dumps({'inputs': [fp32_in(big, [1, 2, 3])]}).encode()
        hdr_b = json.dumps({'inputs': [fp32_in(big, parameters={'binary_data_size': BIG_CLS_NUMEL * 4})]}).encode()
        hdr_m = json.dumps({'inputs': [fp32_in(big, parameters={'binary_data_size': 12})]}).encode()
        x3 = np.array([1, 2, 3], dtype='<f4').tobytes()
        kinds = [
            ('JSON data', hdr_j, {'Content-Type': 'application/json'}),
            ('binary_data_size 2^42', hdr_b + x3, {'Inference-Header-Content-Length': str(len(hdr_b))}),
            ('binary_data_size 12', hdr_m + x3, {'Inference-Header-Content-Length': str(len(hdr_m))}),
            ('Inference-Header-Content-Length 2^40', hdr_m + x3, {'Inference-Header-Content-Length': str(1 << 40)}),
        ]
        # warm up (first requests allocate the server's lasting buffers)
        for _, body, h in kinds:
            s.req('POST', '/v2/models/cls/infer', body, h)
        before = rss_kb(s.proc.pid)
        statuses = {}
        c = http.client.HTTPConnection('127.0.0.1', s.port, timeout=60)
        for i in range(200):
            what, body, h = kinds[i % len(kinds)]
            c.request('POST', '/v2/models/cls/infer', body=body, headers=h)
            r = c.getresponse()
            msg = error_message(r.status, r.read())
            statuses.setdefault((what, r.status, msg is not None), 0)
            statuses[(what, r.status, msg is not None)] += 1
        c.close()
        after = rss_kb(s.proc.pid)
        check(all(st == 400 and j for (_, st, j) in statuses), '200 requests of 2^40 elements: every one 400 JSON',
              str(statuses))
        check(sum(statuses.values()) == 200, '200 answers')
        check(before > 0 and after - before < 50 * 1024, f'server RSS {before} kB -> {after} kB: grew under 50 MB')
        # batched models too: 2^31-1 rows is refused by max_batch_size before any size is taken
        expect_error(s, 'cls: 2147483647 rows', 400,
                     infer_json(s, 'cls', {'inputs': [{'name': 'x', 'shape': [2147483647, 3, 48, 192], 'datatype': 'FP32',
                                                       'data': [0]}]}), 'inputs[0].shape', 'elements')
        expect_error(s, 'cls: 33 rows', 400,
                     infer_json(s, 'cls', {'inputs': [{'name': 'x', 'shape': [33, 3, 2, 2], 'datatype': 'FP32',
                                                       'data': [0]}]}), 'inputs[0].shape[0]', 'max_batch_size')
        final = rss_kb(s.proc.pid)
        check(final - before < 50 * 1024, f'server RSS at the end {final} kB')

        # a Content-Length the body does not hold: 16 connections each declare 256 MiB (the default
        # limit) and send 100 bytes; the server must not reserve memory by the declared length
        vm0 = harness.vm_kb(s.proc.pid, 'VmSize')
        socks = []
        for _ in range(16):
            k = socket.create_connection(('127.0.0.1', s.port), timeout=10)
            k.sendall(b'POST /v2/models/cls/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 268435456\r\n\r\n' + b' ' * 100)
            socks.append(k)
        time.sleep(1.0)
        vm1, rss1 = harness.vm_kb(s.proc.pid, 'VmSize'), rss_kb(s.proc.pid)
        for k in socks:
            k.close()
        check(vm1 - vm0 < 1024 * 1024,
              f'16 bodies declaring Content-Length 256 MiB with 100 bytes sent: server memory {vm0} kB -> {vm1} kB '
              f'(VmSize; RSS {rss1} kB) grew under 1 GiB')
        check(s.live(), 'live after the connections close')
    finally:
        s.finish()


# ---------------------------------------------------------------- hostile inputs

def load_with(s, model, config, timeout=60):
    """POST /v2/repository/models/MODEL/load with parameters.config."""
    body, h = jbody({'parameters': {'config': json.dumps(config)}})
    return s.req('POST', f'/v2/repository/models/{model}/load', body, h, timeout=timeout)


def case_hostile():
    """What a fresh user's hostile-input hunt found (2026-12-06): configs that wrote past arrays or wrapped sizes,
    smuggling-shaped headers, an id beyond int64, memory held without bound (JSON parses, gzip bodies, loads)."""
    mport = harness.free_port()
    s = Server(extra=['--max-inflight-bytes', '3000000', '--metrics-port', str(mport)])
    try:
        # Triton's metrics port: GET /metrics there too, nothing else
        st, _, b = harness.request(mport, 'GET', '/metrics', None, None, 30, False)
        check(st == 200 and b'nv_inference_request_success' in b, f'GET /metrics on --metrics-port {mport}: 200', b[:200])
        expect_error(s, 'GET /v2/health/live on the metrics port', 404,
                     harness.request(mport, 'GET', '/v2/health/live', None, None, 30, False), 'GET /metrics only')
        # 8 dims plus the batch dim: a stack overflow in the metadata and at the first request
        bad8 = {'max_batch_size': 4, 'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [1, 1, 1, 1, 1, 1, 1, 3],
                                                'reshape': {'shape': [3]}}]}
        expect_error(s, 'a config of 8 dims with batching', 400, load_with(s, 'identity_float32', bad8),
                     'input[0].dims', 'make 9')
        st, _, b = s.req('GET', '/v2/models/identity_float32')
        check(st == 200 and json.loads(b)['inputs'][0]['shape'] == [-1, 3], 'the model as it was after the refusal', b[:200])
        # warm-up dims whose bytes wrapped past 2^64: a heap overflow filling random data
        warm = {'max_batch_size': 8, 'model_warmup': [{'name': 'w', 'batch_size': 1, 'inputs': {
            'x': {'data_type': 'TYPE_FP32', 'dims': [(1 << 62) + 1], 'random_data': True}}}]}
        expect_error(s, 'warm-up dims of 2^62+1', 400, load_with(s, 'identity_float32', warm), 'dims', '2^40')
        # microseconds whose nanoseconds overflowed int64 (UBSan; every queued request rejected at once): 2^63-1 is
        # "no timeout"
        dyn = {'default_queue_policy': {'timeout_action': 'REJECT', 'default_timeout_microseconds': (1 << 63) - 1}}
        st, _, b = load_with(s, 'two', {'max_batch_size': 8, 'dynamic_batching': dyn})
        check(st == 200, f'default_timeout_microseconds 2^63-1 loads ({st})', b[:300])
        two = {'inputs': [{'name': 'a', 'shape': [1, 3], 'datatype': 'FP32', 'data': [1, 2, 3]}, {'name': 'b', 'shape': [1, 2], 'datatype': 'INT64', 'data': [4, 5]}]}
        got = []
        ths = [threading.Thread(target=lambda: got.append(infer_json(s, 'two', two)[0])) for _ in range(16)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(timeout=120)
        check(got == [200] * 16, '16 requests at once under that timeout: all 200, none timed out', str(got))
        dyn = {'max_queue_delay_microseconds': (1 << 63) - 1, 'preferred_batch_size': [2]}
        st, _, b = load_with(s, 'two', {'max_batch_size': 8, 'dynamic_batching': dyn})
        check(st == 200, f'max_queue_delay_microseconds 2^63-1 loads ({st})', b[:300])
        st, _, b = s.req('GET', '/v2/models/two/config')
        check(st == 200 and 0 < json.loads(b)['dynamic_batching']['max_queue_delay_microseconds'] < 1 << 62,
              'the delay is held below 2^62 microseconds in .../config', b[:400])
        # a warm-up batch past the max_batch_size the server chose (none configured): memory the client chose
        big_warm = {'model_warmup': [{'name': 'w', 'batch_size': 10000000, 'inputs': {
            'x': {'data_type': 'TYPE_FP32', 'dims': [1, 3], 'zero_data': True}}}]}
        expect_error(s, 'warm-up batch_size 10^7 without max_batch_size', 400,
                     load_with(s, 'identity_float32', big_warm), 'batch_size 10000000', 'max_batch_size')
        st, _, b = infer_json(s, 'identity_float32', {'inputs': [fp32_in([1, 3], [1, 2, 3])]})
        check(st == 200, f'identity_float32 still serves after the refused loads ({st})', b[:200])
        # the index: one READY entry that carries the latest refusal as its reason, as for a bad config file
        st, _, b = s.req('POST', '/v2/repository/index', b'{}', {'Content-Type': 'application/json'})
        ent = [e for e in (json.loads(b) if st == 200 else []) if e.get('name') == 'identity_float32']
        check(len(ent) == 1 and ent[0].get('state') == 'READY' and 'the latest load failed' in ent[0].get('reason', '')
              and 'max_batch_size' in ent[0].get('reason', ''), 'the index gives the refused load as the reason', str(ent))
        # a configuration that is a FIFO: refused (its open blocked the load, and a stop, for ever)
        os.makedirs(os.path.join(s.repo, 'fifo_cfg', '1'))
        os.symlink(os.path.realpath(os.path.join(s.repo, 'identity_float32', '1', 'model.onnx')),
                   os.path.join(s.repo, 'fifo_cfg', '1', 'model.onnx'))
        os.mkfifo(os.path.join(s.repo, 'fifo_cfg', 'config.json'))
        expect_error(s, 'a config.json that is a FIFO', 400, s.req('POST', '/v2/repository/models/fifo_cfg/load', timeout=30),
                     'FIFO')
        shutil.rmtree(os.path.join(s.repo, 'fifo_cfg'))
        # a reshape without max_batch_size: served as configured, unbatched (it was checked unbatched and served
        # batched: every request refused)
        rs = {'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [1, 1, 6], 'reshape': {'shape': [2, 3]}}],
              'output': [{'name': 'y', 'data_type': 'TYPE_FP32', 'dims': [2, 3]}]}
        st, _, b = load_with(s, 'identity_float32', rs)
        check(st == 200, f'reshape without max_batch_size loads ({st})', b[:300])
        st, _, b = s.req('GET', '/v2/models/identity_float32')
        check(st == 200 and json.loads(b)['inputs'][0]['shape'] == [1, 1, 6], 'its metadata: the configured dims', b[:300])
        st, _, b = infer_json(s, 'identity_float32', {'inputs': [fp32_in([1, 1, 6], [1, 2, 3, 4, 5, 6])]})
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [1, 2, 3, 4, 5, 6], 'and it answers', b[:300])
        st, _, _ = load_with(s, 'identity_float32', {'max_batch_size': 8})
        check(st == 200, 'identity_float32 back to batched')
        # an input of unknown rank: [-1], as .../config gives it, not [] (a scalar)
        st, _, b = s.req('GET', '/v2/models/any_rank')
        check(st == 200 and json.loads(b)['inputs'][0]['shape'] == [-1], 'unknown rank: shape [-1]', b[:300])
        # both Transfer-Encoding and Content-Length: 400 and the connection closed (RFC 9112 section 6.1)
        body = json.dumps({'inputs': [fp32_in([1, 3], [1, 2, 3])]}).encode()
        got = s.raw(b'POST /v2/models/identity_float32/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n'
                    b'Content-Length: 5\r\n\r\n' + b'%x\r\n' % len(body) + body + b'\r\n0\r\n\r\n'
                    b'GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n')
        head = got.split(b'\r\n\r\n', 1)[0].lower()
        check(got.startswith(b'HTTP/1.1 400') and b'transfer-encoding' in got.lower() and b'connection: close' in head
              and got.count(b'HTTP/1.1 ') == 1, 'Transfer-Encoding with Content-Length: one 400, connection closed',
              got[:400])
        # a reload keeps the version's counters: Prometheus counters do not go back (a reload zeroed them)
        def success_count(model):
            st, _, b = s.req('GET', '/metrics')
            m = re.search(r'^nv_inference_request_success\{model="%s",version="1"\} (\d+)$' % model, b.decode(), re.M)
            return int(m.group(1)) if m else -1
        for _ in range(3):
            infer_json(s, 'identity_nb', {'inputs': [fp32_in([1, 3], [1, 2, 3])]})
        before = success_count('identity_nb')
        st, _, _ = s.req('POST', '/v2/repository/models/identity_nb/load', timeout=600)
        infer_json(s, 'identity_nb', {'inputs': [fp32_in([1, 3], [1, 2, 3])]})
        after = success_count('identity_nb')
        st2, _, b = s.req('GET', '/v2/models/identity_nb/stats')
        count = json.loads(b)['model_stats'][0]['inference_count'] if st2 == 200 else -1
        check(st == 200 and before >= 3 and after == before + 1 and count >= 4,
              f'a reload keeps the counters: success {before} -> {after}, inference_count {count}')
        # a shape from the request's data that Reshape refuses is the client's error: 400, as shape [5, 5] is
        for sv, words in (([-1, -1], 'more than one -1'), ([5, 5], 'shape')):
            req = {'inputs': [fp32_in([2, 2], [1, 2, 3, 4]), {'name': 's', 'shape': [2], 'datatype': 'INT64', 'data': sv}]}
            expect_error(s, f'Reshape to {sv}', 400, infer_json(s, 'reshape_s', req), words)
        # an id beyond int64 is a number, not a string
        raw = b'{"id": 99999999999999999999999, "inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", ' \
              b'"data": [1, 2, 3]}]}'
        expect_error(s, 'an id beyond int64', 400,
                     s.req('POST', '/v2/models/identity_float32/infer', raw, {'Content-Type': 'application/json'}), 'id')
        # max_inflight_bytes 3,000,000: a JSON parse estimated past the whole budget is 413, bodies that would pass
        # it 503 (raw and gzip-decoded), and what they held comes back
        zeros = b'{"inputs": [{"name": "x", "shape": [40000, 3], "datatype": "FP32", "data": [' + \
                b','.join([b'0'] * 120000) + b']}]}'
        expect_error(s, f'{len(zeros)} bytes of JSON zeros (about 5.8 MB to parse)', 413,
                     s.req('POST', '/v2/models/identity_float32/infer', zeros, {'Content-Type': 'application/json'}),
                     'max_inflight_bytes', 'binary')
        # a body that alone passes the budget: 413 (no retry could succeed)
        pad = json.dumps({'inputs': [fp32_in([1, 3], [1, 2, 3])], 'id': 'p' * 3100000}).encode()
        expect_error(s, f'a {len(pad)}-byte body', 413,
                     s.req('POST', '/v2/models/identity_float32/infer', pad, {'Content-Type': 'application/json'}),
                     'max_inflight_bytes')
        expect_error(s, f'a {len(pad)}-byte body to the repository index', 413,
                     s.req('POST', '/v2/repository/index', pad, {'Content-Type': 'application/json'}),
                     'max_inflight_bytes')
        gz = gzip.compress(pad)
        expect_error(s, f'a gzip body of {len(gz)} bytes inflating to {len(pad)}', 413,
                     s.req('POST', '/v2/models/identity_float32/infer', gz,
                           {'Content-Type': 'application/json', 'Content-Encoding': 'gzip'}), 'max_inflight_bytes')
        # the repository endpoints' JSON is held too (a body of zeros was parsed unaccounted)
        expect_error(s, f'{len(zeros)} bytes of JSON zeros to the repository index', 413,
                     s.req('POST', '/v2/repository/index', zeros, {'Content-Type': 'application/json'}),
                     'max_inflight_bytes')
        # a body that would fit alone while another holds most of the budget: 503, and 200 once it is gone
        half = json.dumps({'inputs': [fp32_in([1, 3], [1, 2, 3])], 'id': 'h' * 1800000}).encode()
        k = socket.create_connection(('127.0.0.1', s.port), timeout=30)
        k.sendall(b'POST /v2/models/identity_float32/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
                  b'Content-Length: %d\r\n\r\n' % len(half) + half[:-10])
        time.sleep(1.0)
        expect_error(s, 'a 1.8 MB body while another 1.8 MB one is held', 503,
                     s.req('POST', '/v2/models/identity_float32/infer', half, {'Content-Type': 'application/json'}),
                     'max_inflight_bytes', 'retry')
        k.sendall(half[-10:])
        k.settimeout(30)
        first = k.recv(200)
        k.close()
        check(first.startswith(b'HTTP/1.1 200'), 'the held body, completed, is answered 200', first[:100])
        # the held body's bytes are given back when the server has finished that request (its completion
        # callback), which can come a little after the client reads the response's first bytes (under ASan
        # on a loaded machine, once in CI): a 503 meanwhile says to retry, so retry as a client does, up to 10 s
        deadline = time.time() + 10
        while True:
            st, _, b = s.req('POST', '/v2/models/identity_float32/infer', half, {'Content-Type': 'application/json'})
            if st != 503 or time.time() > deadline:
                break
            time.sleep(0.05)
        check(st == 200, f'the same 1.8 MB body once the other is gone: 200 ({st})', b[:100])
        x = np.arange(3 * 5000, dtype=np.float32) / 7
        ok = json.dumps({'inputs': [fp32_in([5000, 3], [float(v) for v in x])]}).encode()
        for i in range(4):  # about 0.7 MB to parse each: passes only if the earlier ones gave back what they held
            st, _, b = s.req('POST', '/v2/models/identity_nb/infer', ok, {'Content-Type': 'application/json'})
            out = json.loads(b)['outputs'][0]['data'] if st == 200 else []
            check(st == 200 and np.array_equal(np.array(out, dtype=np.float32), x),
                  f'a {len(ok)}-byte JSON request under the budget, round {i}: 200 with its values', b[:200])
        # repository loads: one at a time, at most 16 waiting or running; more are 503 (each load held its own memory)
        slow = {'max_batch_size': 32, 'model_warmup': [{'name': 'w', 'batch_size': 16, 'count': 40, 'inputs': {
            'x': {'data_type': 'TYPE_FP32', 'dims': [3, 48, 192], 'zero_data': True}}}]}
        results = []

        def one_load():
            try:
                st, _, b = load_with(s, 'cls', slow, timeout=600)
                results.append((st, error_message(st, b) or ''))
            except OSError as e:
                results.append((0, repr(e)))
        threads = [threading.Thread(target=one_load) for _ in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        codes = sorted(st for st, _ in results)
        busy = [m for st, m in results if st == 503]
        check(len(results) == 24 and set(codes) <= {200, 503} and codes.count(200) >= 1 and codes.count(200) <= 16,
              '24 loads at once: at most 16 loaded (one at a time), the rest 503', str(codes))
        check(busy and all('model loads' in m for m in busy), 'the 503s say why', str(busy[:2]))
        st, _, b = s.req('GET', '/v2/models/cls/ready')
        check(st == 200, f'cls is ready after the loads ({st})')

        # loads and unloads run in the order they came (an unload during a load was undone by it), and the index
        # says LOADING while a model without a serving version loads
        def index_state(name):
            st, _, b = s.req('POST', '/v2/repository/index')
            return [e.get('state') for e in json.loads(b) if e['name'] == name] if st == 200 else [st]
        st, _, _ = s.req('POST', '/v2/repository/models/cls/unload')
        check(st == 200 and index_state('cls') == ['UNAVAILABLE'], f'cls unloaded ({st}, {index_state("cls")})')
        slower = dict(slow, model_warmup=[dict(slow['model_warmup'][0], count=300)])
        t0 = time.time()
        got = {}
        lt = threading.Thread(target=lambda: got.setdefault('load', load_with(s, 'cls', slower, timeout=600)[0]))
        lt.start()
        time.sleep(0.3)
        during = index_state('cls')
        st_unload, _, _ = s.req('POST', '/v2/repository/models/cls/unload', timeout=600)
        lt.join(timeout=600)
        took = time.time() - t0
        check(during == ['LOADING'], f'the index during the load: LOADING ({during})')
        check(got.get('load') == 200 and st_unload == 200, f'the load and the unload sent during it: 200 both ({got}, '
              f'{st_unload}, {took:.1f} s)')
        st, _, b = s.req('GET', '/v2/models/cls/ready')
        check(st != 200 and index_state('cls') == ['UNAVAILABLE'],
              f'the unload, sent last, holds: cls not ready ({st}), index {index_state("cls")}')
        st, _, _ = s.req('POST', '/v2/repository/models/cls/load', timeout=600)
        check(st == 200, f'cls loads again ({st})')

        # version folders: every one is read (the first 256 in readdir order were), a name beyond int64 or with a
        # leading space is no version (it was read as 2^63-1 or 6, and the model failed)
        src = os.path.join(s.repo, 'identity_float32', '1', 'model.onnx')
        many = os.path.join(s.repo, 'many')
        for v in range(1, 401):
            os.makedirs(os.path.join(many, str(v)))
            os.symlink(os.path.realpath(src), os.path.join(many, str(v), 'model.onnx'))
        st, _, b = s.req('POST', '/v2/repository/models/many/load', timeout=600)
        st2, _, b2 = s.req('GET', '/v2/models/many')
        check(st == 200 and st2 == 200 and json.loads(b2).get('versions') == ['400'],
              f'400 version folders: version 400 serves ({st}, {b2[:120]!r})')
        odd = os.path.join(s.repo, 'odd')
        for v in ('7', '99999999999999999999', ' 6', '08'):
            os.makedirs(os.path.join(odd, v))
            os.symlink(os.path.realpath(src), os.path.join(odd, v, 'model.onnx'))
        st, _, b = s.req('POST', '/v2/repository/models/odd/load', timeout=600)
        st2, _, b2 = s.req('GET', '/v2/models/odd')
        check(st == 200 and json.loads(b2).get('versions') == ['7'],
              f'folders 7, 99999999999999999999, " 6", 08: version 7 serves ({st}, {b[:200]!r}, {b2[:120]!r})')
    finally:
        s.finish()


def case_stop_loads():
    """SIGTERM while repository loads wait and run: every one answered (200 or 503), exit 0, no sanitizer report
    (libmicrohttpd aborts the process when it is stopped with a suspended connection)."""
    s = Server(extra=['--exit-timeout', '2'])
    slow = {'max_batch_size': 32, 'model_warmup': [{'name': 'w', 'batch_size': 16, 'count': 2000, 'inputs': {
        'x': {'data_type': 'TYPE_FP32', 'dims': [3, 48, 192], 'zero_data': True}}}]}
    results = []

    def one(model):
        try:
            results.append(load_with(s, model, slow if model == 'cls' else {'max_batch_size': 8}, timeout=120)[0])
        except OSError as e:
            results.append(repr(e))
    ths = [threading.Thread(target=one, args=(m,)) for m in ('cls', 'identity_float32', 'cls', 'two')]
    for t in ths:
        t.start()
        time.sleep(0.05)
    time.sleep(0.5)
    code = s.sigterm()
    for t in ths:
        t.join(timeout=120)
    check(code == 0, f'SIGTERM with 4 repository requests waiting or running: exit 0 ({code})', s.stderr()[-1500:])
    check(len(results) == 4 and all(r in (200, 503) for r in results), f'each answered 200 or 503: {results}')
    s.check_sanitizers()


CASES = {k[5:]: v for k, v in list(globals().items()) if k.startswith('case_')}

if __name__ == '__main__':
    if CASE not in CASES:
        print(f'unknown case {CASE!r}; cases: {", ".join(CASES)}')
        sys.exit(2)
    try:
        CASES[CASE]()
    except Failure as e:
        print(f'FAIL: {e}')
        FAILED.append(str(e))
    except Exception as e:  # noqa: BLE001 - a crash of the test (e.g. the server dropped a connection) fails it
        import traceback
        traceback.print_exc()
        FAILED.append(repr(e))
    if FAILED:
        print(f'\n{len(FAILED)} check(s) failed:')
        for f in FAILED:
            print('  - ' + f[:500])
        sys.exit(1)
    print('all checks passed')
