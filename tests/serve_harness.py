"""Pieces shared by the tests that run `toplu serve` over real HTTP (tests/test_serve.py,
tests/test_serve_http.py, tests/test_serve_gaps.py): a free port, starting a server and waiting for
readiness, one HTTP request, the sanitizer marks a server's log must not hold, a field of
/proc/PID/status, the checks that list every failure (FAILED, check, Failure), a tiny Identity
model and a server over a repository made of them (RepoServer).
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import time

# What ASan, LeakSanitizer and UBSan print: none of it may appear in a server's output.
SANITIZER_MARKS = ('ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'runtime error:')


# The failed checks of a run that goes on after a failure (check); the test exits 1 when any.
FAILED = []


class Failure(Exception):
    pass


def check(cond, what, detail=''):
    """Record a check; a failed one is listed and fails the run (the others still run)."""
    if cond:
        print(f'ok: {what}')
    else:
        msg = f'{what}: {detail}' if detail else what
        print(f'FAIL: {msg}')
        FAILED.append(msg)
    return bool(cond)


def vm_kb(pid, field):
    """A kB field of /proc/PID/status (VmRSS, VmHWM, ...), -1 when absent."""
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    return -1


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    p = s.getsockname()[1]
    s.close()
    return p


def request(port, method, path, body=None, headers=None, timeout=60, chunked=False):
    """One request on a fresh connection: (status, headers with lower-case names, body bytes).
    chunked: send body with Transfer-Encoding: chunked, 8 KiB a chunk."""
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        if chunked:
            c.putrequest(method, path)
            for k, v in (headers or {}).items():
                c.putheader(k, v)
            c.putheader('Transfer-Encoding', 'chunked')
            c.endheaders()
            for i in range(0, len(body), 8192):
                piece = body[i:i + 8192]
                c.send(b'%x\r\n' % len(piece) + piece + b'\r\n')
            c.send(b'0\r\n\r\n')
        else:
            c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def start(args, port, stdout, stderr, ready_timeout, log_tail, failure):
    """Popen(args) and wait until GET /v2/health/ready on port is 200.  On an exit or after
    ready_timeout seconds raise failure(message) with log_tail() (the server's output) in it."""
    proc = subprocess.Popen(args, stdout=stdout, stderr=stderr)
    t0 = time.time()
    while time.time() - t0 < ready_timeout:
        if proc.poll() is not None:
            raise failure(f'server exited {proc.returncode}: {log_tail()}')
        try:
            if request(port, 'GET', '/v2/health/ready', timeout=2)[0] == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.1)
    raise failure(f'server not ready after {ready_timeout} s: {log_tail()}')


def sigterm_wait(proc, timeout=60):
    """SIGTERM to a running server and wait for it; False when it had to be killed after timeout seconds."""
    if proc.poll() is not None:
        return True
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


def identity_model(path, dims, producer='toplu-test'):
    """An Identity graph x -> y, FP32, of dims (ints fixed, strings symbolic), saved at path."""
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info('y', TensorProto.FLOAT, dims)
    g = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], 'identity', [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name=producer)
    m.ir_version = 8
    onnx.checker.check_model(m)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(m, path)


class RepoServer:
    """toplu serve over a repository made in run_dir: models maps name -> (dims, config or None,
    versions=(1,)): Identity models of dims (None: a corrupt model.onnx), the config written as
    config.json (a dict, or text as it is); files maps name -> {file name: text} written into the
    model's folder as well (config.pbtxt, say).  Waits until the server answers and every model has
    left LOADING (a model may fail)."""

    def __init__(self, toplu, run_dir, models, extra=(), files=None):
        self.dir = run_dir
        shutil.rmtree(self.dir, ignore_errors=True)
        self.repo = os.path.join(self.dir, 'repo')
        os.makedirs(self.repo)
        for name, spec in models.items():
            dims, cfg = spec[0], spec[1]
            for v in (spec[2] if len(spec) > 2 else (1,)):
                if dims is None:
                    os.makedirs(os.path.join(self.repo, name, str(v)), exist_ok=True)
                    with open(os.path.join(self.repo, name, str(v), 'model.onnx'), 'wb') as f:
                        f.write(b'not an onnx model')
                else:
                    identity_model(os.path.join(self.repo, name, str(v), 'model.onnx'), dims)
            if cfg is not None:
                with open(os.path.join(self.repo, name, 'config.json'), 'w') as f:
                    f.write(cfg if isinstance(cfg, str) else json.dumps(cfg))
            for fname, text in (files or {}).get(name, {}).items():
                with open(os.path.join(self.repo, name, fname), 'w') as f:
                    f.write(text)
        self.port = free_port()
        self.err_path = os.path.join(self.dir, 'server.err')
        self.err = open(self.err_path, 'w')
        self.out_path = os.path.join(self.dir, 'server.out')  # the access log (--access-log)
        self.out = open(self.out_path, 'w')
        args = [toplu, 'serve', '--model-repository', self.repo, '--http-port', str(self.port),
                '--host', '127.0.0.1', '--threads', '1'] + list(extra)
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=self.err)
        t0 = time.time()
        while True:
            if self.proc.poll() is not None:
                raise Failure(f'server exited {self.proc.returncode}: {self.stderr()[-1500:]}')
            if time.time() - t0 > 120:
                raise Failure(f'server not up after 120 s: {self.stderr()[-1500:]}')
            try:
                st, _, b = self.req('POST', '/v2/repository/index', timeout=2)
                if st == 200 and all(m.get('state') != 'LOADING' for m in json.loads(b)):
                    break
            except OSError:
                pass
            time.sleep(0.1)

    def stderr(self):
        self.err.flush()
        with open(self.err_path, errors='replace') as f:
            return f.read()

    def stdout(self):
        self.out.flush()
        with open(self.out_path, errors='replace') as f:
            return f.read()

    def req(self, method, path, body=None, headers=None, timeout=60):
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        return request(self.port, method, path, body, headers, timeout)

    def index(self):
        return {m['name']: m for m in json.loads(self.req('POST', '/v2/repository/index')[2])}

    def config(self, name):
        st, _, b = self.req('GET', f'/v2/models/{name}/config')
        return json.loads(b) if st == 200 else {'status': st, 'body': b[:300]}

    def finish(self):
        if not sigterm_wait(self.proc):
            check(False, 'server stops within 60 s of SIGTERM')
        check(self.proc.returncode == 0, f'server exits 0 after SIGTERM (got {self.proc.returncode})')
        text = self.stderr()
        for bad in SANITIZER_MARKS:
            check(bad not in text, f'no "{bad}" in the server log', text[text.find(bad):][:1500])
