#!/usr/bin/python3
"""toplu serve over a model repository whose configurations are Triton's config.pbtxt files
(protobuf text format; tests/serve_pbtxt.cmake), over real HTTP, on tiny generated Identity models.

  test_serve_pbtxt.py TOPLU WORKDIR

Checks:
  - max_batch_size and dynamic_batching (preferred_batch_size given once, the delay) come from
    config.pbtxt: /v2/models/M/config shows them with max_batch_size_source "config.pbtxt", and
    32 requests from 8 concurrent clients run in batches of several rows
  - max_batch_size 0 without dynamic_batching: /config says so
  - the log line of ignored Triton fields names config.pbtxt
  - config.json beside config.pbtxt: the model is UNAVAILABLE naming both files
  - a syntax error: UNAVAILABLE with the file, line and column
  - a model with config.json alone is read as before (source "config.json")
  - a reload through the repository API rereads config.pbtxt

Exit status 0 pass, 1 fail (every failed check is listed).
"""
import http.client
import json
import os
import re
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402
from serve_harness import FAILED, Failure, check  # noqa: E402

TOPLU, WORK = sys.argv[1:3]


# As Triton users write them: comments, a list of one input, dims given once without brackets.
PB = '''# a Triton model configuration, protobuf text format
name: "pb"
platform: "onnxruntime_onnx"   # Triton's; toplu runs the model itself
max_batch_size: 8
input [
  {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 3 ]
  }
]
output {
  name: "y"
  data_type: TYPE_FP32
  dims: 3
}
dynamic_batching {
  preferred_batch_size: 8
  max_queue_delay_microseconds: 200000
}
instance_group [ { count: 1, kind: KIND_CPU } ]
'''

NOBATCH = '''name: "nobatch"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
'''

BAD = '''name: "bad"
max_batch_size: 4
dynamic_batching {
  max_queue_delay_microseconds 100
}
'''


def metric(text, name, model):
    total = None
    for ln in text.splitlines():
        if ln.startswith(name + '{') and f'model="{model}"' in ln:
            total = (total or 0) + float(ln.rsplit(' ', 1)[1])
    return total


def Server(files):
    """The models of files (name -> (dims, {config file name: text})) served from WORK/run."""
    return harness.RepoServer(TOPLU, os.path.join(WORK, 'run'), {k: (v[0], None) for k, v in files.items()},
                              files={k: v[1] for k, v in files.items()})


