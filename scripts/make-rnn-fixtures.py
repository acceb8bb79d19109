#!/usr/bin/python3
"""scripts/make-rnn-fixtures.py - the recurrent models' ONNX Runtime fixtures
(called by scripts/fetch-models.sh after bench/export_models.py has written
models/speed/lstm_bi2.onnx and gru_bi2.onnx).

For each model, fixtures/<model>/ holds, at sequence lengths 1, 17 and 100:
  x_s{S}_b8.npy      input x [S, 8, 40], float32 normal (numpy seed 0 + S)
  x_s{S}_b1.npy      its batch row 0 alone, [S, 1, 40]
  ort_s{S}_b{B}/     every output of ONNX Runtime (scripts/ort-run.js) on that input
and meta.json (the model, the lengths, batches, output names and the
tolerance the test applies, 1e-4).  Read by tests/models/recurrent_test.py.
Existing fixtures are kept; each is written under a temporary name and renamed.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {'lstm_bi2': ['y', 'h_n', 'c_n'], 'gru_bi2': ['y', 'h_n']}
SEQS = [1, 17, 100]
BATCH = 8


def main():
    cache = sys.argv[1] if len(sys.argv) > 1 else (
        os.environ.get('TOPLU_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'toplu'))
    with open(os.path.join(cache, 'node', 'node_modules', 'onnxruntime-node', 'package.json')) as f:
        ort_version = json.load(f)['version']
    for name, outputs in MODELS.items():
        d = os.path.join(cache, 'fixtures', name)
        if os.path.isfile(os.path.join(d, 'meta.json')):
            continue
        model = os.path.join(cache, 'models', 'speed', f'{name}.onnx')
        if not os.path.isfile(model):
            sys.exit(f'make-rnn-fixtures: {model} is missing (bench/export_models.py --only {name})')
        print(f'fetch-models: fixture {name} (ONNX Runtime)', flush=True)
        tmp = d + '.tmp'
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        for s in SEQS:
            x = np.random.default_rng(s).standard_normal((s, BATCH, 40)).astype(np.float32)
            for b, xb in ((BATCH, x), (1, x[:, :1])):
                xf = os.path.join(tmp, f'x_s{s}_b{b}.npy')
                np.save(xf, np.ascontiguousarray(xb))
                out = os.path.join(tmp, f'ort_s{s}_b{b}')
                os.makedirs(out)
                subprocess.run(['node', os.path.join(HERE, 'ort-run.js'), model, '--input', f'x={xf}',
                                '--output', out], check=True, env=dict(os.environ, TOPLU_CACHE=cache))
        meta = {'model': f'cache:models/speed/{name}.onnx', 'ort_version': ort_version, 'input': 'x',
                'outputs': outputs, 'seqs': SEQS, 'batch': BATCH, 'tolerance': {'max_abs': 1e-4},
                'note': 'torch.nn.' + ('LSTM' if name.startswith('lstm') else 'GRU') +
                        '(40, 128, num_layers=2, bidirectional=True), random weights (torch seed 0), opset 14, '
                        'sequence-first input x [S, N, 40] with S and N dynamic (bench/export_models.py); '
                        'inputs numpy normal (seed S)'}
        with open(os.path.join(tmp, 'meta.json'), 'w') as f:
            json.dump(meta, f, indent=1)
        shutil.rmtree(d, ignore_errors=True)
        os.replace(tmp, d)


if __name__ == '__main__':
    main()
