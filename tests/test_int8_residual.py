#!/usr/bin/env python3
"""int8_residual_fuse: the residual Add of a QDQ network fused into the integer convolution before it
(graph/fuse.c fuse_qdq_residual, TOPLU_POST_QSUM in ops/onednn/qconv.c) against the same graph unfused
(TOPLU_NO_FUSE=qdq_residual: DequantizeLinear, float Add, Relu, QuantizeLinear as separate steps).

A small ResNet (a stem conv, an identity block, a projection block with stride 2, pooling and a Linear)
exported by PyTorch, quantized by `toplu quantize` on scikit-image photos (every node int8), its blocks'
integer outputs made graph outputs, run on other photos at batch 1 and 3.  The first block reads the
same integers in both runs: its outputs must be equal except next to rounding ties (at most 0.2%), and
never further apart than a tie of the convolution's own quantization moves them (ceil(sa / sy) steps,
sa the addends' scale, sy the output's; one step for a tie of the output's rounding); the second block's within one step on all but a few elements (its input
already differs there); the float logits close.  The plan dump must show both blocks fused.

usage: test_int8_residual.py TOPLU WORKDIR   (exit 77: skipped, no torch/onnx/skimage photos)
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import torch
    from PIL import Image
except Exception as e:  # pragma: no cover
    print(f'skipped: {e}')
    sys.exit(77)

# Debian's python3-skimage photos: installed (scripts/install-deps.sh), else the copy scripts/fetch-models.sh
# extracts into the cache
SKIMAGE = next((d for d in ('/usr/lib/python3/dist-packages/skimage/data',
                            os.path.join(os.environ.get('TOPLU_CACHE') or os.path.expanduser('~/.cache/toplu'), 'debian',
                                         'python3-skimage', 'usr/lib/python3/dist-packages/skimage/data'))
                if os.path.isfile(os.path.join(d, 'astronaut.png'))), '/usr/lib/python3/dist-packages/skimage/data')
CALIB = ['astronaut.png', 'coffee.png', 'chelsea.png', 'rocket.jpg', 'motorcycle_left.png', 'hubble_deep_field.jpg']
TEST = ['camera.png', 'coins.png', 'page.png']
PRE = 'resize=64x64,color=rgb,layout=nchw,scale=0.00392156862745098,mean=0.485/0.456/0.406,std=0.229/0.224/0.225'
MEAN, STD = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)


class Block(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(cout)
        self.c2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                                        torch.nn.MaxPool2d(3, 2, 1))
        self.l1 = Block(32, 32, 1)
        self.l2 = Block(32, 64, 2)
        self.fc = torch.nn.Linear(64, 10)

    def forward(self, x):
        y = self.l2(self.l1(self.stem(x)))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


def photo(name):
    im = Image.open(os.path.join(SKIMAGE, name)).convert('RGB').resize((64, 64), Image.BILINEAR)
    return ((np.asarray(im).astype(np.float32) / 255.0 - MEAN) / STD).transpose(2, 0, 1)


def main():
    toplu, work = sys.argv[1], sys.argv[2]
    if not all(os.path.isfile(os.path.join(SKIMAGE, n)) for n in CALIB + TEST):
        print(f'skipped: scikit-image photos not under {SKIMAGE}')
        return 77
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    net = Net().eval()
    with torch.no_grad():  # BatchNorm statistics that are not the identity
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    fm = os.path.join(work, 'resnet_small.onnx')
    torch.onnx.export(net, (torch.randn(1, 3, 64, 64),), fm, input_names=['x'], output_names=['logits'],
                      dynamic_axes={'x': {0: 'n'}, 'logits': {0: 'n'}}, opset_version=13)
    photos = os.path.join(work, 'calib')
    os.makedirs(photos, exist_ok=True)
    for n in CALIB:
        dst = os.path.join(photos, n)
        if not os.path.exists(dst):
            os.symlink(os.path.join(SKIMAGE, n), dst)
    qm = os.path.join(work, 'resnet_small_int8.onnx')
    subprocess.run([toplu, 'quantize', fm, '--calibration', f'x={photos}', '--preprocess', PRE, '--max-node-error', 'none',
                    '--output', qm], check=True, stdout=subprocess.DEVNULL)
    # the blocks' integer outputs: QuantizeLinear(Relu(Add)) as graph outputs too
    m = onnx.load(qm)
    prod = {o: n for n in m.graph.node for o in n.output}
    init = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    blocks, steps = [], []
    for n in m.graph.node:
        if n.op_type == 'QuantizeLinear':
            r = prod.get(n.input[0])
            if r is not None and r.op_type == 'Relu' and prod.get(r.input[0]) is not None and prod[r.input[0]].op_type == 'Add':
                blocks.append(n.output[0])
                # a rounding tie of the convolution's own quantization (scale sa) moves the output by sa / sy
                sa = max(float(init[prod[i].input[1]]) for i in prod[r.input[0]].input)
                steps.append(max(1, int(np.ceil(sa / float(init[n.input[1]]) - 1e-6))))
    assert len(blocks) == 2, f'expected 2 residual blocks in the quantized model, found {blocks}'
    fails = []
    # the stem's MaxPool: its QuantizeLinear takes the scale and zero point of the DequantizeLinear before it (as
    # ONNX Runtime's quantizer writes it), so toplu pools the integers
    pools = [n for n in m.graph.node if n.op_type == 'MaxPool']
    readers = {i: n for n in m.graph.node for i in n.input}
    for p in pools:
        d, q = prod.get(p.input[0]), readers.get(p.output[0])
        same = (d is not None and q is not None and d.op_type == 'DequantizeLinear' and q.op_type == 'QuantizeLinear' and
                float(init[d.input[1]]) == float(init[q.input[1]]) and int(init[d.input[2]]) == int(init[q.input[2]]))
        print(f'MaxPool {p.name}: {"one scale and zero point around it" if same else "its own scale or zero point"}')
        if not same:
            fails.append(f'MaxPool {p.name}: the QuantizeLinear after it does not take the parameters of the '
                         f'DequantizeLinear before it')
    if len(pools) != 1:
        fails.append(f'{len(pools)} MaxPool nodes in the quantized model, want 1')
    for b in blocks:
        m.graph.output.append(onnx.helper.make_tensor_value_info(b, onnx.TensorProto.UINT8, None))
    qo = os.path.join(work, 'resnet_small_int8_blocks.onnx')
    onnx.save(m, qo)
    xs = os.path.join(work, 'x.npy')
    np.save(xs, np.stack([photo(n) for n in TEST]).astype(np.float32))

    def run(tag, nofuse, batch):
        env = dict(os.environ)
        env.pop('TOPLU_NO_FUSE', None)
        if nofuse:
            env['TOPLU_NO_FUSE'] = 'qdq_residual'
        env['TOPLU_PLAN_DUMP'] = '1'
        out = os.path.join(work, tag)
        p = subprocess.run([toplu, 'run', qo, '--input', f'x={xs}', '--output', out, '--batch-size', str(batch)], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f'toplu run ({tag}) failed: {p.stderr[-2000:]}')
        fused = p.stderr.count('Add+Relu+QuantizeLinear')
        res = {'logits': np.load(os.path.join(out, 'logits.npy'))}
        for b in blocks:
            f = [x for x in os.listdir(out) if x.endswith('.npy') and x != 'logits.npy' and
                 x[:-4] == b.replace('/', '_').replace(':', '_')] or \
                [x for x in os.listdir(out) if x.endswith('.npy') and x != 'logits.npy' and b.split('/')[-1] in x]
            res[b] = np.load(os.path.join(out, sorted(f)[0])) if f else None
        return fused, res

    for batch in (1, 3):
        nf, fused = run(f'fused-{batch}', False, batch)
        nu, unfused = run(f'unfused-{batch}', True, batch)
        print(f'batch {batch}: plan dump shows {nf} fused residual blocks (unfused run: {nu})')
        if nf < 2 or nu != 0:
            fails.append(f'batch {batch}: {nf} fused blocks with the fusion on (want 2), {nu} with it off (want 0)')
        for i, b in enumerate(blocks):
            a, u = fused[b], unfused[b]
            if a is None or u is None or a.shape != u.shape:
                fails.append(f'batch {batch}: block output {b} missing or of another shape')
                continue
            d = np.abs(a.astype(np.int32) - u.astype(np.int32))
            frac = float((d > 0).mean())
            print(f'  block {i + 1} ({b}, {a.shape}, {a.dtype}): {int((d > 0).sum())} of {d.size} elements differ '
                  f'({frac:.4%}), max {int(d.max())} steps (a tie allows {steps[i]})')
            # block 1: the same inputs, so only rounding ties may differ, by one step; block 2: its inputs
            # already differ where block 1's did
            lim_frac = 0.002 if i == 0 else 0.01
            if (i == 0 and d.max() > steps[i]) or (i > 0 and float((d > 1).mean()) > 0.001) or frac > lim_frac:
                fails.append(f'batch {batch}: block {i + 1}: {frac:.4%} of elements differ (limit {lim_frac:.1%}), '
                             f'max {int(d.max())} steps')
        la, lu = fused['logits'], unfused['logits']
        err = float(np.abs(la - lu).max()) / max(float(np.abs(lu).max()), 1e-6)
        print(f'  logits: max abs diff {float(np.abs(la - lu).max()):.4g} ({err:.3%} of max |logit|)')
        if err > 0.02 or not np.array_equal(la.argmax(-1), lu.argmax(-1)):
            fails.append(f'batch {batch}: logits differ by {err:.3%} of their max or in argmax')
    for f in fails:
        print('FAIL:', f)
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
