#!/usr/bin/python3
"""Known gaps of `toplu serve` a new-user trial found (docs/serve.md), each over real HTTP against
a server of tiny generated ONNX models (tests/serve_gaps.cmake).

  test_serve_gaps.py TOPLU WORKDIR CASE

Cases:
  readiness    /v2/health/ready is 503 naming the model while a model failed to load (Triton's
               default --strict-readiness=true), 200 once a load of it succeeds; with
               --strict-readiness false it is 200; a bad value is a usage error (exit 2); a
               repository whose only model fails starts, not ready, and takes the fixed model
  config_dims  config.json input[].dims are enforced on requests (-1 any size, without the batch
               dim when max_batch_size > 0): 400 naming the input and both shapes; a config whose
               dims contradict the model's fixed dims fails to load naming the input and file;
               metadata and /config show the config's narrower dims
  platform     model metadata and /config name the same platform (toplu_onnx: toplu's engine, not
               Triton's onnxruntime_onnx), for every version endpoint
  triton_fields  Triton fields toplu does not use are logged once per model load, naming them (parameters
               keys toplu does not read among them);
               sequence_batching and ensemble_scheduling fail the load with a clear reason
  stats_versions  GET /v2/models/M/stats under version_policy all has one model_stats entry per ready
               version, each with its own counts; versions/N/stats the one
  content_encoding  Content-Encoding gzip and deflate bodies (JSON and binary tensors) are inflated;
               the body limit applies to the decoded size (a 1 GB gzip bomb of ~1 MB gets 413, the
               server's memory stays small); corrupt, truncated and unknown encodings get 400/415
  header_timeout  --header-timeout 2: a client trickling its request line and headers a byte at a
               time, and one that sends nothing, are closed 2-4 s after connecting (libmicrohttpd's
               idle timeout alone held the trickler as long as it kept sending); a keep-alive
               connection whose requests come 1 s apart serves them all (the deadline counts from
               the previous request); --header-timeout 0 has no deadline; a negative value exits 2

  unload_ready  strict readiness after an explicit unload: a failed reload then an unload of the
               model is ready 200 and the index says "unloaded"; a model that failed at start-up can
               be unloaded (200) and is no longer waited for, as is one whose folder was removed
               before a load (404); the index has one entry per name and version (a failed reload
               keeps its READY entry, the reason on it); unknown repository actions are 404 on any
               method; max_batch_size_source names parameters.config; --model-name refuses names
               the repository API refuses (exit 2)
  no_batch_dim  a model with no batch dim and no config (silero VAD, TOPLU_VAD_MODEL or argv[4]; a
               generated [2, 3] Identity) loads with max_batch_size 0, the log and
               max_batch_size_source saying why, and serves its full shape
  warmup_file  model_warmup input_data_file: the warm-up runs the bytes of DIR/NAME/warmup/FILE (a
               Gather index 7 from the file fails the warm-up, 1 loads); a short file or a missing
               one fails the load naming the file (and both sizes)
  reshape      Triton's input/output reshape: MNIST (argv[5] or TOPLU_MNIST_MODEL) under a densenet-style
               config.pbtxt (max_batch_size 0, dims [1, 28, 28] -> reshape [1, 1, 28, 28], output [1, 10]
               -> dims [10]) answers what the plain model does, with shape [10] in JSON and binary
               responses and in the metadata; silero VAD's scalar 'sr' as dims [1] reshape [] answers
               what sr [] does without the reshape; a generated [N, 4] Identity served as dims [2, 2]
               reshape [4] (max_batch_size 8, dynamic batching, response cache, warm-up data of the
               clients' shape [2, 2]) gives concurrent
               requests of 1..4 rows their own rows as [rows, 2, 2]; configs whose reshape cannot hold
               dims' elements, or that name an input the model lacks, fail to load naming the field

  config_outputs  a config that lists some of the model's outputs serves those alone, as Triton's
               ONNX Runtime backend (which fills in output[] only when the config has none): a request
               without "outputs" gets the listed ones, one naming another output is 400 naming it,
               model metadata and /config show the listed ones; without output[] every output comes

  routes_logs  a fresh-user trial's findings (2026-12-06): an unknown action or health endpoint is 404
               for every method (POST .../generate was 405 "use GET"); an empty path segment
               (versions//ready) and an over-long segment are 404 saying so; a decoded %0A or %1B in a
               path cannot forge or break a text log line (stdout access log, stderr log); the access
               log's path is one field; Inference-Header-Content-Length 0 means the whole body is JSON,
               and whitespace around its value is allowed; nested JSON data is flattened whatever its
               structure (Triton's reading), a wrong count still naming where the nesting departs from
               the shape; version folders like 0, 01 or latest holding a model are named in the load
               error; --host :: answers IPv4 clients (dual stack); a model without a configuration
               is batched (dynamic batching on with the size toplu chooses); a hidden folder is skipped
               with a log line and refused by a load request
  rows_mix     a sequence-first model ([S, N, 4] attention over S, as nn.TransformerEncoder with
               batch_first False exports) has the shapes to batch along dim 0 but mixes its rows: it
               loads with max_batch_size 0, the log and max_batch_size_source saying why, and a
               request answers attention over its own steps (it was batched and padded along them,
               up to 0.19 off)

Exit status 0 pass, 1 fail (every failed check is listed).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402
from serve_harness import FAILED, Failure, check  # noqa: E402

TOPLU, WORK, CASE = sys.argv[1:4]
EXTRA = sys.argv[4:]


identity_model = harness.identity_model


class Server(harness.RepoServer):
    """toplu serve over a repository of this case (see serve_harness.RepoServer)."""

    def __init__(self, models, extra=(), tag=''):
        super().__init__(TOPLU, os.path.join(WORK, CASE + tag), models, extra)


def infer_body(shape, name='x'):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    return {'inputs': [{'name': name, 'shape': list(shape), 'datatype': 'FP32', 'data': x.ravel().tolist()}]}


def error_of(body):
    try:
        return json.loads(body).get('error', '')
    except ValueError:
        return ''


# ---------------------------------------------------------------- cases

def case_readiness():
    models = {'good': (['N', 3], {'max_batch_size': 4}), 'broken': (None, None)}
    s = Server(models)
    try:
        idx = s.index()
        check(idx.get('broken', {}).get('state') == 'UNAVAILABLE', 'the corrupt model is UNAVAILABLE', str(idx))
        check(s.req('GET', '/v2/health/live')[0] == 200, 'live is 200')
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 503 and "'broken'" in error_of(b),
              'ready is 503 naming the model that failed to load (strict readiness, the default)', f'{st} {b[:300]}')
        check(s.req('GET', '/v2/models/good/ready')[0] == 200, 'the good model itself is ready')
        st, _, b = s.req('POST', '/v2/models/good/infer', infer_body([1, 3]))
        check(st == 200, 'the good model serves', b[:200])
        # fix the broken model and load it: ready again
        identity_model(os.path.join(s.repo, 'broken', '1', 'model.onnx'), ['N', 3])
        st, _, b = s.req('POST', '/v2/repository/models/broken/load')
        check(st == 200, 'loading the fixed model answers 200', b[:300])
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 200, 'ready is 200 once the failed model loaded', f'{st} {b[:300]}')
        # a failed reload keeps the old version serving: still ready
        with open(os.path.join(s.repo, 'broken', 'config.json'), 'w') as f:
            f.write('{"max_batch_size": "many"}')
        st, _, b = s.req('POST', '/v2/repository/models/broken/load')
        check(st != 200, 'a reload with a bad config.json fails', f'{st} {b[:200]}')
        check(s.req('GET', '/v2/models/broken/ready')[0] == 200, 'the old version still serves after a failed reload')
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 200, 'ready stays 200 after a failed reload (the old version serves)', f'{st} {b[:300]}')
    finally:
        s.finish()
    s = Server(models, extra=['--strict-readiness', 'false'], tag='_loose')
    try:
        check(s.index().get('broken', {}).get('state') == 'UNAVAILABLE', 'loose: the corrupt model is UNAVAILABLE')
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 200, '--strict-readiness false: ready is 200 with a model that failed', f'{st} {b[:300]}')
    finally:
        s.finish()
    # a repository whose only model fails starts all the same (it exited 2 until 2026-12-06): not ready, and the
    # fixed model loads through the repository API
    s = Server({'broken': (None, None)}, tag='_none')
    try:
        check(s.req('GET', '/v2/health/live')[0] == 200, 'no model loaded: the server is up (live 200)')
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 503 and "'broken'" in error_of(b), 'and not ready, naming the model', f'{st} {b[:300]}')
        check('serving none until a load' in s.stderr(), 'the log says no model could be loaded', s.stderr()[-600:])
        identity_model(os.path.join(s.repo, 'broken', '1', 'model.onnx'), ['N', 3])
        st, _, b = s.req('POST', '/v2/repository/models/broken/load')
        check(st == 200 and s.req('GET', '/v2/health/ready')[0] == 200, 'the fixed model loads and the server is ready',
              f'{st} {b[:200]}')
    finally:
        s.finish()
    r = subprocess.run([TOPLU, 'serve', '--model-repository', WORK, '--strict-readiness', 'maybe'],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and '--strict-readiness' in r.stderr and 'maybe' in r.stderr,
          '--strict-readiness maybe: usage error (exit 2) naming the flag and value', f'{r.returncode} {r.stderr[-300:]}')


def case_config_dims():
    models = {
        # batched: dims exclude the batch dim; the model's W is free, the config fixes it to 4
        'b4': (['N', 3, 'W'], {'max_batch_size': 8, 'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [3, 4]}]}),
        # -1 leaves W free
        'bw': (['N', 3, 'W'], {'max_batch_size': 8, 'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [3, -1]}]}),
        # not batched: dims are the whole shape
        'u': (['N', 3, 'W'], {'max_batch_size': 0, 'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [-1, 3, 2]}]}),
        # contradicts the model's fixed 3
        'contra': (['N', 3, 'W'], {'max_batch_size': 8, 'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [5, -1]}]}),
    }
    s = Server(models)
    try:
        for name, shape, want in (('b4', [2, 3, 4], 200), ('b4', [2, 3, 5], 400), ('b4', [1, 3, 4], 200),
                                  ('bw', [2, 3, 7], 200), ('bw', [1, 3, 1], 200),
                                  ('u', [5, 3, 2], 200), ('u', [5, 3, 3], 400)):
            st, _, b = s.req('POST', f'/v2/models/{name}/infer', infer_body(shape))
            if want == 200:
                ok = st == 200 and json.loads(b)['outputs'][0]['shape'] == shape
                check(ok, f'{name}: shape {shape} fits the config dims: 200', f'{st} {b[:300]}')
            else:
                e = error_of(b)
                sh = ', '.join(map(str, shape))
                check(st == 400 and "'x'" in e and f'[{sh}]' in e and 'dims' in e,
                      f'{name}: shape {shape} against the config dims: 400 naming the input and both shapes',
                      f'{st} {e[:300]}')
        st, _, b = s.req('POST', '/v2/models/b4/infer', infer_body([2, 3, 5]))
        check("[3, 4]" in error_of(b), 'b4: the error gives the config dims [3, 4]', error_of(b)[:300])
        for name, shape in (('b4', [-1, 3, 4]), ('bw', [-1, 3, -1]), ('u', [-1, 3, 2])):
            md = json.loads(s.req('GET', f'/v2/models/{name}')[2])
            check(md['inputs'][0]['shape'] == shape, f'{name}: metadata shows the shape requests must have, {shape}', str(md)[:300])
        cfg = json.loads(s.req('GET', '/v2/models/b4/config')[2])
        check(cfg['input'][0]['dims'] == [3, 4], 'b4: /config shows input dims [3, 4]', str(cfg)[:300])
        md = json.loads(s.req('GET', '/v2/models/b4')[2])
        check(md['outputs'][0]['shape'] == [-1, 3, -1], 'b4: outputs keep the model dims', str(md)[:300])
        idx = s.index()
        reason = idx.get('contra', {}).get('reason', '')
        check(idx.get('contra', {}).get('state') == 'UNAVAILABLE' and "'x'" in reason and 'model.onnx' in reason
              and 'dims' in reason,
              'a config whose dims contradict the model fails to load naming the input, the dims and the file', str(idx.get('contra')))
    finally:
        s.finish()


def case_platform():
    s = Server({'p': (['N', 3], {'max_batch_size': 4})})
    try:
        md = json.loads(s.req('GET', '/v2/models/p')[2])
        mdv = json.loads(s.req('GET', '/v2/models/p/versions/1')[2])
        cfg = json.loads(s.req('GET', '/v2/models/p/config')[2])
        check(md.get('platform') == cfg.get('platform') == mdv.get('platform'),
              'metadata, version metadata and /config give the same platform',
              f"{md.get('platform')!r} {mdv.get('platform')!r} {cfg.get('platform')!r}")
        check(cfg.get('platform') == 'toplu_onnx' and cfg.get('backend') == 'toplu',
              '/config: platform toplu_onnx, backend toplu (not onnxruntime: toplu runs the model)', str(cfg)[:200])
    finally:
        s.finish()


def case_triton_fields():
    ign = {'max_batch_size': 4, 'platform': 'onnxruntime_onnx', 'backend': 'onnxruntime',
           'optimization': {'graph': {'level': 1}}, 'default_model_filename': 'model.onnx',
           # parameters toplu does not read are named too: a backend's, and a misspelling of toplu's own
           # (allow_non_finite; they were dropped in silence); toplu's allow_nonfinite is not
           'parameters': {'intra_op_thread_count': {'string_value': '2'},
                          'allow_non_finite': {'string_value': 'true'}, 'allow_nonfinite': {'string_value': 'false'}}}
    seq = {'max_batch_size': 4, 'sequence_batching': {'max_sequence_idle_microseconds': 5000000}}
    ens = {'max_batch_size': 4, 'ensemble_scheduling': {'step': []}}
    s = Server({'ign': (['N', 3], ign), 'plain': (['N', 3], {'max_batch_size': 4}),
                'seq': (['N', 3], seq), 'ens': (['N', 3], ens)})
    try:
        log = s.stderr()
        lines = [ln for ln in log.splitlines() if 'ignored' in ln]
        mine = [ln for ln in lines if "'ign'" in ln]
        # default_model_filename is used since (the version folder's file: tests/test_serve_triton.py)
        check(len(mine) == 1 and all(f in mine[0] for f in ('platform', 'backend', 'optimization',
                                                             'parameters.intra_op_thread_count',
                                                             'parameters.allow_non_finite')) and
              'default_model_filename' not in mine[0] and 'parameters.allow_nonfinite' not in mine[0],
              'one log line for the model naming every ignored field', '\n'.join(lines) or log[-1500:])
        check(not any("'plain'" in ln for ln in lines), 'no such line for a model without them', '\n'.join(lines))
        idx = s.index()
        check(idx.get('ign', {}).get('state') == 'READY', 'the model with ignored fields serves', str(idx.get('ign')))
        for name, fld in (('seq', 'sequence_batching'), ('ens', 'ensemble_scheduling')):
            r = idx.get(name, {})
            check(r.get('state') == 'UNAVAILABLE' and fld in r.get('reason', '') and 'not supported' in r.get('reason', ''),
                  f'a {fld} model is refused with a reason naming the field', str(r))
            check(s.req('POST', f'/v2/models/{name}/infer', infer_body([1, 3]))[0] == 404, f'{name} is not served')
        # a load through the repository API logs it again, once
        st, _, b = s.req('POST', '/v2/repository/models/ign/load')
        check(st == 200, 'reload of the model answers 200', b[:200])
        mine = [ln for ln in s.stderr().splitlines() if 'ignored' in ln and "'ign'" in ln]
        check(len(mine) == 2, 'the reload logs the ignored fields once more', '\n'.join(mine))
    finally:
        s.finish()


def case_stats_versions():
    s = Server({'mv': (['N', 3], {'max_batch_size': 4, 'version_policy': {'all': {}}}, (1, 2, 3))})
    try:
        idx = json.loads(s.req('POST', '/v2/repository/index')[2])
        check(sorted(m.get('version') for m in idx if m['name'] == 'mv') == ['1', '2', '3'], 'three versions loaded', str(idx))
        sent = {'1': 1, '2': 2, '3': 3}
        for v, k in sent.items():
            for _ in range(k):
                st, _, b = s.req('POST', f'/v2/models/mv/versions/{v}/infer', infer_body([1, 3]))
                check(st == 200, f'infer on version {v}', b[:200])
        st, _, b = s.req('GET', '/v2/models/mv/stats')
        ms = json.loads(b).get('model_stats', []) if st == 200 else []
        got = {e.get('version'): e for e in ms if e.get('name') == 'mv'}
        check(sorted(got) == ['1', '2', '3'], 'stats of the model: one entry per ready version', b[:400])
        for v, k in sent.items():
            succ = got.get(v, {}).get('inference_stats', {}).get('success', {}).get('count')
            check(succ in (k, str(k)), f'version {v}: its own success count {k}', str(got.get(v))[:300])
        st, _, b = s.req('GET', '/v2/models/mv/versions/2/stats')
        ms = json.loads(b).get('model_stats', []) if st == 200 else []
        check([e.get('version') for e in ms] == ['2'], 'versions/2/stats: that version alone', b[:300])
        st, _, b = s.req('GET', '/v2/models/stats')
        ms = json.loads(b).get('model_stats', []) if st == 200 else []
        check(sorted(e.get('version') for e in ms if e.get('name') == 'mv') == ['1', '2', '3'],
              '/v2/models/stats lists every version too', b[:300])
    finally:
        s.finish()


def case_content_encoding():
    import gzip
    import zlib
    s = Server({'ce': (['N', 3], {'max_batch_size': 4})}, extra=['--max-request-bytes', str(8 << 20)])
    try:
        body = json.dumps(infer_body([2, 3])).encode()
        want = np.arange(6, dtype=np.float32).ravel().tolist()
        for enc, data in (('gzip', gzip.compress(body)), ('deflate', zlib.compress(body)), ('GZIP', gzip.compress(body)),
                          ('identity', body)):
            st, _, b = s.req('POST', '/v2/models/ce/infer', data, {'Content-Encoding': enc, 'Content-Type': 'application/json'})
            ok = st == 200 and json.loads(b)['outputs'][0]['data'] == want
            check(ok, f'Content-Encoding {enc}: the decoded request is served', f'{st} {b[:300]}')
        # binary tensors inside gzip: the header length counts decoded bytes
        x = np.arange(12, dtype='<f4').reshape(4, 3)
        hdr = json.dumps({'inputs': [{'name': 'x', 'shape': [4, 3], 'datatype': 'FP32',
                                      'parameters': {'binary_data_size': x.nbytes}}]}).encode()
        st, _, b = s.req('POST', '/v2/models/ce/infer', gzip.compress(hdr + x.tobytes()),
                         {'Content-Encoding': 'gzip', 'Inference-Header-Content-Length': str(len(hdr))})
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == x.ravel().tolist(),
              'gzip with binary tensor data', f'{st} {b[:300]}')
        # a gzip bomb: 1 GiB of zeros in about 1 MB, against an 8 MiB limit
        rss0 = harness.vm_kb(s.proc.pid, 'VmRSS')
        bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [bomb.compress(b'\0' * (1 << 20)) for _ in range(1024)]
        data = b''.join(parts) + bomb.flush()
        t0 = time.time()
        st, _, b = s.req('POST', '/v2/models/ce/infer', data, {'Content-Encoding': 'gzip'})
        rss1 = harness.vm_kb(s.proc.pid, 'VmRSS')
        check(st == 413 and 'decoded' in error_of(b), f'a gzip bomb ({len(data)} bytes -> 1 GiB): 413 on the decoded size',
              f'{st} {b[:300]}')
        check(rss1 - rss0 < 64 * 1024, f'the bomb took under 64 MiB of server memory (RSS {rss0} -> {rss1} kB)')
        check(time.time() - t0 < 30, 'and was refused in under 30 s')
        # corrupt, truncated, trailing bytes, unknown encodings
        gz = gzip.compress(body)
        for what, data, enc, code, word in (
                ('not gzip at all', body, 'gzip', 400, 'gzip'),
                ('a corrupt deflate stream', b'\x78\x9c' + b'\xff' * 40, 'deflate', 400, 'deflate'),
                ('a truncated gzip body', gz[:len(gz) // 2], 'gzip', 400, 'ends before'),
                ('bytes after the gzip stream', gz + b'junk', 'gzip', 400, 'follow the end'),
                ('br', body, 'br', 415, "'br'")):
            st, _, b = s.req('POST', '/v2/models/ce/infer', data, {'Content-Encoding': enc})
            check(st == code and word in error_of(b), f'{what}: {code} saying why', f'{st} {b[:300]}')
        # the repository API takes gzip too
        st, _, b = s.req('POST', '/v2/repository/index', gzip.compress(b'{"ready": true}'), {'Content-Encoding': 'gzip'})
        check(st == 200 and [m['name'] for m in json.loads(b)] == ['ce'], 'repository index with a gzip body', f'{st} {b[:200]}')
        st, _, b = s.req('POST', '/v2/repository/index', b'{"ready": true}', {'Content-Encoding': 'gzip'})
        check(st == 400 and 'gzip' in error_of(b), 'repository index with a body that is not gzip: 400', f'{st} {b[:200]}')
        check(s.req('GET', '/v2/health/live')[0] == 200, 'live after all of it')
    finally:
        s.finish()


def closed_after(sock, trickle, limit):
    """Seconds until the server closes sock (recv gives b'' or the connection resets), sending
    one byte of trickle every 0.25 s; None when still open after limit seconds."""
    t0 = time.time()
    i = 0
    sock.settimeout(0.25)
    while time.time() - t0 < limit:
        try:
            if trickle and i < len(trickle):
                sock.send(trickle[i:i + 1])
                i += 1
            if sock.recv(4096) == b'':
                return time.time() - t0
        except socket.timeout:
            continue
        except OSError:  # reset, or a broken pipe on send
            return time.time() - t0
    return None


def raw_exchange(sock, request):
    """Send one HTTP/1.1 request on a kept-alive socket; return (status, body)."""
    sock.sendall(request)
    buf = b''
    sock.settimeout(30)
    while b'\r\n\r\n' not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise Failure(f'connection closed before a response: {buf[:200]!r}')
        buf += chunk
    head, _, rest = buf.partition(b'\r\n\r\n')
    lines = head.decode('latin-1').split('\r\n')
    length = 0
    for line in lines[1:]:
        k, _, v = line.partition(':')
        if k.strip().lower() == 'content-length':
            length = int(v)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(lines[0].split()[1]), rest[:length]


def case_header_timeout():
    s = Server({'h': (['N', 3], None)}, extra=['--header-timeout', '2'])
    try:
        trickle = b'POST /v2/models/h/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' * 4
        t = closed_after(socket.create_connection(('127.0.0.1', s.port)), trickle, 10)
        check(t is not None and 1.9 <= t <= 4.0, 'a client trickling its headers is closed 2-4 s after connecting',
              f'closed after {t} s' if t else 'still open after 10 s of trickling')
        t = closed_after(socket.create_connection(('127.0.0.1', s.port)), b'', 10)
        check(t is not None and 1.9 <= t <= 4.0, 'a client sending nothing is closed 2-4 s after connecting',
              f'closed after {t} s' if t else 'still open after 10 s')
        body = json.dumps(infer_body([1, 3])).encode()
        req = (b'POST /v2/models/h/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
               b'Content-Length: ' + str(len(body)).encode() + b'\r\n\r\n' + body)
        k = socket.create_connection(('127.0.0.1', s.port))
        got = []
        for i in range(4):
            if i:
                time.sleep(1.0)
            st, b = raw_exchange(k, req)
            got.append(st)
            if st == 200:
                out = json.loads(b)['outputs'][0]
                check(out['data'] == [0.0, 1.0, 2.0], f'keep-alive request {i} answers its own data', str(out)[:200])
        check(got == [200] * 4, 'four requests 1 s apart on one keep-alive connection (4 s open) are all answered',
              str(got))
        t = closed_after(k, b'', 10)
        check(t is not None and 1.5 <= t <= 4.0, 'the idle keep-alive connection is closed 2-4 s after its last response',
              f'closed after {t} s' if t else 'still open after 10 s')
        check(s.req('GET', '/v2/health/live')[0] == 200, 'live after the closed connections')
    finally:
        s.finish()
    s = Server({'h': (['N', 3], None)}, extra=['--header-timeout', '0'], tag='_off')
    try:
        t = closed_after(socket.create_connection(('127.0.0.1', s.port)), b'', 3.5)
        check(t is None, '--header-timeout 0: a silent connection stays open past 3.5 s', f'closed after {t} s')
    finally:
        s.finish()
    r = subprocess.run([TOPLU, 'serve', '--header-timeout', '-1', 'x.onnx'], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and '--header-timeout' in r.stderr, '--header-timeout -1 is a usage error naming the flag',
          f'{r.returncode} {r.stderr[:300]}')


def case_unload_ready():
    models = {'good': (['N', 3], {'max_batch_size': 4}), 'broken': (None, None), 'gone': (None, None)}
    s = Server(models)
    try:
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 503 and 'broken' in error_of(b), 'ready is 503 while models failed at start-up', f'{st} {b[:300]}')
        # (a) a failed reload, then an explicit unload
        with open(os.path.join(s.repo, 'good', 'config.json'), 'w') as f:
            f.write('{"max_batch_size": "many"}')
        st, _, b = s.req('POST', '/v2/repository/models/good/load')
        check(st == 400, 'a reload with a broken config.json is 400', f'{st} {b[:300]}')
        idx = json.loads(s.req('POST', '/v2/repository/index')[2])
        mine = [m for m in idx if m['name'] == 'good']
        check(len(mine) == 1 and mine[0].get('version') == '1' and mine[0].get('state') == 'READY'
              and 'max_batch_size' in mine[0].get('reason', ''),
              'after the failed reload the index has one READY entry for good, version 1, the failure as its reason',
              str(mine))
        keys = [(m['name'], m.get('version')) for m in idx]
        check(len(keys) == len(set(keys)), 'one index entry per (name, version)', str(keys))
        st, _, b = s.req('POST', '/v2/repository/models/good/unload')
        check(st == 200, 'unload of the model whose reload failed: 200', f'{st} {b[:300]}')
        idx = s.index()
        check(idx.get('good', {}).get('state') == 'UNAVAILABLE' and idx['good'].get('reason') == 'unloaded',
              'the index says good is unloaded, not the stale load error', str(idx.get('good')))
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 503 and "'good'" not in error_of(b) and 'broken' in error_of(b),
              'ready no longer names good after its unload (still 503 for the start-up failures)', f'{st} {b[:300]}')
        # (b) a model that failed at start-up: unload it; and one removed from the repository
        st, _, b = s.req('POST', '/v2/repository/models/broken/unload')
        check(st == 200, 'unload of a model that failed to load: 200', f'{st} {b[:300]}')
        st, _, b = s.req('POST', '/v2/repository/models/broken/unload')
        check(st == 200, 'a second unload of it: 200, as Triton answers (no effect)', f'{st} {b[:300]}')
        shutil.rmtree(os.path.join(s.repo, 'gone'))
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 503 and 'gone' in error_of(b) and '1 model(s)' in error_of(b),
              'ready is 503 for the one model left failed', f'{st} {b[:300]}')
        st, _, b = s.req('POST', '/v2/repository/models/gone/load')
        check(st == 404 and "'gone'" in error_of(b), 'load of a removed model: 404 naming it', f'{st} {b[:300]}')
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 200, 'ready is 200 once no failed model is left', f'{st} {b[:300]}')
        idx = s.index()
        check('gone' not in idx and 'broken' in idx and idx['broken'].get('reason') == 'unloaded',
              'index: the removed model is gone, the unloaded one says unloaded', str(idx))
        # (11) repository actions: unknown ones 404 whatever the method, known ones 405 for GET
        for method in ('GET', 'POST'):
            st, _, b = s.req(method, '/v2/repository/models/good/foo')
            check(st == 404, f'{method} /v2/repository/models/good/foo: 404', f'{st} {b[:200]}')
            st, _, b = s.req(method, '/v2/repository/nothing')
            check(st == 404, f'{method} /v2/repository/nothing: 404', f'{st} {b[:200]}')
        st, h, b = s.req('GET', '/v2/repository/models/good/load')
        check(st == 405 and h.get('allow') == 'POST', 'GET .../load: 405 with Allow: POST', f'{st} {h} {b[:200]}')
        # (12) max_batch_size_source after a load with parameters.config
        os.remove(os.path.join(s.repo, 'good', 'config.json'))
        st, _, b = s.req('POST', '/v2/repository/models/good/load',
                         {'parameters': {'config': json.dumps({'max_batch_size': 2, 'dynamic_batching': {}})}})
        check(st == 200, 'load with parameters.config: 200', f'{st} {b[:300]}')
        cfg = json.loads(s.req('GET', '/v2/models/good/config')[2])
        check(cfg.get('max_batch_size') in (2, '2')
              and cfg.get('parameters', {}).get('max_batch_size_source', {}).get('string_value') == 'parameters.config',
              'max_batch_size_source is parameters.config', str(cfg)[:400])
        with open(os.path.join(s.repo, 'good', 'config.json'), 'w') as f:
            f.write('{"max_batch_size": 3}')
        check(s.req('POST', '/v2/repository/models/good/load')[0] == 200, 'reload from config.json')
        cfg = json.loads(s.req('GET', '/v2/models/good/config')[2])
        check(cfg.get('parameters', {}).get('max_batch_size_source', {}).get('string_value') == 'config.json',
              'then max_batch_size_source is config.json', str(cfg)[:400])
    finally:
        s.finish()
    # (10) --model-name must be a name the repository API takes
    model = os.path.join(WORK, CASE, 'm.onnx')
    identity_model(model, ['N', 3])
    for bad in ('a/b', '..', '.', ''):
        r = subprocess.run([TOPLU, 'serve', model, '--model-name', bad, '--http-port', '0'],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and '--model-name' in r.stderr and 'not a model name' in r.stderr,
              f'--model-name {bad!r}: exit 2 saying it is not a model name', f'{r.returncode} {r.stderr[-300:]}')


def case_no_batch_dim():
    vad = EXTRA[0] if EXTRA else os.environ.get('TOPLU_VAD_MODEL', '')
    if not os.path.isfile(vad):
        raise Failure(f'the silero VAD model {vad!r} is missing (argv[4] or TOPLU_VAD_MODEL)')
    os.makedirs(os.path.join(WORK, CASE), exist_ok=True)
    s = Server({'fixed': ([2, 3], None), 'free': (['N', 3], None)})
    try:
        cfg = json.loads(s.req('GET', '/v2/models/free/config')[2])
        src = cfg.get('parameters', {}).get('max_batch_size_source', {}).get('string_value', '')
        check(int(cfg.get('max_batch_size', 0)) > 0 and 'planner' in src,
              'a model with a batch dim and no config still gets the planner\'s batch size', str(cfg)[:400])
        os.makedirs(os.path.join(s.repo, 'vad', '1'))
        shutil.copy(vad, os.path.join(s.repo, 'vad', '1', 'model.onnx'))
        st, _, b = s.req('POST', '/v2/repository/models/vad/load')
        check(st == 200, 'the VAD without config.json loads', f'{st} {b[:400]}')
        for name, inp in (('vad', "'state'"), ('fixed', "'x'")):
            cfg = json.loads(s.req('GET', f'/v2/models/{name}/config')[2])
            src = cfg.get('parameters', {}).get('max_batch_size_source', {}).get('string_value', '')
            check(cfg.get('max_batch_size') in (0, '0') and 'no batch dim' in src and inp in src,
                  f'{name}: max_batch_size 0, its source saying the model has no batch dim (input {inp})', str(cfg)[:500])
            lines = [ln for ln in s.stderr().splitlines() if f"model '{name}' version 1: max_batch_size 0" in ln]
            check(len(lines) == 1 and 'no batch dim' in lines[0], f'{name}: the load note says why', '\n'.join(lines))
        st, _, b = s.req('POST', '/v2/models/fixed/infer', infer_body([2, 3]))
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == list(range(6)), 'fixed serves its whole [2, 3] shape',
              f'{st} {b[:300]}')
        md = json.loads(s.req('GET', '/v2/models/vad')[2])
        shapes = {i['name']: i['shape'] for i in md['inputs']}
        check(shapes.get('state') == [2, -1, 128], 'vad metadata: state [2, -1, 128], no batch dim added', str(md)[:400])
        inputs = [{'name': 'input', 'shape': [1, 512], 'datatype': 'FP32', 'data': [0.0] * 512},
                  {'name': 'state', 'shape': [2, 1, 128], 'datatype': 'FP32', 'data': [0.0] * 256},
                  {'name': 'sr', 'shape': [], 'datatype': 'INT64', 'data': [16000]}]
        st, _, b = s.req('POST', '/v2/models/vad/infer', {'inputs': inputs})
        outs = {o['name']: o for o in json.loads(b).get('outputs', [])} if st == 200 else {}
        check(st == 200 and outs.get('output', {}).get('shape') == [1, 1] and 0 <= outs['output']['data'][0] < 0.5,
              'vad answers a silent 512-sample chunk with a low speech probability', f'{st} {b[:400]}')
        st, _, b = s.req('GET', '/v2/health/ready')
        check(st == 200, 'ready with both', f'{st} {b[:200]}')
    finally:
        s.finish()


def gather_model(path):
    """x FP32 [N, 3] -> y (Identity) and i INT64 [N, 1] -> z = Gather([10, 20], i): an index the
    warm-up reads from its file decides whether the warm-up run succeeds (zeros would)."""
    from onnx import numpy_helper
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3])
    i = helper.make_tensor_value_info('i', TensorProto.INT64, ['N', 1])
    y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3])
    z = helper.make_tensor_value_info('z', TensorProto.FLOAT, ['N', 1])
    t = numpy_helper.from_array(np.array([10, 20], np.float32), 't')
    g = helper.make_graph([helper.make_node('Identity', ['x'], ['y']), helper.make_node('Gather', ['t', 'i'], ['z'])],
                          'gather', [x, i], [y, z], initializer=[t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='test_serve_gaps')
    m.ir_version = 8
    onnx.checker.check_model(m)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(m, path)


def case_warmup_file():
    def cfg(fname, bs=2):
        return {'max_batch_size': 4, 'model_warmup': [{'name': 'w', 'batch_size': bs, 'inputs': {
            'x': {'data_type': 'TYPE_FP32', 'dims': [3], 'input_data_file': fname}}}]}
    models = {'ok': (['N', 3], cfg('x.bin')), 'short': (['N', 3], cfg('x.bin')), 'missing': (['N', 3], cfg('nope.bin')),
              'long': (['N', 3], cfg('x.bin')), 'plain': (['N', 3], None)}
    # the Server writes the repository afresh: put the warmup files in after, then reload
    s = Server(models)
    try:
        for name, data in (('ok', np.array([1, 2, 3], '<f4').tobytes()), ('short', np.array([1, 2], '<f4').tobytes()),
                           ('long', np.arange(5, dtype='<f4').tobytes())):
            os.makedirs(os.path.join(s.repo, name, 'warmup'))
            with open(os.path.join(s.repo, name, 'warmup', 'x.bin'), 'wb') as f:
                f.write(data)
        idx = s.index()
        for name in ('ok', 'short', 'missing', 'long'):
            r = idx.get(name, {}).get('reason', '')
            check(idx.get(name, {}).get('state') == 'UNAVAILABLE' and 'input_data_file' in r and
                  os.path.join(s.repo, name, 'warmup') in r,
                  f'{name}: without its warmup file the start-up load failed naming the file', str(idx.get(name)))
        st, _, b = s.req('POST', '/v2/repository/models/ok/load')
        check(st == 200, 'ok: a 12-byte file for a [3] FP32 input loads', f'{st} {b[:300]}')
        st, _, b = s.req('POST', '/v2/repository/models/long/load')
        check(st == 200, 'long: a 20-byte file loads (its first 12 bytes, as Triton)', f'{st} {b[:300]}')
        st, _, b = s.req('POST', '/v2/repository/models/short/load')
        e = error_of(b)
        check(st == 400 and 'x.bin' in e and '8 bytes' in e and '12' in e and "'short'" in e,
              'short: an 8-byte file is a load error naming the model, the file and both sizes', f'{st} {e[:400]}')
        st, _, b = s.req('POST', '/v2/repository/models/missing/load')
        e = error_of(b)
        check(st != 200 and 'nope.bin' in e and "'missing'" in e, 'missing: a load error naming the file', f'{st} {e[:400]}')
        st, _, b = s.req('POST', '/v2/models/ok/infer', infer_body([1, 3]))
        check(st == 200, 'ok serves', f'{st} {b[:200]}')
        # the file's values are what runs: a Gather index from the file
        gc = {'max_batch_size': 4, 'model_warmup': [{'name': 'g', 'batch_size': 2, 'inputs': {
            'x': {'data_type': 'TYPE_FP32', 'dims': [3], 'zero_data': True},
            'i': {'data_type': 'TYPE_INT64', 'dims': [1], 'input_data_file': 'i.bin'}}}]}
        gather_model(os.path.join(s.repo, 'g', '1', 'model.onnx'))
        os.makedirs(os.path.join(s.repo, 'g', 'warmup'))
        with open(os.path.join(s.repo, 'g', 'config.json'), 'w') as f:
            json.dump(gc, f)
        for idx_value, want in ((7, 400), (1, 200)):
            with open(os.path.join(s.repo, 'g', 'warmup', 'i.bin'), 'wb') as f:
                f.write(np.array([idx_value], '<i8').tobytes())
            st, _, b = s.req('POST', '/v2/repository/models/g/load')
            check(st == want and (want == 200 or 'model_warmup' in error_of(b)),
                  f'a warm-up Gather index {idx_value} read from the file: {want}', f'{st} {b[:300]}')
    finally:
        s.finish()


def case_reshape():
    import concurrent.futures
    import struct
    vad = EXTRA[0] if EXTRA else os.environ.get('TOPLU_VAD_MODEL', '')
    mnist = EXTRA[1] if len(EXTRA) > 1 else os.environ.get('TOPLU_MNIST_MODEL', '')
    for what, path in (('silero VAD', vad), ('MNIST', mnist)):
        if not os.path.isfile(path):
            raise Failure(f'the {what} model {path!r} is missing (argv[4] and argv[5], or TOPLU_VAD_MODEL, TOPLU_MNIST_MODEL)')
    io = lambda name, dims, reshape=None: dict({'name': name, 'data_type': 'TYPE_FP32', 'dims': dims},
                                                **({'reshape': {'shape': reshape}} if reshape is not None else {}))
    models = {
        # [N, 4] served as [N, 2, 2], both ways
        'r4': (['N', 4], {'max_batch_size': 8, 'dynamic_batching': {'max_queue_delay_microseconds': 20000},
                          'response_cache': {'enable': True},
                          'input': [io('x', [2, 2], [4])], 'output': [io('y', [2, 2], [4])],
                          'model_warmup': [{'name': 'w', 'batch_size': 3, 'inputs': {
                              'x': {'data_type': 'TYPE_FP32', 'dims': [2, 2], 'random_data': True}}}]}),
        # warm-up data has the clients' shape ([2, 2]), not the model's
        'warm4': (['N', 4], {'max_batch_size': 8, 'input': [io('x', [2, 2], [4])], 'model_warmup': [
            {'name': 'w', 'inputs': {'x': {'data_type': 'TYPE_FP32', 'dims': [4], 'zero_data': True}}}]}),
        'plain4': (['N', 4], {'max_batch_size': 8}),
        # refusals: element counts differ; -1s that cannot pair; a name the model lacks; reshape against the model
        'count': (['N', 4], {'max_batch_size': 8, 'input': [io('x', [2, 3], [4])]}),
        'wild': (['N', 4], {'max_batch_size': 8, 'input': [io('x', [-1, 2], [4])]}),
        'noname': (['N', 4], {'max_batch_size': 8, 'input': [io('nope', [2, 2], [4])]}),
        'outcount': (['N', 4], {'max_batch_size': 8, 'output': [io('y', [5], [4])]}),
        'contra': (['N', 4], {'max_batch_size': 8, 'input': [io('x', [4], [2, 2])]}),
    }
    s = Server(models, extra=['--cache-size', str(1 << 20)])
    try:
        idx = s.index()
        for name, words in (('count', ('input[0].reshape.shape', '[4]', '[2, 3]', 'element')),
                            ('wild', ('input[0].reshape.shape', '-1')),
                            ('noname', ('input[0].name', "'nope'")),
                            ('outcount', ('output[0].reshape.shape', '[5]', 'element')),
                            ('contra', ('input[0].reshape.shape', "'x'")),
                            ('warm4', ('model_warmup[0].inputs.x.dims', '[4]', '[2, 2]'))):
            r = idx.get(name, {})
            check(r.get('state') == 'UNAVAILABLE' and all(w in r.get('reason', '') for w in words),
                  f'{name}: the config fails to load naming {words}', str(r))
        check(idx.get('r4', {}).get('state') == 'READY', 'r4 ([2, 2] -> [4], warm-up data [2, 2]) loads', str(idx.get('r4')))
        md = json.loads(s.req('GET', '/v2/models/r4')[2])
        check(md['inputs'][0]['shape'] == [-1, 2, 2] and md['outputs'][0]['shape'] == [-1, 2, 2],
              'r4 metadata: input and output [-1, 2, 2] (the dims clients use)', str(md))
        cfg = json.loads(s.req('GET', '/v2/models/r4/config')[2])
        check(cfg['input'][0].get('dims') == [2, 2] and cfg['input'][0].get('reshape') == {'shape': [4]}
              and cfg['output'][0].get('reshape') == {'shape': [4]}, 'r4 /config: dims [2, 2] and reshape [4]', str(cfg)[:400])

        def one(rows, seed):
            x = (np.arange(rows * 4, dtype=np.float32) + 1000 * seed).reshape(rows, 2, 2)
            body = {'inputs': [{'name': 'x', 'shape': [rows, 2, 2], 'datatype': 'FP32', 'data': x.ravel().tolist()}]}
            st, _, b = s.req('POST', '/v2/models/r4/infer', body)
            return rows, x, st, b
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            got = list(ex.map(lambda k: one(1 + k % 4, k), range(16)))
        bad = [(rows, st, b[:200]) for rows, x, st, b in got
               if st != 200 or json.loads(b)['outputs'][0]['shape'] != [rows, 2, 2]
               or json.loads(b)['outputs'][0]['data'] != x.ravel().tolist()]
        check(not bad, '16 concurrent requests of 1..4 rows [rows, 2, 2] each get their own rows back as [rows, 2, 2]',
              str(bad[:3]))
        st, _, b = s.req('GET', '/v2/models/r4/stats')
        bs = json.loads(b)['model_stats'][0].get('batch_stats', []) if st == 200 else []
        check(any(int(e.get('batch_size', 0)) > 4 for e in bs), 'and some of them ran together (a batch over 4 rows)',
              str(bs)[:300])
        for shape in ([1, 4], [1, 2, 3], [4]):
            n = int(np.prod(shape))
            st, _, b = s.req('POST', '/v2/models/r4/infer',
                             {'inputs': [{'name': 'x', 'shape': shape, 'datatype': 'FP32', 'data': [0.0] * n}]})
            check(st == 400 and "'x'" in error_of(b), f'r4: shape {shape} (not [rows, 2, 2]) is 400 naming the input',
                  f'{st} {b[:300]}')
        # the response cache: a repeat is a hit with the same answer; other data is not
        _, x, st1, b1 = one(3, 77)
        _, _, st2, b2 = one(3, 77)
        _, x3, st3, b3 = one(3, 78)
        stats = json.loads(s.req('GET', '/v2/models/r4/stats')[2])['model_stats'][0]['inference_stats']
        check(st1 == st2 == st3 == 200 and b1 == b2 and json.loads(b3)['outputs'][0]['data'] == x3.ravel().tolist()
              and int(stats['cache_hit']['count']) >= 1,
              'r4 with the response cache: a repeat is a hit with the same answer, other data its own', f'{stats} {b3[:200]}')
        # the plain model answers [rows, 4]: the reshape is the config's, not the model's
        st, _, b = s.req('POST', '/v2/models/plain4/infer', infer_body([2, 4]))
        check(st == 200 and json.loads(b)['outputs'][0]['shape'] == [2, 4], 'plain4 answers [2, 4]', f'{st} {b[:200]}')

        # MNIST, Triton's densenet_onnx pattern, against the same model without a config
        for name, cfg_text in (('mnist_rs', 'max_batch_size: 0\n'
                                'input [{ name: "Input3" data_type: TYPE_FP32 dims: [1, 28, 28] reshape { shape: [1, 1, 28, 28] } }]\n'
                                'output [{ name: "Plus214_Output_0" data_type: TYPE_FP32 dims: [10] reshape { shape: [1, 10] } }]\n'),
                               ('mnist', None)):
            os.makedirs(os.path.join(s.repo, name, '1'))
            shutil.copy(mnist, os.path.join(s.repo, name, '1', 'model.onnx'))
            if cfg_text:
                with open(os.path.join(s.repo, name, 'config.pbtxt'), 'w') as f:
                    f.write(cfg_text)
            st, _, b = s.req('POST', f'/v2/repository/models/{name}/load')
            check(st == 200, f'{name} loads', f'{st} {b[:400]}')
        md = json.loads(s.req('GET', '/v2/models/mnist_rs')[2])
        check(md['inputs'][0]['shape'] == [1, 28, 28] and md['outputs'][0]['shape'] == [10],
              'mnist_rs metadata: input [1, 28, 28], output [10]', str(md))
        rng = np.random.default_rng(5)
        for k in range(3):
            img = rng.random((28, 28), dtype=np.float32) * (k + 1)
            st, _, b = s.req('POST', '/v2/models/mnist/infer', {'inputs': [
                {'name': 'Input3', 'shape': [1, 1, 28, 28], 'datatype': 'FP32', 'data': img.ravel().tolist()}]})
            want = json.loads(b)['outputs'][0] if st == 200 else {}
            st2, _, b2 = s.req('POST', '/v2/models/mnist_rs/infer', {'inputs': [
                {'name': 'Input3', 'shape': [1, 28, 28], 'datatype': 'FP32', 'data': img.ravel().tolist()}]})
            out = json.loads(b2)['outputs'][0] if st2 == 200 else {}
            check(st == 200 and want.get('shape') == [1, 10] and out.get('shape') == [10]
                  and out.get('data') == want.get('data') and len(out.get('data', [])) == 10,
                  f'image {k}: mnist_rs answers [10], the values of the plain model\'s [1, 10]', f'{st} {st2} {b2[:300]}')
            # binary tensors both ways
            hdr = json.dumps({'inputs': [{'name': 'Input3', 'shape': [1, 28, 28], 'datatype': 'FP32',
                                          'parameters': {'binary_data_size': img.nbytes}}],
                              'parameters': {'binary_data_output': True}}).encode()
            st3, h3, b3 = s.req('POST', '/v2/models/mnist_rs/infer', hdr + img.astype('<f4').tobytes(),
                                {'Inference-Header-Content-Length': str(len(hdr))})
            hl = int(h3.get('inference-header-content-length', len(b3)))
            o3 = json.loads(b3[:hl])['outputs'][0] if st3 == 200 else {}
            vals = list(struct.unpack('<10f', b3[hl:])) if st3 == 200 and len(b3) - hl == 40 else []
            check(o3.get('shape') == [10] and o3.get('parameters', {}).get('binary_data_size') == 40
                  and np.allclose(vals, want.get('data', [0] * 10), rtol=0, atol=1e-6),
                  f'image {k}: binary in and out, shape [10], 40 bytes, the same values', f'{st3} {b3[:300]}')
        st, _, b = s.req('POST', '/v2/models/mnist_rs/infer', {'inputs': [
            {'name': 'Input3', 'shape': [1, 1, 28, 28], 'datatype': 'FP32', 'data': [0.0] * 784}]})
        check(st == 400 and "'Input3' as served" in error_of(b) and '[1, 28, 28]' in error_of(b),
              'mnist_rs: the model\'s own [1, 1, 28, 28] is 400 naming the served [1, 28, 28]',
              f'{st} {b[:300]}')

        # silero VAD: 'sr' an int64 scalar, as Triton configs write it (dims [1], reshape [])
        for name, cfg_text in (('vad_rs', 'max_batch_size: 0\ninput [\n'
                                '  { name: "input" data_type: TYPE_FP32 dims: [1, -1] },\n'
                                '  { name: "state" data_type: TYPE_FP32 dims: [2, 1, 128] },\n'
                                '  { name: "sr" data_type: TYPE_INT64 dims: [ 1 ] reshape: { shape: [ ] } }\n]\n'),
                               ('vad', 'max_batch_size: 0\n')):
            os.makedirs(os.path.join(s.repo, name, '1'))
            shutil.copy(vad, os.path.join(s.repo, name, '1', 'model.onnx'))
            with open(os.path.join(s.repo, name, 'config.pbtxt'), 'w') as f:
                f.write(cfg_text)
            st, _, b = s.req('POST', f'/v2/repository/models/{name}/load')
            check(st == 200, f'{name} loads', f'{st} {b[:400]}')
        md = json.loads(s.req('GET', '/v2/models/vad_rs')[2])
        shapes = {i['name']: i['shape'] for i in md.get('inputs', [])}
        check(shapes.get('sr') == [1] and shapes.get('input') == [1, -1], 'vad_rs metadata: sr [1]', str(md)[:400])
        t = np.arange(512, dtype=np.float32) / 16000
        chunk = (0.5 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
        state = (rng.random(256, dtype=np.float32) - 0.5) * 0.2

        def vad_body(sr_shape):
            return {'inputs': [{'name': 'input', 'shape': [1, 512], 'datatype': 'FP32', 'data': chunk.tolist()},
                               {'name': 'state', 'shape': [2, 1, 128], 'datatype': 'FP32', 'data': state.tolist()},
                               {'name': 'sr', 'shape': sr_shape, 'datatype': 'INT64', 'data': [16000]}]}
        st, _, b = s.req('POST', '/v2/models/vad/infer', vad_body([]))
        want = {o['name']: o for o in json.loads(b)['outputs']} if st == 200 else {}
        st2, _, b2 = s.req('POST', '/v2/models/vad_rs/infer', vad_body([1]))
        got = {o['name']: o for o in json.loads(b2)['outputs']} if st2 == 200 else {}
        check(st == 200 and st2 == 200 and set(got) == set(want) == {'output', 'stateN'}
              and all(got[k]['shape'] == want[k]['shape'] and got[k]['data'] == want[k]['data'] for k in want)
              and want['output']['shape'] == [1, 1],
              'vad_rs with sr [1] answers what vad does with the scalar sr []', f'{st} {st2} {b2[:300]}')
        st, _, b = s.req('POST', '/v2/models/vad_rs/infer', vad_body([]))
        check(st == 400 and "'sr' as served" in error_of(b) and 'is [1]' in error_of(b),
              'vad_rs: a scalar sr is 400 naming it and its dims [1]', f'{st} {b[:300]}')
    finally:
        s.finish()


def two_output_model(path):
    """x [N, 3] -> y = x (Identity), z = -x (Neg)."""
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ['N', 3]) for n in ('y', 'z')]
    g = helper.make_graph([helper.make_node('Identity', ['x'], ['y']), helper.make_node('Neg', ['x'], ['z'])],
                          'two', [x], outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.save(m, path)


def case_config_outputs():
    only_z = {'max_batch_size': 4, 'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [3]}],
              'output': [{'name': 'z', 'data_type': 'TYPE_FP32', 'dims': [3]}]}
    s = Server({'part': (['N', 3], None), 'all': (['N', 3], {'max_batch_size': 4})})
    try:
        for name, cfg in (('part', only_z), ('all', None)):  # the two-output model in both folders
            two_output_model(os.path.join(s.repo, name, '1', 'model.onnx'))
            if cfg:
                with open(os.path.join(s.repo, name, 'config.json'), 'w') as f:
                    json.dump(cfg, f)
            st, _, b = s.req('POST', f'/v2/repository/models/{name}/load')
            check(st == 200, f'{name}: the two-output model loads', b[:300])
        body = infer_body([2, 3])
        st, _, b = s.req('POST', '/v2/models/part/infer', body)
        outs = json.loads(b).get('outputs', []) if st == 200 else []
        check(st == 200 and [o['name'] for o in outs] == ['z'], 'no "outputs" asked: only the config\'s z comes',
              f'{st} {b[:300]}')
        check(st == 200 and outs and outs[0]['data'] == [-float(v) for v in range(6)] and outs[0]['shape'] == [2, 3],
              'z holds -x', b[:300])
        st, _, b = s.req('POST', '/v2/models/part/infer', dict(body, outputs=[{'name': 'y'}]))
        check(st == 400 and "unexpected inference output 'y'" in error_of(b) and "'part'" in error_of(b),
              'asking for y, which the config does not list: 400 naming it and the model', f'{st} {b[:300]}')
        st, _, b = s.req('POST', '/v2/models/part/infer', dict(body, outputs=[{'name': 'z'}]))
        check(st == 200 and [o['name'] for o in json.loads(b)['outputs']] == ['z'], 'asking for z: z', f'{st} {b[:300]}')
        md = json.loads(s.req('GET', '/v2/models/part')[2])
        check([o['name'] for o in md.get('outputs', [])] == ['z'], 'metadata lists z alone', str(md)[:300])
        cfg = json.loads(s.req('GET', '/v2/models/part/config')[2])
        check([o['name'] for o in cfg.get('output', [])] == ['z'], '/config lists z alone', str(cfg)[:300])
        st, _, b = s.req('POST', '/v2/models/all/infer', body)
        check(st == 200 and [o['name'] for o in json.loads(b)['outputs']] == ['y', 'z'],
              'a config without output[]: both outputs', f'{st} {b[:300]}')
        md = json.loads(s.req('GET', '/v2/models/all')[2])
        check([o['name'] for o in md.get('outputs', [])] == ['y', 'z'], 'its metadata lists both', str(md)[:300])
    finally:
        s.finish()
    # an output[] entry's dims: shown by /config and the metadata (the model's free dims were), and held to (a
    # shape that departs from them was passed on): an Identity [N, M] whose config fixes its output to [4]
    fixed = {'max_batch_size': 4, 'output': [{'name': 'y', 'data_type': 'TYPE_FP32', 'dims': [4]}]}
    s = Server({'od': (['N', 'M'], fixed)}, tag='_dims')
    try:
        cfg = json.loads(s.req('GET', '/v2/models/od/config')[2])
        md = json.loads(s.req('GET', '/v2/models/od')[2])
        check([o.get('dims') for o in cfg.get('output', [])] == [[4]] and
              [o.get('shape') for o in md.get('outputs', [])] == [[-1, 4]],
              "the config's output dims are shown in /config and the metadata", f'{cfg} {md}')
        st, _, b = s.req('POST', '/v2/models/od/infer', infer_body([1, 4]))
        check(st == 200, 'a request whose output fits the dims: 200', f'{st} {b[:300]}')
        st, _, b = s.req('POST', '/v2/models/od/infer', infer_body([1, 5]))
        check(st == 500 and "does not fit the config's output[0].dims [4]" in error_of(b),
              "an output that departs from the config's dims: 500 saying so", f'{st} {b[:300]}')
    finally:
        s.finish()


def seq_first_attention_model(path):
    """x [S, N, 4] (sequence first, as nn.TransformerEncoder with batch_first False exports): attention over S
    per batch column, y = softmax(xt @ xt^T) @ xt transposed back, y [S, N, 4].  Dim 0 is free and every
    output's dim 0 follows it, but batching requests along it mixes them."""
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['S', 'N', 4])
    y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['S', 'N', 4])
    nodes = [helper.make_node('Transpose', ['x'], ['xt'], perm=[1, 0, 2]),
             helper.make_node('Transpose', ['xt'], ['xtt'], perm=[0, 2, 1]),
             helper.make_node('MatMul', ['xt', 'xtt'], ['s']),
             helper.make_node('Softmax', ['s'], ['p'], axis=-1),
             helper.make_node('MatMul', ['p', 'xt'], ['o']),
             helper.make_node('Transpose', ['o'], ['y'], perm=[1, 0, 2])]
    m = helper.make_model(helper.make_graph(nodes, 'seqfirst', [x], [y]), opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.save(m, path)


def seq_first_ref(x):
    """seq_first_attention_model's answer in numpy: x [S, N, 4] -> softmax(xt @ xt^T) @ xt, transposed back."""
    xt = x.transpose(1, 0, 2)
    sc = xt @ xt.transpose(0, 2, 1)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ xt).transpose(1, 0, 2)


