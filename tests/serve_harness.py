"""Pieces shared by the tests that run `toplu serve` over real HTTP (tests/test_serve.py,
tests/test_serve_http.py, tests/test_serve_gaps.py): a free port, starting a server and waiting for
readiness, one HTTP request, the sanitizer marks a server's log must not hold, a field of
/proc/PID/status, and the checks that list every failure (FAILED, check, Failure).
"""
import http.client
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
