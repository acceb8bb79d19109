#!/usr/bin/python3
"""A request alone runs on the HTTP thread that parsed it only for a model whose last request alone ran
within 5 ms (src/serve/batcher.c, SRV_INLINE_MAX_NS): a slow model's request ran there and a liveness
probe on the same thread waited behind it (61 ms behind a 110 ms PaddleOCR cls run, a fresh user found).

  test_serve_inline.py TOPLU WORKDIR

A generated model (eight 3x3 convolutions, 64 channels, 128 x 128: about 8 GFLOP a row) served with one
engine thread and one HTTP thread; while a request runs, GET /v2/health/live must answer at once.  A fast
model (Identity) keeps the inline path: its requests' queue time stays near zero.  Exit status 0 pass, 1 fail.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402

check, FAILED = harness.check, harness.FAILED


def slow_model(path):
    rng = np.random.default_rng(1)
    nodes, inits, prev = [], [], 'x'
    for k in range(8):
        cin = 1 if k == 0 else 64
        w = (rng.standard_normal((64, cin, 3, 3)) * (1.0 / np.sqrt(cin * 9))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, 'w%d' % k))
        out = 'y' if k == 7 else 'h%d' % k
        nodes.append(helper.make_node('Conv', [prev, 'w%d' % k], [out], pads=[1, 1, 1, 1]))
        prev = out
    g = helper.make_graph(nodes, 'slow', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 1, 128, 128])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 64, 128, 128])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.save(m, path)


def fast_model(path):
    g = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], 'fast',
                          [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 4])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.save(m, path)


def binary_body(x, name='x'):
    raw = x.astype(np.float32).tobytes()
    head = json.dumps({'inputs': [{'name': name, 'shape': list(x.shape), 'datatype': 'FP32',
                                   'parameters': {'binary_data_size': len(raw)}}],
                       'outputs': [{'name': 'y', 'parameters': {'binary_data': True}}]}).encode()
    return head + raw, {'Inference-Header-Content-Length': str(len(head)), 'Content-Type': 'application/octet-stream'}


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: test_serve_inline.py TOPLU WORKDIR')
    toplu, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    repo = os.path.join(work, 'repo')
    for name, make in (('slow', slow_model), ('fast', fast_model)):
        os.makedirs(os.path.join(repo, name, '1'))
        make(os.path.join(repo, name, '1', 'model.onnx'))
        with open(os.path.join(repo, name, 'config.json'), 'w') as f:
            json.dump({'max_batch_size': 1}, f)
    port = harness.free_port()
    log = open(os.path.join(work, 'server.err'), 'w')
    proc = harness.start([toplu, 'serve', '--model-repository', repo, '--http-port', str(port), '--host', '127.0.0.1',
                          '--threads', '1', '--http-threads', '1'], port, subprocess.DEVNULL, log, 120,
                         lambda: open(os.path.join(work, 'server.err')).read()[-1500:], harness.Failure)
    try:
        body, headers = binary_body(np.ones((1, 1, 128, 128), np.float32))
        for _ in range(3):  # the plan built and measured, then the model's run time known
            st, _, b = harness.request(port, 'POST', '/v2/models/slow/infer', body, headers, timeout=120)
            check(st == 200, 'the slow model answers', b[:200])
        t0 = time.time()
        harness.request(port, 'POST', '/v2/models/slow/infer', body, headers, timeout=120)
        run_s = time.time() - t0
        check(run_s > 0.015, f'the slow model takes over 15 ms a request ({run_s * 1000:.1f} ms)')
        waits = []
        for _ in range(3):
            done = {}
            th = threading.Thread(target=lambda: done.setdefault(
                'r', harness.request(port, 'POST', '/v2/models/slow/infer', body, headers, timeout=120)))
            th.start()
            time.sleep(run_s * 0.25)
            t0 = time.time()
            st, _, _ = harness.request(port, 'GET', '/v2/health/live', timeout=60)
            waits.append(time.time() - t0)
            th.join()
            check(st == 200 and done['r'][0] == 200, 'live and the request both answer 200')
        worst = max(waits)
        check(worst < run_s * 0.4, f'GET /v2/health/live during a slow request: at most {worst * 1000:.1f} ms '
              f'(a request takes {run_s * 1000:.1f} ms; it waited for the run when it ran on the HTTP thread)')
        # the fast model still runs inline: queue time (Triton's nv_inference_queue_duration_us) stays tiny
        fb = {'inputs': [{'name': 'x', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]}]}
        for _ in range(50):
            st, _, b = harness.request(port, 'POST', '/v2/models/fast/infer', json.dumps(fb))
        check(st == 200 and json.loads(b)['outputs'][0]['data'] == [1, 2, 3, 4], 'the fast model answers its rows')
        stats = json.loads(harness.request(port, 'GET', '/v2/models/fast/stats')[2])
        inf = stats['model_stats'][0]['inference_stats']
        q_us = inf['queue']['ns'] / max(inf['queue']['count'], 1) / 1000
        check(inf['success']['count'] >= 50 and q_us < 1000,
              f'the fast model\'s requests skip the queue (mean queue time {q_us:.1f} us)', json.dumps(inf)[:400])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()
    text = open(os.path.join(work, 'server.err')).read()
    for bad in harness.SANITIZER_MARKS:
        check(bad not in text, f'no "{bad}" in the server log', text[text.find(bad):][:1500])
    return 1 if FAILED else 0


if __name__ == '__main__':
    sys.exit(main())