def case_rows_mix():
    s = Server({'seqfirst': (['N', 3], None)})
    try:
        seq_first_attention_model(os.path.join(s.repo, 'seqfirst', '1', 'model.onnx'))
        st, _, b = s.req('POST', '/v2/repository/models/seqfirst/load')
        check(st == 200, 'the sequence-first model loads', f'{st} {b[:300]}')
        cfg = json.loads(s.req('GET', '/v2/models/seqfirst/config')[2])
        src = cfg.get('parameters', {}).get('max_batch_size_source', {}).get('string_value', '')
        check(cfg.get('max_batch_size') in (0, '0') and 'does not keep the rows' in src,
              'max_batch_size 0, its source saying the rows of dim 0 mix', str(cfg)[:500])
        lines = [ln for ln in s.stderr().splitlines() if 'warning' in ln and 'does not keep the rows of dim 0 apart' in ln]
        check(len(lines) == 1 and "'seqfirst'" in lines[0] and 'served without batching' in lines[0],
              'the load warns, naming the model', s.stderr()[-1500:])
        x = np.random.default_rng(3).standard_normal((5, 1, 4)).astype(np.float32)
        want = seq_first_ref(x)
        body = {'inputs': [{'name': 'x', 'shape': [5, 1, 4], 'datatype': 'FP32', 'data': x.ravel().tolist()}]}
        st, _, b = s.req('POST', '/v2/models/seqfirst/infer', body)
        got = np.array(json.loads(b)['outputs'][0]['data'], np.float32).reshape(5, 1, 4) if st == 200 else None
        check(got is not None and np.abs(got - want).max() < 1e-5,
              'a [5, 1, 4] request answers attention over its own 5 steps (it was batched and padded along them)',
              f'{st} {b[:300]}')
        # a configuration that asks for batching keeps it (as Triton), with a warning, and no zero rows are added
        os.makedirs(os.path.join(s.repo, 'seqcfg', '1'))
        seq_first_attention_model(os.path.join(s.repo, 'seqcfg', '1', 'model.onnx'))
        with open(os.path.join(s.repo, 'seqcfg', 'config.json'), 'w') as f:
            json.dump({'max_batch_size': 8}, f)
        st, _, b = s.req('POST', '/v2/repository/models/seqcfg/load')
        cfg = json.loads(s.req('GET', '/v2/models/seqcfg/config')[2])
        check(st == 200 and cfg.get('max_batch_size') in (8, '8'), 'config.json max_batch_size 8: kept', str(cfg)[:300])
        lines = [ln for ln in s.stderr().splitlines() if "'seqcfg'" in ln and 'may not keep the rows' in ln]
        check(len(lines) == 1 and 'without padding rows' in lines[0], 'a warning says the rows may mix', s.stderr()[-800:])
        x3 = x[:3]
        want3 = seq_first_ref(x3)
        body = {'inputs': [{'name': 'x', 'shape': [3, 1, 4], 'datatype': 'FP32', 'data': x3.ravel().tolist()}]}
        st, _, b = s.req('POST', '/v2/models/seqcfg/infer', body)
        got = np.array(json.loads(b)['outputs'][0]['data'], np.float32).reshape(3, 1, 4) if st == 200 else None
        check(got is not None and np.abs(got - want3).max() < 1e-5,
              'a [3, 1, 4] request alone: its own answer (3 rows run as 3, not padded to 4)', f'{st} {b[:300]}')
    finally:
        s.finish()


