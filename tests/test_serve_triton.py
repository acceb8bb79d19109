#!/usr/bin/python3
"""A Triton repository moved to toplu serve (a third fresh user's report), over real HTTP:

  test_serve_triton.py TOPLU WORKDIR

- default_model_filename picks the file in each version folder (it was ignored: model.onnx was served);
- model_warmup count 0 is Triton's "once" (refused before); a config's own parameters are shown by
  GET .../config; version_policy versions without a folder are named in the log;
- an empty repository starts (as tritonserver does) and takes models through the repository API;
- a second --model-repository is refused (it silently replaced the first); --strict-readiness and
  --exit-on-error take tritonserver's boolean forms (False, 0, =false, "false" as the next word);
- the shared-memory extension is refused by name (inputs: a message about missing data; outputs:
  silently answered inline).
Exit status 0 pass, 1 fail.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TOPLU_BIN, WORK_DIR = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402

check, FAILED = harness.check, harness.FAILED


def scale_model(path, k):
    """y = k * x, x FP32 [N, 3]."""
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3])
    y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3])
    c = numpy_helper.from_array(np.array(k, np.float32), 'k')
    gr = helper.make_graph([helper.make_node('Mul', ['x', 'k'], ['y'])], 'scale', [x], [y], [c])
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(m, path)


def main():
    # a repository as a Triton user has it
    models = {'dmf': (['N', 3], 'name: "dmf"\nbackend: "onnxruntime"\ndefault_model_filename: "custom.onnx"\n'
                                'max_batch_size: 4\n'),
              'params': (['N', 3], {'max_batch_size': 4, 'parameters': {'mykey': {'string_value': 'v'},
                                                                        'other': {'string_value': 'w x'}},
                                    'model_warmup': [{'name': 'w', 'batch_size': 1, 'count': 0,
                                                      'inputs': {'x': {'data_type': 'TYPE_FP32', 'dims': [3],
                                                                       'zero_data': True}}}],
                                    'version_policy': {'specific': {'versions': [1, 5]}}})}
    base = os.path.join(WORK_DIR, 'triton_repo2')
    shutil.rmtree(base, ignore_errors=True)
    repo = os.path.join(base, 'repo')
    harness.identity_model(os.path.join(repo, 'dmf', '1', 'model.onnx'), ['N', 3])
    scale_model(os.path.join(repo, 'dmf', '1', 'custom.onnx'), 2.0)
    harness.identity_model(os.path.join(repo, 'dmf', '2', 'model.onnx'), ['N', 3])  # no custom.onnx: skipped
    with open(os.path.join(repo, 'dmf', 'config.pbtxt'), 'w') as f:
        f.write(models['dmf'][1] + 'version_policy: { all { } }\n')
    harness.identity_model(os.path.join(repo, 'params', '1', 'model.onnx'), ['N', 3])
    with open(os.path.join(repo, 'params', 'config.json'), 'w') as f:
        json.dump(models['params'][1], f)
    port = harness.free_port()
    err_path = os.path.join(base, 'server.err')
    log = open(err_path, 'w')
    proc = harness.start([TOPLU_BIN, 'serve', '--model-repository', repo, '--http-port', str(port), '--host',
                          '127.0.0.1', '--threads', '1', '--strict-readiness', 'False'], port, subprocess.DEVNULL, log,
                         120, lambda: open(err_path).read()[-1500:], harness.Failure)

    def req(method, path, body=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        st, _, b = harness.request(port, method, path, body)
        try:
            return st, json.loads(b) if b else {}
        except ValueError:
            return st, {'raw': b[:300]}
    try:
        body = {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'FP32', 'data': [1, 2, 3]}]}
        st, r = req('POST', '/v2/models/dmf/infer', body)
        check(st == 200 and r['outputs'][0]['data'] == [2, 4, 6],
              'default_model_filename "custom.onnx": the file named is served (2x), not model.onnx', r)
        st, r = req('POST', '/v2/models/dmf/versions/2/infer', body)
        check(st == 404, 'a version folder without custom.onnx is skipped', r)
        text = open(err_path).read()
        check('version folder 2 has no custom.onnx: skipped' in text, 'and the log names the file', text[-800:])
        st, r = req('GET', '/v2/models/params/config')
        p = r.get('parameters', {})
        check(st == 200 and p.get('mykey') == {'string_value': 'v'} and p.get('other') == {'string_value': 'w x'},
              'the configuration\'s own parameters are shown by GET .../config', p)
        check('version_policy names version 5, but' in text and '/5/model.onnx does not exist' in text,
              'a specific version without a folder is named in the log', text[-800:])
        st, r = req('POST', '/v2/models/params/infer', body)
        check(st == 200 and r['outputs'][0]['data'] == [1, 2, 3], 'model_warmup count 0 (Triton\'s once) loads', r)
        shm = {'inputs': [{'name': 'x', 'shape': [1, 3], 'datatype': 'FP32',
                           'parameters': {'shared_memory_region': 'in0', 'shared_memory_byte_size': 12}}]}
        st, r = req('POST', '/v2/models/params/infer', shm)
        check(st == 400 and 'shared_memory_region' in r.get('error', '') and 'not supported' in r.get('error', ''),
              'an input in shared memory: 400 naming the extension', r)
        shm = dict(body, outputs=[{'name': 'y', 'parameters': {'shared_memory_region': 'out0'}}])
        st, r = req('POST', '/v2/models/params/infer', shm)
        check(st == 400 and 'shared_memory_region' in r.get('error', ''), 'an output to shared memory: 400', r)
        st, r = req('POST', '/v2/models/params/infer', body)
        check(st == 200, 'and the server keeps serving')
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    # an empty repository starts, then takes a model through the repository API
    empty = os.path.join(base, 'empty')
    os.makedirs(empty)
    port = harness.free_port()
    log = open(err_path, 'w')
    proc = harness.start([TOPLU_BIN, 'serve', '--model-repository', empty, '--http-port', str(port), '--host',
                          '127.0.0.1', '--threads', '1', '--exit-on-error', 'false', '--strict-readiness=0'], port,
                         subprocess.DEVNULL, log, 120, lambda: open(err_path).read()[-1500:], harness.Failure)
    try:
        st, r = req('POST', '/v2/repository/index')
        check(st == 200 and r == [], 'an empty repository starts, ready, with an empty index', r)
        scale_model(os.path.join(empty, 'late', '1', 'model.onnx'), 3.0)
        st, r = req('POST', '/v2/repository/models/late/load')
        check(st == 200, 'a model added later loads', r)
        st, r = req('POST', '/v2/models/late/infer', body)
        check(st == 200 and r['outputs'][0]['data'] == [3, 6, 9], 'and serves', r)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    for args, want in ((['--model-repository', repo, '--model-repository', empty], 'given twice'),
                       (['--model-repository', repo, '--strict-readiness', 'maybe'], 'neither true nor false'),
                       (['--model-repository', repo, '--exit-on-error=perhaps'], 'neither true nor false')):
        r = subprocess.run([TOPLU_BIN, 'serve'] + args, capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and want in r.stderr, f'{" ".join(args[2:])}: exit 2, "{want}"',
              f'{r.returncode} {r.stderr[-300:]}')
    return 1 if FAILED else 0


if __name__ == '__main__':
    sys.exit(main())