def infer_body(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    return json.dumps({'inputs': [{'name': 'x', 'shape': list(shape), 'datatype': 'FP32',
                                   'data': x.ravel().tolist()}]})


def source(cfg):
    return cfg.get('parameters', {}).get('max_batch_size_source', {}).get('string_value')


def main():
    s = Server({
        'pb': (['N', 3], {'config.pbtxt': PB}),
        'nobatch': ([2, 3], {'config.pbtxt': NOBATCH}),
        'both': (['N', 3], {'config.pbtxt': 'max_batch_size: 4\n', 'config.json': '{"max_batch_size": 4}'}),
        'bad': (['N', 3], {'config.pbtxt': BAD}),
        'js': (['N', 3], {'config.json': '{"max_batch_size": 2, "platform": "onnxruntime_onnx"}'}),
    })
    try:
        idx = s.index()
        for name in ('pb', 'nobatch', 'js'):
            check(idx.get(name, {}).get('state') == 'READY', f'{name} is READY', str(idx.get(name)))
        cfg = s.config('pb')
        db = cfg.get('dynamic_batching', {})
        check(cfg.get('max_batch_size') == 8, 'pb: max_batch_size 8 from config.pbtxt', str(cfg)[:400])
        check(db.get('preferred_batch_size') == [8] and db.get('max_queue_delay_microseconds') == 200000,
              'pb: dynamic_batching from config.pbtxt (preferred_batch_size [8], delay 200000 us)', str(db))
        check(source(cfg) == 'config.pbtxt', 'pb: max_batch_size_source is config.pbtxt', str(cfg.get('parameters')))
        check(cfg.get('input', [{}])[0].get('dims') == [3], 'pb: input dims [3]', str(cfg.get('input')))
        cfg = s.config('nobatch')
        check(cfg.get('max_batch_size') == 0 and 'dynamic_batching' not in cfg,
              'nobatch: max_batch_size 0, no dynamic_batching', str(cfg)[:300])
        st, _, b = s.req('POST', '/v2/models/nobatch/infer', infer_body([2, 3]))
        check(st == 200 and json.loads(b)['outputs'][0]['shape'] == [2, 3], 'nobatch serves its full shape [2, 3]',
              f'{st} {b[:200]}')
        cfg = s.config('js')
        check(cfg.get('max_batch_size') == 2 and source(cfg) == 'config.json',
              'js (config.json alone): max_batch_size 2, source config.json', str(cfg)[:300])

        log = s.stderr()
        ign = [ln for ln in log.splitlines() if 'ignored' in ln]
        check(any("'pb'" in ln and 'config.pbtxt fields' in ln and 'platform' in ln for ln in ign),
              "the ignored-fields line of pb names config.pbtxt and platform", '\n'.join(ign))
        check(any("'js'" in ln and 'config.json fields' in ln for ln in ign),
              "the ignored-fields line of js names config.json", '\n'.join(ign))

        r = idx.get('both', {})
        check(r.get('state') == 'UNAVAILABLE' and 'both config.json and config.pbtxt' in r.get('reason', ''),
              'both files: UNAVAILABLE naming both', str(r))
        r = idx.get('bad', {})
        want = re.escape(os.path.join(s.repo, 'bad', 'config.pbtxt')) + r': line 4 column 32: expected'
        check(r.get('state') == 'UNAVAILABLE' and re.search(want, r.get('reason', '')),
              'a syntax error: UNAVAILABLE with the file, line 4 and column 32', str(r))

        # batching: 8 clients x 4 requests, started together
        m0 = s.req('GET', '/metrics')[2].decode()
        go = threading.Barrier(8)
        errs, oks = [], []

        def client(k):
            c = http.client.HTTPConnection('127.0.0.1', s.port, timeout=60)
            try:
                go.wait(timeout=30)
                for j in range(4):
                    c.request('POST', '/v2/models/pb/infer', body=infer_body([1, 3]),
                              headers={'Content-Type': 'application/json'})
                    r = c.getresponse()
                    body = r.read()
                    if r.status == 200 and json.loads(body)['outputs'][0]['data'] == [0.0, 1.0, 2.0]:
                        oks.append(1)
                    else:
                        errs.append(f'{r.status} {body[:200]}')
            except Exception as e:  # noqa: BLE001
                errs.append(repr(e))
            finally:
                c.close()

        th = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        check(len(oks) == 32 and not errs, f'32 answers from 8 clients ({len(oks)} right)', str(errs[:3]))
        m1 = s.req('GET', '/metrics')[2].decode()
        rows = (metric(m1, 'nv_inference_count', 'pb') or 0) - (metric(m0, 'nv_inference_count', 'pb') or 0)
        batches = (metric(m1, 'nv_inference_exec_count', 'pb') or 0) - (metric(m0, 'nv_inference_exec_count', 'pb') or 0)
        check(rows == 32 and 0 < batches <= 16,
              f'the dynamic batcher of config.pbtxt batches: 32 rows in {batches:.0f} runs (at most 16)')

        # a reload rereads config.pbtxt
        with open(os.path.join(s.repo, 'pb', 'config.pbtxt'), 'w') as f:
            f.write(PB.replace('max_batch_size: 8', 'max_batch_size: 4').replace('preferred_batch_size: 8',
                                                                                  'preferred_batch_size: [2, 4]'))
        st, _, b = s.req('POST', '/v2/repository/models/pb/load')
        check(st == 200, 'reload of pb answers 200', b[:300])
        cfg = s.config('pb')
        check(cfg.get('max_batch_size') == 4 and cfg.get('dynamic_batching', {}).get('preferred_batch_size') == [2, 4],
              'after the reload: max_batch_size 4, preferred_batch_size [2, 4] from the new config.pbtxt', str(cfg)[:400])
        # and a load that finds both files fails, the old version serving on
        with open(os.path.join(s.repo, 'pb', 'config.json'), 'w') as f:
            f.write('{"max_batch_size": 4}')
        st, _, b = s.req('POST', '/v2/repository/models/pb/load')
        check(st != 200 and b'both config.json and config.pbtxt' in b, 'a load with both files fails naming them',
              f'{st} {b[:300]}')
        check(s.req('GET', '/v2/models/pb/ready')[0] == 200, 'the loaded version of pb still serves')
    finally:
        s.finish()


if __name__ == '__main__':
    try:
        main()
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