def case_routes_logs():
    s = Server({'p': (['N', 4], {'max_batch_size': 4})}, extra=['--access-log'])
    try:
        for method, path in (('POST', '/v2/models/p/foo'), ('POST', '/v2/models/p/generate'),
                             ('POST', '/v2/models/p/generate_stream'), ('POST', '/v2/models/nosuch/foo'),
                             ('POST', '/v2/health/foo'), ('GET', '/v2/models/p/foo'), ('PUT', '/v2/health/foo')):
            st, _, b = s.req(method, path, {} if method != 'GET' else None)
            check(st == 404 and 'no such endpoint' in error_of(b), f'{method} {path}: 404 no such endpoint', f'{st} {b[:200]}')
        st, hd, b = s.req('POST', '/v2/models/p/ready', {})
        check(st == 405, 'POST to a known GET endpoint stays 405', f'{st} {b[:200]}')
        st, _, b = s.req('GET', '/v2/models/p/versions//ready')
        check(st == 404 and 'empty path segment' in error_of(b), 'versions//ready: 404 naming the empty segment', f'{st} {b[:200]}')
        st, _, b = s.req('GET', '/v2/models/' + 'a' * 300)
        check(st == 404 and 'path segment is 256 bytes or longer' in error_of(b), 'a 300-byte name: 404 saying why',
              f'{st} {b[:200]}')
        st, _, b = s.req('GET', '/v2/models/p/ready/')
        check(st == 200, 'one trailing slash is still the route', f'{st} {b[:200]}')
        # log lines cannot be forged through a decoded path
        forged = '2026-01-01T00:00:00.000Z note: POST /v2/models/p/infer 200 1 1 model=p'
        s.req('GET', '/v2/models/x%0A' + forged.replace(' ', '%20') + '%1B[31m')
        s.req('POST', '/v2/repository/models/x%0A2026-01-01T00:00:00Z%20error:%20fake/load', {})
        time.sleep(0.3)
        out, err = s.stdout(), s.stderr()
        check(not any(ln.startswith('2026-01-01') for ln in out.splitlines()), 'no forged access-log line', out[-600:])
        check(not any(ln.startswith('2026-01-01') for ln in err.splitlines()), 'no forged error-log line', err[-600:])
        check('\x1b' not in out and '\x1b' not in err, 'no raw ESC byte in either log', '')
        line = [ln for ln in out.splitlines() if '/v2/models/x' in ln]
        check(len(line) == 1 and '%0A2026-01-01' in line[0] and '%20' in line[0] and len(line[0].split(' ')) == 7,
              'the access line holds the path as one percent-encoded field (time, level, method, path, status, bytes, '
              'us: no model for an unknown one)', str(line))
        # Inference-Header-Content-Length 0: the whole body is JSON (Triton); whitespace around a value
        body = json.dumps(infer_body([1, 4]))
        st, _, b = s.req('POST', '/v2/models/p/infer', body, {'Inference-Header-Content-Length': '0'})
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [0, 1, 2, 3], 'header length 0: a JSON body', f'{st} {b[:200]}')
        sock = socket.create_connection(('127.0.0.1', s.port))
        try:
            raw = body.encode()
            req = (f'POST /v2/models/p/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {len(raw)}\r\n'
                   f'Inference-Header-Content-Length: {len(raw)} \t\r\n\r\n').encode() + raw
            st, b = raw_exchange(sock, req)
            check(st == 200, 'a header length with trailing whitespace is read', f'{st} {b[:200]}')
        finally:
            sock.close()
        # nested data: flattened whatever its structure; a wrong count names where it departs from the shape
        x = {'name': 'x', 'shape': [1, 4], 'datatype': 'FP32', 'data': [[1, 2], [3, 4]]}
        st, _, b = s.req('POST', '/v2/models/p/infer', {'inputs': [x]})
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [1, 2, 3, 4], '[[1,2],[3,4]] for [1,4]: four values',
              f'{st} {b[:200]}')
        x = {'name': 'x', 'shape': [2, 4], 'datatype': 'FP32', 'data': [[1, 2, 3, 4], [5, 6, 7]]}
        st, _, b = s.req('POST', '/v2/models/p/infer', {'inputs': [x]})
        check(st == 400 and "data[1]: 3 values where shape [2, 4] has 4 (dim 1)" in error_of(b),
              'a short row: 400 naming it', f'{st} {b[:200]}')
        # a client that closes before its answer gets an access line with nginx's 499 (none was written)
        sock = socket.create_connection(('127.0.0.1', s.port))
        sock.sendall(b'POST /v2/models/p/versions/1/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"inputs"')
        time.sleep(0.2)
        sock.close()
        time.sleep(0.5)
        line = [ln for ln in s.stdout().splitlines() if '/v2/models/p/versions/1/infer' in ln]
        check(len(line) == 1 and ' 499 0 ' in line[0], 'a request its client abandoned: one access line, status 499',
              str(line))
    finally:
        s.finish()
    # a priority above the levels is the default level, as Triton's SetPriority takes it (it was 400)
    cfg = {'max_batch_size': 4, 'dynamic_batching': {'priority_levels': 2, 'default_priority_level': 1},
           'response_cache': {'enable': True}}
    s = Server({'pc': (['N', 4], cfg)}, extra=['--cache-size', str(1 << 20)], tag='_prio')
    try:
        body = infer_body([1, 4])
        st, _, b = s.req('POST', '/v2/models/pc/infer', body)
        check(st == 200, 'a request at the default priority is answered (and cached)', f'{st} {b[:200]}')
        st, _, b = s.req('POST', '/v2/models/pc/infer', dict(body, parameters={'priority': 3}))
        check(st == 200, 'the same data at priority 3: 200 at the default level', f'{st} {b[:200]}')
    finally:
        s.finish()
    # -q still says the port (with --http-port 0 there was no way to learn it)
    mp = os.path.join(WORK, CASE + '_q.onnx')
    identity_model(mp, ['N', 4])
    p = subprocess.Popen([TOPLU, 'serve', mp, '--http-port', '0', '--host', '127.0.0.1', '-q'], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        check('listening on port ' in line and int(line.rsplit(' ', 1)[1]) > 0, '-q: the one line says the port', line)
    finally:
        p.terminate()
        p.wait(timeout=60)
    # --host :: takes IPv4 clients too (dual stack; libmicrohttpd's default IPV6_V6ONLY refused them)
    p = subprocess.Popen([TOPLU, 'serve', mp, '--http-port', '0', '--host', '::', '-q'], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        port = int(p.stderr.readline().rsplit(' ', 1)[1])
        with socket.create_connection(('127.0.0.1', port), timeout=30) as c:
            status, _ = raw_exchange(c, b'GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
        check(status == 200, '--host ::: an IPv4 client is answered', status)
    finally:
        p.terminate()
        p.wait(timeout=60)
    # a repository model without a configuration: the batch size toplu chooses comes with dynamic batching on, as
    # Triton's auto-complete (it ran every request alone)
    s = Server({'nc': (['N', 4], None), '.hid': (['N', 4], None)}, tag='_noconfig')
    try:
        # a hidden folder is skipped at start, saying so, and an explicit load refuses it the same way (it was
        # skipped silently, and the load tried it)
        check("folder '.hid' skipped: a hidden folder" in s.stderr(), 'a hidden folder is named in the log',
              s.stderr()[-800:])
        st, _, b = s.req('POST', '/v2/repository/models/.hid/load', {})
        check(st == 404 and 'hidden folder' in error_of(b), 'loading a hidden folder: 404 saying why', f'{st} {b[:300]}')
        st, _, b = s.req('GET', '/v2/models/nc/config')
        cfg = json.loads(b)
        check(st == 200 and cfg.get('max_batch_size', 0) > 0 and 'dynamic_batching' in cfg,
              'no configuration: max_batch_size chosen and dynamic batching on', b[:400])
        check('dynamic batching on' in s.stderr(), 'the log says dynamic batching is on', s.stderr()[-800:])
    finally:
        s.finish()
    # version folders that are no versions
    s = Server({'v': (['N', 4], {'max_batch_size': 4})}, tag='_versions')
    try:
        shutil.rmtree(os.path.join(s.repo, 'v', '1'))
        for folder in ('0', '01', 'latest'):
            identity_model(os.path.join(s.repo, 'v', folder, 'model.onnx'), ['N', 4])
        st, _, b = s.req('POST', '/v2/repository/models/v/load', {})
        e = error_of(b)
        check(st != 200 and all(f"'{f}'" in e for f in ('0', '01', 'latest')) and 'no version numbers' in e,
              'the load error names the folders skipped as no versions', f'{st} {b[:400]}')
    finally:
        s.finish()


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
    except Exception as e:  # noqa: BLE001 - a crash of the test fails it
        import traceback
        traceback.print_exc()
        FAILED.append(repr(e))
    if FAILED:
        print(f'\n{len(FAILED)} check(s) failed:')
        for f in FAILED:
            print('  - ' + f[:500])
        sys.exit(1)
    print('all checks passed')
