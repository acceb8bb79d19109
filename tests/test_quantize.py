#!/usr/bin/env python3
"""`toplu quantize` (issue 9) on a small model built here, every number checked.

    test_quantize.py TOPLU WORKDIR CASE

The model: x[N,3,16,16] -> Conv(8, bias) -> BatchNormalization -> Relu ->
Conv(8, no bias) -> Add(constant [8,1,1]) -> Clip(0, 6) -> Add(the Relu's
output) -> GlobalAveragePool -> Flatten -> Gemm(5, transB=1) -> y.
Calibration: 64 rows of a fixed random normal .npy.

CASE:
  minmax   the file: opset 13, no BatchNormalization or bias Add left (folded),
           no initializer nothing reads, graph inputs x only (also from an
           IR version 3 file that lists every initializer as an input),
           QuantizeLinear/DequantizeLinear on x, the Relu's output, the Clip's
           output and the residual Add's output; per-channel int8 weights with
           scales max|w_c| / 127 and values round(w / s) of the folded float
           weights computed here; int32 biases round(b / (s_x s_w[c])); the
           activation scale and zero point of x from its min and max computed
           here ((hi - lo) / 255, round(-lo / scale)); the Clip's output
           quantized with its top level <= 6; conv1's estimated error (from the
           statistics alone) within 2x of its measured one; the report's ranges equal the
           min/max computed here over the calibration rows; toplu runs the
           quantized file within 3% (of the output's range) of the float model.
  methods  percentile=99 and entropy pick ranges inside minmax's on data with a
           few outliers (x scaled by 50 on 0.01% of the values), and entropy's
           top for x is well below the outliers; with the default
           --max-node-error the outliers leave conv1 float (reading x itself),
           while on the clean data every node stays quantized.
  options  --exclude NODE leaves that Conv's weights float, --op-types Conv
           leaves the Gemm float, --per-tensor writes scalar scales,
           --symmetric-activations writes int8 zero points 0,
           --calibration-rows 8 reads 8 rows; the model at opset 9 (Clip
           with attributes) is rewritten to opset 13 (Clip with inputs) and
           gives the same results as the opset-13 model.
  errors   bad calls exit 2 with a message naming the thing: an unknown node
           in --exclude, an unknown op type, no --calibration, an input name
           the model lacks, the output being the model, an opset-9 model with
           Upsample (cannot move to opset 13), a model quantized already;
           none writes the output.
  sources  the calibration rows come through the pipeline's reader: .npy, CSV
           with a header, JSONL and .npy at batch size 5 give byte-identical
           models; a CSV line that does not parse is left out with a warning
           naming its line and the model is the same; every row bad is exit 2.
  residual a Conv over the limit by its output's step alone stays int8 when a
           quantized residual Add reads its output (the step stays either
           way), and goes float when a second Conv reads it.
  plan     toplu plan --precision int8 on the float model plans the int8 model
           toplu quantize would write (in memory): with --int8-calibration on
           the same rows every row's weight, activation and workspace bytes
           equal the plan of the file toplu quantize wrote, and with the
           default synthetic rows too (this model keeps every node int8 on
           either); the written int8 file at --precision int8 is its own plan,
           unscaled; misuse exits 2 naming the flag.
  paths    an existing --output or --report that is a FIFO, a symbolic link
           or (as root) a character device made here with mknod is refused
           (exit 2, naming the path and what it is) before calibrating, and
           stays as it was (the link's target too); a user's OUT.part beside
           the output is left alone and no temporary file stays.
  cancel   SIGTERM while calibrating exits 143, SIGINT while the model is
           written (its temporary file seen holding data) exits 130: nothing
           written, no temporary file left.
  zero     all-zero calibration rows are refused (exit 2) naming the input; a
           Relu output that is 0 on every row is named in a warning.
  report   every Gemm and Add is listed with "quantized" and a reason when not
           (inputs, excluded, estimated_error), unnamed nodes as OPTYPE_INDEX
           (also in --exclude and the written model), a quantized Gemm whose
           output is the model's with its error measured there.
  dead     a 1x1 Conv with two all-zero-weight output channels of bias 1e-28
           (PaddleOCR det's p2o.Conv.22) gets the estimate of the same Conv
           without them and stays int8.
  flags    --dynamic refuses the calibration flags (exit 2 naming each);
           --op-types '' and ',' are errors; the summary with
           --max-node-error none and with nothing left float.
  shared   a weight and a bias that two Convs share, and a weight two MatMuls share (a module used twice in
           torch): the file passes onnx.checker's full check (each reader gets its own DequantizeLinear, the
           bias one its own scale), node and output names unique, and toplu runs it near the float model
  writefail a write past a file size limit (RLIMIT_FSIZE, SIGXFSZ at its
           default) exits 1, writes nothing and leaves no temporary file.
Exit 0 when every check passes, 1 otherwise.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TOPLU, WORK, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)  # a fresh folder: the checks look for files a run did or did not write
os.makedirs(WORK, exist_ok=True)
failures = []


def check(cond, msg):
    print(('ok: ' if cond else 'FAIL: ') + msg, flush=True)
    if not cond:
        failures.append(msg)
    return cond


def run(*args):
    p = subprocess.run([TOPLU] + [str(a) for a in args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


rng = np.random.default_rng(9)
W1 = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
B1 = rng.normal(0, 0.1, 8).astype(np.float32)
GAMMA = rng.uniform(0.5, 1.5, 8).astype(np.float32)
BETA = rng.normal(0, 0.2, 8).astype(np.float32)
MEAN = rng.normal(0, 0.1, 8).astype(np.float32)
VAR = rng.uniform(0.5, 2, 8).astype(np.float32)
W2 = rng.normal(0, 0.2, (8, 8, 3, 3)).astype(np.float32)
B2 = rng.normal(0, 0.1, (8, 1, 1)).astype(np.float32)
WG = rng.normal(0, 0.5, (5, 8)).astype(np.float32)
BG = rng.normal(0, 0.1, 5).astype(np.float32)


def build(path, opset=13):
    inits = [numpy_helper.from_array(a, n) for a, n in ((W1, 'w1'), (B1, 'b1'), (GAMMA, 'gamma'), (BETA, 'beta'),
                                                        (MEAN, 'mean'), (VAR, 'var'), (W2, 'w2'), (B2, 'b2'),
                                                        (WG, 'wg'), (BG, 'bg'),
                                                        (np.array(0, np.float32), 'zero'), (np.array(6, np.float32), 'six'))]
    nodes = [
        helper.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),
        helper.make_node('BatchNormalization', ['c1', 'gamma', 'beta', 'mean', 'var'], ['bn1'], name='bn1', epsilon=1e-5),
        helper.make_node('Relu', ['bn1'], ['r1'], name='relu1'),
        helper.make_node('Conv', ['r1', 'w2'], ['c2'], name='conv2', pads=[1, 1, 1, 1]),
        helper.make_node('Add', ['c2', 'b2'], ['c2b'], name='bias2'),
        helper.make_node('Clip', ['c2b', 'zero', 'six'], ['k2'], name='clip2') if opset >= 11 else
        helper.make_node('Clip', ['c2b'], ['k2'], name='clip2', min=0.0, max=6.0),
        helper.make_node('Add', ['k2', 'r1'], ['res'], name='residual'),
        helper.make_node('GlobalAveragePool', ['res'], ['gap'], name='gap'),
        helper.make_node('Flatten', ['gap'], ['flat'], name='flatten'),
        helper.make_node('Gemm', ['flat', 'wg', 'bg'], ['y'], name='fc', transB=1),
    ]
    g = helper.make_graph(nodes, 'qtest', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3, 16, 16])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)])
    m.ir_version = 7
    onnx.save(m, path)
    return path


def reference(x):
    """The float model in numpy: the Relu, Clip and residual outputs and y."""
    def conv(a, w, b=None):
        n, c, h, wd = a.shape
        ap = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.stack([ap[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=2)  # n c 9 h w
        out = np.einsum('nckhw,ock->nohw', cols.astype(np.float64), w.reshape(w.shape[0], c, 9).astype(np.float64))
        return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)
    c1 = conv(x, W1, B1)
    bn = (c1 - MEAN.reshape(1, -1, 1, 1)) / np.sqrt(VAR.reshape(1, -1, 1, 1) + 1e-5) * GAMMA.reshape(1, -1, 1, 1) + BETA.reshape(1, -1, 1, 1)
    r1 = np.maximum(bn, 0)
    k2 = np.clip(conv(r1, W2) + B2.reshape(1, -1, 1, 1), 0, 6)
    res = k2 + r1
    y = res.mean(axis=(2, 3)) @ WG.T.astype(np.float64) + BG
    return {'r1': r1, 'k2': k2, 'res': res, 'y': y}


MODEL = build(os.path.join(WORK, 'qtest.onnx'))
X = rng.normal(0, 1, (64, 3, 16, 16)).astype(np.float32)
CALIB = os.path.join(WORK, 'calib.npy')
np.save(CALIB, X)


def quantize(out, *extra, model=MODEL, calib=None, keep_all=True):
    """toplu quantize; keep_all: --max-node-error none (every chosen node quantized), unless extra sets it."""
    calib = calib or f'x={CALIB}'
    if keep_all and '--max-node-error' not in extra:
        extra = extra + ('--max-node-error', 'none')
    return run('quantize', model, '--calibration', calib, '--output', out, '-q', *extra)


def inits(m):
    return {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}


def dq_of(m, tensor_input):
    """The DequantizeLinear node whose output is tensor_input, or None."""
    return next((n for n in m.graph.node if n.op_type == 'DequantizeLinear' and n.output[0] == tensor_input), None)


def node(m, name):
    return next(n for n in m.graph.node if n.name == name)


def toplu_out(model, x, tag):
    xp = os.path.join(WORK, f'{tag}_x.npy')
    np.save(xp, x)
    od = os.path.join(WORK, f'{tag}_out')
    code, so, se = run('run', model, '--input', f'x={xp}', '--output', od, '-q')
    if code != 0:
        return None, se.strip()[-300:]
    return np.load(os.path.join(od, 'y.npy')), ''


if CASE == 'minmax':
    out = os.path.join(WORK, 'q.onnx')
    rep = os.path.join(WORK, 'report.json')
    code, so, se = quantize(out, '--report', rep, '--method', 'minmax')
    if check(code == 0 and os.path.isfile(out), f'toplu quantize exits 0 and writes the model ({se.strip()[-300:]})'):
        m = onnx.load(out)
        onnx.checker.check_model(m)
        ops = [n.op_type for n in m.graph.node]
        check(m.opset_import[0].version == 13, f'opset {m.opset_import[0].version} == 13')
        check('BatchNormalization' not in ops, 'the BatchNormalization is folded into conv1')
        check(not any(n.op_type == 'Add' and n.name == 'bias2' for n in m.graph.node), 'the bias Add is folded into conv2')
        qin = {n.input[0] for n in m.graph.node if n.op_type == 'QuantizeLinear'}
        check(qin == {'x', 'r1', 'k2', 'res', 'flat'}, f'QuantizeLinear on x, r1, k2, res, flat: {sorted(qin)}')
        I = inits(m)
        unused = sorted(set(I) - {i for n in m.graph.node for i in n.input})
        check(not unused, f'every initializer of the file is read by a node (the folded BatchNormalization\'s '
              f'parameters and the float weights the int8 ones replaced are left out): unused {unused}')
        # the same model as an IR version 3 file lists every initializer among the graph inputs too: the quantized
        # file lists only x (ONNX Runtime neither folds nor fuses a weight that is also an input)
        m3 = onnx.load(MODEL)
        m3.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                              for t in m3.graph.initializer)
        m3.ir_version = 3
        p3, out3 = os.path.join(WORK, 'qtest_ir3.onnx'), os.path.join(WORK, 'q_ir3.onnx')
        onnx.save(m3, p3)
        code3, _, se3 = quantize(out3, '--method', 'minmax', model=p3)
        if check(code3 == 0, f'toplu quantize of the IR 3 file ({se3.strip()[-300:]})'):
            q3 = onnx.load(out3)
            check([i.name for i in q3.graph.input] == ['x'] and sorted(inits(q3)) == sorted(I),
                  f'the IR 3 file quantized: graph inputs {[i.name for i in q3.graph.input][:6]} (want x only), '
                  f'the same initializers as the IR 7 file\'s')
        ref = reference(X)
        # folded float weights of conv1, computed here
        f = GAMMA / np.sqrt(VAR.astype(np.float64) + 1e-5)
        w1f = (W1 * f.reshape(-1, 1, 1, 1)).astype(np.float32)
        b1f = ((B1 - MEAN) * f + BETA).astype(np.float32)
        for conv_name, wf, axis in (('conv1', w1f, 0), ('conv2', W2, 0), ('fc', WG, 0)):
            n = node(m, conv_name)
            d = dq_of(m, n.input[1])
            if not check(d is not None, f'{conv_name}: weights behind a DequantizeLinear'):
                continue
            wq, sw, zw = I[d.input[0]], I[d.input[1]], I[d.input[2]]
            ax = next((a.i for a in d.attribute if a.name == 'axis'), 1)
            red = tuple(k for k in range(wf.ndim) if k != axis)
            want_s = (np.abs(wf).max(axis=red) / 127).astype(np.float32)
            check(wq.dtype == np.int8 and ax == axis and sw.shape == (wf.shape[axis],) and not zw.any(),
                  f'{conv_name}: int8 weights, axis {ax}, {sw.shape[0]} scales, zero points 0')
            check(np.allclose(sw, want_s, rtol=1e-6, atol=0), f'{conv_name}: scales max|w_c| / 127 (max rel diff '
                  f'{float(np.max(np.abs(sw - want_s) / want_s)):.2g})')
            shp = [-1 if k == axis else 1 for k in range(wf.ndim)]
            want_q = np.clip(np.rint(wf / sw.reshape(shp)), -127, 127).astype(np.int8)
            check(np.abs(wq.astype(int) - want_q.astype(int)).max() <= 1 and (wq != want_q).mean() < 1e-3,
                  f'{conv_name}: int8 values round(w / s) (of the folded weights for conv1)')
        # activation parameters of x from its range
        lo, hi = min(float(X.min()), 0.0), max(float(X.max()), 0.0)
        qx = next(n for n in m.graph.node if n.op_type == 'QuantizeLinear' and n.input[0] == 'x')
        sx, zx = float(I[qx.input[1]]), int(I[qx.input[2]])
        want_sx = np.float32((hi - lo) / 255)
        check(abs(sx - want_sx) <= 1e-7 * want_sx and zx == int(np.rint(-lo / want_sx)) and I[qx.input[2]].dtype == np.uint8,
              f'x: scale {sx:.6g} == (max - min) / 255 = {want_sx:.6g}, uint8 zero point {zx} == round(-min / scale)')
        # conv1's bias: int32 round(b / (sx sw))
        n1 = node(m, 'conv1')
        db = dq_of(m, n1.input[2])
        if check(db is not None, 'conv1: bias behind a DequantizeLinear'):
            bq, sb = I[db.input[0]], I[db.input[1]]
            sw1 = I[dq_of(m, n1.input[1]).input[1]]
            check(bq.dtype == np.int32 and np.allclose(sb, np.float32(sx) * sw1, rtol=1e-6),
                  'conv1: int32 bias with scales s_x * s_w[c]')
            check(np.abs(bq.astype(np.int64) - np.rint(b1f / (np.float32(sx) * sw1))).max() <= 1,
                  'conv1: bias values round(b / (s_x s_w[c])) of the folded bias')
        # the Clip output's top level stays <= 6
        qk = next(n for n in m.graph.node if n.op_type == 'QuantizeLinear' and n.input[0] == 'k2')
        sk, zk = np.float32(I[qk.input[1]]), int(I[qk.input[2]])
        check(float(sk) * (255 - zk) <= 6.0 and zk == 0, f'k2 (Clip 0..6): zero point {zk}, top level '
              f'{float(sk) * (255 - zk):.9g} <= 6')
        # the report against ranges computed here
        with open(rep) as fh:
            R = json.load(fh)
        T = {t['name']: t for t in R['tensors']}
        for name in ('r1', 'k2', 'res'):
            a = ref[name]
            t = T.get(name)
            check(t is not None and abs(t['min'] - a.min()) <= 1e-4 * max(1, abs(a.min())) and
                  abs(t['max'] - a.max()) <= 1e-4 * max(1, abs(a.max())),
                  f'report {name}: min {t and t["min"]:.6g} max {t and t["max"]:.6g} == numpy {a.min():.6g} {a.max():.6g}')
        nodes = {n['node']: n for n in R['nodes']}
        # fc's output is the model's output (it stays float): fc is quantized all the same, and its error is
        # measured at y itself
        check(set(nodes) == {'conv1', 'conv2', 'residual', 'fc'} and all(n['quantized'] is True and 'reason' not in n
                                                                         for n in nodes.values()) and
              all(0 < n.get('relative_rms_error', -1) < 0.05 for n in nodes.values()) and nodes['fc']['output'] == 'y',
              'report: conv1, conv2, residual and fc (output y) quantized, the error of each against float below 5% '
              'relative RMS: ' + ', '.join(f'{k} {v.get("relative_rms_error", -1):.4f}' for k, v in sorted(nodes.items())))
        check(R['nodes_quantized'] == 4 and R['nodes_left_float'] == 0 and R['max_node_error'] is None,
              f"report: nodes_quantized {R['nodes_quantized']} (4), nodes_left_float {R['nodes_left_float']}, "
              f"max_node_error {R['max_node_error']} (none)")
        check(R['calibration_rows'] == 64 and R['method'] == 'minmax' and R['per_channel'] is True,
              'report: 64 rows, minmax, per channel')
        # conv1 reads the model's input: its measured error is its own, and the estimate made from the
        # calibration statistics alone (no second run) must be close to it
        c1 = nodes.get('conv1', {})
        est, meas = c1.get('estimated_error', -1), c1.get('relative_rms_error', 0)
        check(meas > 0 and 0.5 <= est / meas <= 2, f'conv1: estimated error {est:.4f} within 2x of the measured {meas:.4f}')
        # the quantized model runs close to float
        xt = rng.normal(0, 1, (16, 3, 16, 16)).astype(np.float32)
        yq, why = toplu_out(out, xt, 'q')
        yf = reference(xt)['y']
        if check(yq is not None, f'toplu runs the quantized model {why}'):
            err = float(np.abs(yq - yf).max())
            span = float(yf.max() - yf.min())
            check(err <= 0.03 * span, f'quantized vs float: max abs diff {err:.4g} <= 3% of the output range {span:.4g}')

elif CASE == 'methods':
    Xo = X.copy()
    flat = Xo.reshape(-1)
    idx = rng.choice(flat.size, flat.size // 10000, replace=False)
    flat[idx] *= 50
    cp = os.path.join(WORK, 'outliers.npy')
    np.save(cp, Xo)
    ranges = {}
    for meth in ('minmax', 'percentile=99', 'entropy'):
        out = os.path.join(WORK, f'q_{meth.split("=")[0]}.onnx')
        rep = os.path.join(WORK, f'rep_{meth.split("=")[0]}.json')
        code, so, se = quantize(out, '--method', meth, '--report', rep, calib=f'x={cp}')
        if check(code == 0, f'--method {meth} exits 0 ({se.strip()[-200:]})'):
            with open(rep) as fh:
                ranges[meth] = {t['name']: (t['lo'], t['hi']) for t in json.load(fh)['tensors']}
    if len(ranges) == 3:
        mm = ranges['minmax']
        check(abs(mm['x'][1] - float(Xo.max())) < 1e-4 * abs(float(Xo.max())), f'minmax top of x {mm["x"][1]:.4g} == max {Xo.max():.4g}')
        for meth in ('percentile=99', 'entropy'):
            inside = all(mm[k][0] - 1e-6 <= lo and hi <= mm[k][1] + 1e-6 for k, (lo, hi) in ranges[meth].items())
            check(inside, f'{meth}: every range inside minmax\'s')
        p_hi = ranges['percentile=99']['x'][1]
        want = float(np.quantile(Xo, 0.995))
        check(abs(p_hi - want) <= 0.02 * abs(want) + 0.01, f'percentile=99: top of x {p_hi:.4g} ~ the 99.5th percentile {want:.4g}')
        e_hi = ranges['entropy']['x'][1]
        check(e_hi < 0.5 * float(Xo.max()), f'entropy: top of x {e_hi:.4g} well below the outliers\' {Xo.max():.4g}')

    # entropy's thresholds follow the data: the same rows scaled by 3.9 and by 4.1 over their largest |x| give
    # r1 (after a ReLU) tops 4.1/3.9 apart.  Until 2026-12-06 the search ran on bins over [0, R), R a power of two
    # (4 and 8 here), and the two tops were 1.5 and 2.0 (a third apart, clipping 6.8% of the ReLU's outputs).
    tops = {}
    for sc in (3.9, 4.1):
        cps = os.path.join(WORK, f'scaled_{sc}.npy')
        np.save(cps, (X * (sc / np.abs(X).max())).astype(np.float32))
        rep = os.path.join(WORK, f'rep_ent_{sc}.json')
        code, so, se = quantize(os.path.join(WORK, f'q_ent_{sc}.onnx'), '--method', 'entropy', '--report', rep,
                                calib=f'x={cps}')
        if check(code == 0, f'entropy on rows scaled to {sc} exits 0 ({se.strip()[-200:]})'):
            with open(rep) as fh:
                tops[sc] = {t['name']: t for t in json.load(fh)['tensors']}['r1']
    if len(tops) == 2:
        ratio = tops[4.1]['hi'] / tops[3.9]['hi']
        check(abs(ratio / (4.1 / 3.9) - 1) < 0.03, f'entropy: r1 tops {tops[3.9]["hi"]:.4g} and {tops[4.1]["hi"]:.4g}, '
              f'ratio {ratio:.3f} (the data\'s 1.051)')
        check(tops[3.9]['hi'] > 0.6 * tops[3.9]['max'], f'entropy: r1 top {tops[3.9]["hi"]:.4g} not far below its '
              f'largest value {tops[3.9]["max"]:.4g} (a ReLU\'s zeros made the search clip hard)')
    # a tensor of one sign away from zero keeps its range (it collapsed onto its smallest magnitude)
    neg_nodes = [helper.make_node('Add', ['x', 'ten'], ['neg'], name='shift'),
                 helper.make_node('Conv', ['neg', 'wn'], ['y'], name='convn')]
    gneg = helper.make_graph(neg_nodes, 'neg', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3, 4, 4])],
                             [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 2, 4, 4])],
                             [numpy_helper.from_array(np.array(-10, np.float32), 'ten'),
                              numpy_helper.from_array(rng.normal(0, 1, (2, 3, 1, 1)).astype(np.float32), 'wn')])
    mneg = helper.make_model(gneg, opset_imports=[helper.make_opsetid('', 13)])
    mneg.ir_version = 7
    negp = os.path.join(WORK, 'neg.onnx')
    onnx.save(mneg, negp)
    cpn = os.path.join(WORK, 'neg_cal.npy')
    np.save(cpn, rng.uniform(0, 1, (32, 3, 4, 4)).astype(np.float32))
    rep = os.path.join(WORK, 'rep_neg.json')
    code, so, se = quantize(os.path.join(WORK, 'q_neg.onnx'), '--method', 'entropy', '--report', rep, model=negp,
                            calib=f'x={cpn}')
    if check(code == 0, f'entropy on a model with an all-negative tensor exits 0 ({se.strip()[-200:]})'):
        with open(rep) as fh:
            t = {t['name']: t for t in json.load(fh)['tensors']}['neg']
        check(t['lo'] <= t['min'] + 0.05 * abs(t['min']),
              f'entropy: the all-negative tensor keeps its range: lo {t["lo"]:.4g}, smallest value {t["min"]:.4g}')

    # the default --max-node-error (0.03) leaves conv1 float on the outlier data: the outliers stretch x's
    # step, and the estimate says so; conv1 then reads x itself, not its DequantizeLinear
    out = os.path.join(WORK, 'q_default.onnx')
    rep = os.path.join(WORK, 'rep_default.json')
    code, so, se = quantize(out, '--method', 'minmax', '--report', rep, calib=f'x={cp}', keep_all=False)
    if check(code == 0, f'default --max-node-error on the outlier data exits 0 ({se.strip()[-200:]})'):
        m = onnx.load(out)
        c1 = node(m, 'conv1')
        check(c1.input[0] == 'x' and c1.input[1] == 'w1',
              f'conv1 (estimated error above 0.03 with x stretched 50x) left float: inputs {list(c1.input)[:2]}')
    out = os.path.join(WORK, 'q_default_clean.onnx')
    code, so, se = quantize(out, '--method', 'minmax', keep_all=False)
    if check(code == 0, f'default --max-node-error on the clean data exits 0 ({se.strip()[-200:]})'):
        m = onnx.load(out)
        check(all(dq_of(m, node(m, k).input[1]) is not None for k in ('conv1', 'conv2', 'fc')),
              'on the clean data the default keeps conv1, conv2 and fc quantized')

elif CASE == 'options':
    out = os.path.join(WORK, 'q_ex.onnx')
    code, so, se = quantize(out, '--exclude', 'conv2', '--op-types', 'Conv')
    if check(code == 0, f'--exclude conv2 --op-types Conv exits 0 ({se.strip()[-200:]})'):
        m = onnx.load(out)
        check(node(m, 'conv2').input[1] == 'w2', 'conv2 (excluded) keeps its float weights')
        check(node(m, 'fc').input[1] == 'wg', 'fc (Gemm, not in --op-types) keeps its float weights')
        check(dq_of(m, node(m, 'conv1').input[1]) is not None, 'conv1 is quantized')
    out = os.path.join(WORK, 'q_pt.onnx')
    code, so, se = quantize(out, '--per-tensor', '--symmetric-activations', '--calibration-rows', '8', '--report',
                            os.path.join(WORK, 'rep_pt.json'))
    if check(code == 0, f'--per-tensor --symmetric-activations exits 0 ({se.strip()[-200:]})'):
        m = onnx.load(out)
        I = inits(m)
        d = dq_of(m, node(m, 'conv1').input[1])
        check(I[d.input[1]].shape == () and not any(a.name == 'axis' for a in d.attribute), '--per-tensor: one weight scale')
        zs = [I[n.input[2]] for n in m.graph.node if n.op_type == 'QuantizeLinear']
        check(all(z.dtype == np.int8 and int(z) == 0 for z in zs), '--symmetric-activations: int8 zero points 0')
        with open(os.path.join(WORK, 'rep_pt.json')) as fh:
            check(json.load(fh)['calibration_rows'] == 8, '--calibration-rows 8: 8 rows read')
        y, why = toplu_out(out, X[:4], 'pt')
        check(y is not None, f'toplu runs the symmetric per-tensor model {why}')
    old = build(os.path.join(WORK, 'old9.onnx'), opset=9)
    out9, out13 = os.path.join(WORK, 'q9.onnx'), os.path.join(WORK, 'q13.onnx')
    c9 = quantize(out9, model=old)
    c13 = quantize(out13)
    if check(c9[0] == 0 and c13[0] == 0, f'the opset-9 model quantizes ({c9[2].strip()[-200:]})'):
        m = onnx.load(out9)
        clip = node(m, 'clip2')
        check(m.opset_import[0].version == 13 and len(clip.input) == 3 and not clip.attribute,
              f'opset 9 -> 13: Clip takes min and max as inputs ({list(clip.input)})')
        y9, w9 = toplu_out(out9, X[:8], 'o9')
        y13, w13 = toplu_out(out13, X[:8], 'o13')
        check(y9 is not None and y13 is not None and np.abs(y9 - y13).max() <= 1e-5,
              f'opset-9 and opset-13 models quantized alike give the same outputs {w9}{w13}')

elif CASE == 'errors':
    out = os.path.join(WORK, 'bad.onnx')
    old = build(os.path.join(WORK, 'old.onnx'), opset=9)
    mo = onnx.load(old)
    mo.graph.node.insert(0, helper.make_node('Upsample', ['x', 'scales'], ['xu'], name='up', mode='nearest'))
    mo.graph.node[1].input[0] = 'xu'
    mo.graph.initializer.append(numpy_helper.from_array(np.array([1, 1, 1, 1], np.float32), 'scales'))
    up = os.path.join(WORK, 'upsample9.onnx')
    onnx.save(mo, up)
    cases = [
        (('--exclude', 'nope'), None, MODEL, "'nope'"),
        (('--op-types', 'Softmax'), None, MODEL, 'Softmax'),
        ((), 'y=' + CALIB, MODEL, "'y'"),
        ((), None, up, 'Upsample'),
        # every weighted node excluded: said so (it said no such node existed; 2026-12-06)
        (('--op-types', 'Conv,Gemm', '--exclude', 'conv1,conv2,fc'), None, MODEL, 'exclude names 3 nodes'),
        # both weight-scale flags: refused (the last one given was taken)
        (('--per-channel', '--per-tensor'), None, MODEL, '--per-channel and --per-tensor: give one'),
    ]
    for extra, calib, model, want in cases:
        code, so, se = quantize(out, *extra, model=model, calib=calib)
        check(code == 2 and want in se and not os.path.exists(out),
              f'{" ".join(extra) or calib or os.path.basename(model)}: exit {code} (2), message names {want}: {se.strip()[-200:]}')
    code, so, se = run('quantize', MODEL, '--output', out)
    check(code == 2 and '--calibration' in se, f'no --calibration: exit {code}, says so')
    qq = os.path.join(WORK, 'once.onnx')
    if quantize(qq)[0] == 0:
        code, so, se = quantize(out, model=qq)
        check(code == 2 and 'quantized already' in se and not os.path.exists(out),
              f'a quantized model quantized again: exit {code}, says so: {se.strip()[-160:]}')
    code, so, se = run('quantize', MODEL, '--calibration', CALIB, '--output', MODEL)
    check(code == 2 and 'model itself' in se, f'--output the model: exit {code}, says so: {se.strip()[-120:]}')
    # outputs over the calibration data or over each other (the calibration .npy became an ONNX model, and a
    # report written over the output left no model, both with exit 0); a folder that does not exist is
    # refused before calibrating
    before = open(CALIB, 'rb').read()
    code, so, se = run('quantize', MODEL, '--calibration', CALIB, '--output', CALIB)
    check(code == 2 and 'would overwrite calibration source' in se and open(CALIB, 'rb').read() == before,
          f'--output the calibration file: exit {code}, data kept: {se.strip()[-160:]}')
    code, so, se = run('quantize', MODEL, '--calibration', CALIB, '--output', out, '--report', out)
    check(code == 2 and '--output' in se and '--report' in se and 'are the same file' in se and not os.path.exists(out),
          f'--report the output: exit {code}, says so: {se.strip()[-160:]}')
    code, so, se = run('quantize', MODEL, '--calibration', CALIB, '--output', out, '--report', CALIB)
    check(code == 2 and 'would overwrite calibration source' in se, f'--report the calibration file: exit {code}')
    code, so, se = run('quantize', MODEL, '--calibration', CALIB, '--output', os.path.join(WORK, 'no', 'such', 'q.onnx'))
    check(code == 2 and 'does not exist' in se and 'rows' not in se,
          f'--output in a missing folder: exit {code}, said before any row is read: {se.strip()[-160:]}')
elif CASE == 'sources':
    # a model of rows: x[N,4] -> Gemm(3) -> Relu -> Gemm(2) -> y
    wa = rng.normal(0, 1, (3, 4)).astype(np.float32)
    wb = rng.normal(0, 1, (2, 3)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node('Gemm', ['x', 'wa'], ['h'], name='fa', transB=1),
         helper.make_node('Relu', ['h'], ['hr'], name='relu'),
         helper.make_node('Gemm', ['hr', 'wb'], ['y'], name='fb', transB=1)],
        'rows', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 4])],
        [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 2])],
        [numpy_helper.from_array(wa, 'wa'), numpy_helper.from_array(wb, 'wb')])
    mm = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    mm.ir_version = 7
    rows_model = os.path.join(WORK, 'rows.onnx')
    onnx.save(mm, rows_model)
    R = rng.normal(0, 2, (37, 4)).astype(np.float32)
    npy_src = os.path.join(WORK, 'rows.npy')
    np.save(npy_src, R)
    csv_src = os.path.join(WORK, 'rows.csv')
    with open(csv_src, 'w') as f:
        f.write('a,b,c,d\n' + ''.join(','.join(repr(float(v)) for v in r) + '\n' for r in R))
    jsonl_src = os.path.join(WORK, 'rows.jsonl')
    with open(jsonl_src, 'w') as f:
        f.write(''.join(json.dumps({'x': [float(v) for v in r]}) + '\n' for r in R))
    bad_src = os.path.join(WORK, 'bad.csv')
    with open(bad_src, 'w') as f:
        lines = [','.join(repr(float(v)) for v in r) for r in R]
        lines.insert(5, '1.0,oops,3.0,4.0')
        f.write('a,b,c,d\n' + '\n'.join(lines) + '\n')
    outs = {}
    for tag, src, extra in (('npy', npy_src, ()), ('csv', csv_src, ()), ('jsonl', jsonl_src, ()),
                            ('npy_b5', npy_src, ('--batch-size', '5')), ('bad', bad_src, ())):
        out = os.path.join(WORK, f'q_{tag}.onnx')
        code, so, se = quantize(out, *extra, model=rows_model, calib=f'x={src}' if tag != 'jsonl' else src)
        if tag == 'bad':
            check(code == 0 and 'line 7' in se, f'a CSV line that does not parse is left out with a warning naming it: '
                  f'{se.strip()[-200:]}')
        else:
            check(code == 0, f'calibration from {tag} exits 0 ({se.strip()[-200:]})')
        if code == 0:
            with open(out, 'rb') as f:
                outs[tag] = f.read()
    if len(outs) == 5:
        check(outs['npy'] == outs['csv'] == outs['jsonl'] == outs['npy_b5'] == outs['bad'],
              'the .npy, CSV (with a header), JSONL, batch-size 5 and bad-line CSV calibrations write the same bytes')
    # the same model exported at a static batch of 5 (x [5, 4]): calibrated 5 rows a batch by default (37 rows: the
    # last batch of 2 runs with dim 0 freed, Gemm keeps rows apart), the same scales and weights as the free model's
    mm.graph.input[0].type.tensor_type.shape.dim[0].Clear()
    mm.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 5
    mm.graph.output[0].type.tensor_type.shape.dim[0].Clear()
    mm.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 5
    fixed_model = os.path.join(WORK, 'rows_b5.onnx')
    onnx.save(mm, fixed_model)
    out = os.path.join(WORK, 'q_b5.onnx')
    code, so, se = quantize(out, model=fixed_model, calib=f'x={npy_src}')
    check(code == 0, f'a model fixed at batch 5 calibrates on 37 rows by default ({se.strip()[-200:]})')
    if code == 0 and 'npy' in outs:
        a = {t.name: numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}
        b = {t.name: numpy_helper.to_array(t) for t in onnx.load_from_string(outs['npy']).graph.initializer}
        check(a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a),
              'its scales, zero points and int8 weights equal the free-batch model\'s')
    allbad = os.path.join(WORK, 'allbad.jsonl')
    with open(allbad, 'w') as f:
        f.write('{"x": [1, 2]}\n{"x": [1, 2, 3]}\n')
    code, so, se = quantize(os.path.join(WORK, 'q_allbad.onnx'), model=rows_model, calib=allbad)
    check(code == 2 and 'were bad' in se and not os.path.exists(os.path.join(WORK, 'q_allbad.onnx')),
          f'every row bad: exit {code} (2), nothing written: {se.strip()[-160:]}')
    # images the model cannot take at their size (a stride-2 branch added back to the input: odd sizes do not
    # broadcast): left out with their names, as undecodable ones are; until 2026-12-06 the first such batch
    # stopped the whole calibration naming only the node
    from PIL import Image
    wb = rng.normal(0, 0.3, (3, 3, 3, 3)).astype(np.float32)
    gb = helper.make_graph(
        [helper.make_node('Conv', ['x', 'wb'], ['c'], name='down', strides=[2, 2], pads=[1, 1, 1, 1]),
         helper.make_node('Resize', ['c', '', 'sc'], ['u'], name='up', mode='nearest'),
         helper.make_node('Add', ['u', 'x'], ['y'], name='back')],
        'branch', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3, 'H', 'W'])],
        [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3, 'H', 'W'])],
        [numpy_helper.from_array(wb, 'wb'), numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), 'sc')])
    mb = helper.make_model(gb, opset_imports=[helper.make_opsetid('', 13)])
    mb.ir_version = 7
    branch = os.path.join(WORK, 'branch.onnx')
    onnx.save(mb, branch)
    imgs = os.path.join(WORK, 'sizes')
    os.makedirs(imgs, exist_ok=True)
    for name, size in (('a16.png', 16), ('b15.png', 15), ('c16.png', 16)):
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(os.path.join(imgs, name))
    out = os.path.join(WORK, 'q_sizes.onnx')
    code, so, se = run('quantize', branch, '--calibration', imgs, '--preprocess', 'scale=1/255', '--output', out,
                       '--max-node-error', 'none', '--batch-size', '1')
    check(code == 0 and 'calibration row b15.png left out' in se and "'back' (Add)" in se and os.path.exists(out),
          f'an image the model cannot take at its size: left out by name, the rest calibrate: exit {code}: '
          f'{se.strip()[-300:]}')
    os.remove(os.path.join(imgs, 'a16.png'))
    os.remove(os.path.join(imgs, 'c16.png'))
    code, so, se = run('quantize', branch, '--calibration', imgs, '--preprocess', 'scale=1/255', '--output',
                       os.path.join(WORK, 'q_sizes2.onnx'), '--max-node-error', 'none')
    check(code == 2 and 'were bad' in se, f'and when every row is: exit {code} (2): {se.strip()[-200:]}')
    # images without a preprocess calibrate 0..255: a warning says so (silent until 2026-12-07); with one, none
    for pre, want in (((), True), (('--preprocess', 'scale=1/255'), False)):
        code, so, se = run('quantize', branch, '--calibration', imgs, *pre, '--output', os.path.join(WORK, 'q_np.onnx'),
                           '--max-node-error', 'none')
        said = 'calibration images without a preprocess' in se and 'pixel values 0..255' in se
        check(said == want, f'images {"without" if want else "with"} a preprocess: '
              f'{"a warning" if want else "no warning"} about their range: {se.strip()[-300:]}')
    # a float16 model: the refusal says toplu quantize takes float32 models (a fresh user's finding, 2026-12-07)
    m16 = onnx.load(branch)
    for t in m16.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            a = numpy_helper.to_array(t).astype(np.float16)
            t.CopyFrom(numpy_helper.from_array(a, t.name))
    for v in list(m16.graph.input) + list(m16.graph.output):
        v.type.tensor_type.elem_type = TensorProto.FLOAT16
    p16 = os.path.join(WORK, 'branch16.onnx')
    onnx.save(m16, p16)
    code, so, se = run('quantize', p16, '--calibration', imgs, '--output', os.path.join(WORK, 'q16.onnx'))
    check(code == 2 and 'nothing to quantize' in se and 'float16 or bfloat16' in se and 'float32 models' in se,
          f'a float16 model: exit {code} (2), naming float16: {se.strip()[-300:]}')

elif CASE == 'residual':
    # x -> Relu -> r; r -> Conv(wr, 1x1) -> c with four strong and four weak output channels (x0.15): the
    # per-tensor step of c is coarse for the weak ones, so conv's estimate (0.03 limit) is over the limit by its
    # output's step alone.  Read by a residual Add(c, r) that is quantized anyway, c keeps that step whether conv
    # is int8 or float: conv is judged without it and stays int8.  Read by a second Conv instead, conv goes float.
    rr = np.random.default_rng(17)
    wr = rr.normal(0, 0.35, (8, 8, 1, 1)).astype(np.float32)
    wr[4:] *= 0.15
    w2 = rr.normal(0, 0.35, (8, 8, 1, 1)).astype(np.float32)
    xr = rr.normal(0, 1, (32, 8, 8, 8)).astype(np.float32)
    cr = os.path.join(WORK, 'calib_res.npy')
    np.save(cr, xr)

    def build_res(path, reader):
        nodes = [helper.make_node('Relu', ['x'], ['r'], name='relu0'),
                 helper.make_node('Conv', ['r', 'wr'], ['c'], name='conv')]
        ins = [numpy_helper.from_array(wr, 'wr')]
        if reader == 'add':
            nodes.append(helper.make_node('Add', ['c', 'r'], ['y'], name='residual'))
        else:
            nodes.append(helper.make_node('Conv', ['c', 'w2'], ['y'], name='conv2'))
            ins.append(numpy_helper.from_array(w2, 'w2'))
        g = helper.make_graph(nodes, 'qres', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 8, 8, 8])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 8, 8, 8])], ins)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
        m.ir_version = 7
        onnx.save(m, path)
        return path

    for reader in ('add', 'conv'):
        src = build_res(os.path.join(WORK, f'res_{reader}.onnx'), reader)
        out, rep = os.path.join(WORK, f'q_res_{reader}.onnx'), os.path.join(WORK, f'rep_res_{reader}.json')
        code, so, se = quantize(out, '--method', 'minmax', '--report', rep, model=src, calib=f'x={cr}', keep_all=False)
        if not check(code == 0, f'{reader}: toplu quantize exits 0 ({se.strip()[-200:]})'):
            continue
        m = onnx.load(out)
        est = next((n.get('estimated_error', -1) for n in json.load(open(rep))['nodes'] if n['node'] == 'conv'), -1)
        int8 = dq_of(m, node(m, 'conv').input[1]) is not None
        if reader == 'add':
            check(est > 0.03, f'add: conv\'s estimate with its output\'s step {est:.4f} is above the 0.03 limit')
            check(int8, 'add: conv, whose output the quantized residual Add reads anyway, stays int8')
        else:
            check(not int8 and node(m, 'conv').input[1] == 'wr',
                  f'conv: conv read by a second Conv is left float (estimate above the limit; int8: {int8})')
            entry = next((n for n in json.load(open(rep))['nodes'] if n['node'] == 'conv'), {})
            check(entry.get('quantized') is False and entry.get('reason') == 'estimated_error' and
                  entry.get('estimated_error', 0) > 0.03 and 'relative_rms_error' in entry,
                  f'conv: the report lists it left float for its estimated error, with its measured error: {entry}')
            code, so, se = run('quantize', src, '--calibration', f'x={cr}', '--output', out, '--method', 'minmax')
            check(code == 0 and "1 node left float, estimated error above --max-node-error 0.03: conv (" in se and
                  '1 left float for their estimated error above 0.03 (named in the note above)' in se,
                  f'conv: without -q the note and the summary name it: {se.strip()[-400:]}')

elif CASE == 'plan':
    # toplu plan --precision int8 on the float model plans the int8 model toplu quantize writes
    # (toplu_quantize_model, in memory); on that written model, its own plan, unscaled.
    def plan(*args):
        code, so, se = run('plan', *args, '--json', '--batch-sizes', '1,2,8')
        check(code == 0, f'toplu plan {" ".join(str(a) for a in args[1:])} exits 0 ({se.strip()[-300:]})')
        return json.loads(so) if code == 0 else None

    q = os.path.join(WORK, 'q_plan.onnx')
    code, so, se = quantize(q, keep_all=False)
    check(code == 0, f'toplu quantize exits 0 ({se.strip()[-200:]})')
    pf = plan(MODEL)
    pq_own = plan(q, '--precision', 'int8')
    pf_int8 = plan(MODEL, '--precision', 'int8', '--int8-calibration', f'x={CALIB}')
    pf_synth = plan(MODEL, '--precision', 'int8')
    if pf and pq_own and pf_int8 and pf_synth:
        law = lambda p: p['memory_law']
        wq, wf = law(pq_own)['weights_bytes'], law(pf)['weights_bytes']
        check(law(pq_own)['precision_weight_scale'] == 1 and law(pq_own)['precision_activation_scale'] == 1,
              f"the int8 file at int8: weight and activation scales {law(pq_own)['precision_weight_scale']}, "
              f"{law(pq_own)['precision_activation_scale']} (want 1: its own bytes)")
        check(any('the model is int8' in n for n in pq_own['notes']), f"its note says the model is int8: {pq_own['notes']}")
        check(wq < wf, f'int8 weights {wq} B below float weights {wf} B')
        for what, p in (('--int8-calibration (the same rows)', pf_int8), ('synthetic rows', pf_synth)):
            same = [(r['batch_size'], r['weights_bytes'], r['activation_bytes'], r['workspace_bytes'])
                    for r in p['batch_sizes']] == [(r['batch_size'], r['weights_bytes'], r['activation_bytes'],
                                                   r['workspace_bytes']) for r in pq_own['batch_sizes']]
            check(same, f'the float model at int8 with {what}: weights, activations and workspace per row equal '
                        f'the int8 file\'s plan ({law(p)["weights_bytes"]} / {wq} B weights)')
            check(p['model'].endswith('(int8)') and law(p)['precision_weight_scale'] == 1,
                  f"{what}: planned as the in-memory int8 model, unscaled ({p['model']}, "
                  f"weight scale {law(p)['precision_weight_scale']})")
    sym = onnx.load(MODEL)
    dims = sym.graph.input[0].type.tensor_type.shape.dim
    dims[2].Clear()
    dims[2].dim_param = 'H'
    dims[3].Clear()
    dims[3].dim_param = 'W'
    sym_path = os.path.join(WORK, 'qtest_hw.onnx')
    onnx.save(sym, sym_path)
    code, so, se = run('plan', sym_path, '--precision', 'int8')
    check(code == 2 and "dim 2 is symbolic ('H')" in se and '--shape' in se,
          f'symbolic H without --shape: exit 2 naming the dim and --shape ({code}: {se.strip()[-200:]})')
    ph = plan(sym_path, '--precision', 'int8', '--shape', 'x=1x3x16x16')
    check(ph is not None and law(ph)['weights_bytes'] == wq if ph and pq_own else False,
          'with --shape x=1x3x16x16 the synthetic rows have a shape: the same weights as the int8 file')
    code, so, se = run('plan', MODEL, '--int8-calibration', f'x={CALIB}')
    check(code == 2 and '--int8-calibration' in se, f'--int8-calibration without --precision int8 exits 2 ({code}: {se.strip()[-160:]})')
    code, so, se = run('plan', MODEL, '--precision', 'int8', '--int8-calibration', 'x=/nonexistent.npy')
    check(code == 2 and 'nonexistent' in se, f'a missing --int8-calibration file exits 2 naming it ({code}: {se.strip()[-160:]})')

elif CASE == 'paths':
    # an existing output or report that is not a regular file is refused (exit 2, naming the path and what it is)
    # before any row is read, and left as it was; an existing OUT.part of the user's is never touched
    import stat as st_

    def kind(p):
        try:
            m = os.lstat(p).st_mode
        except FileNotFoundError:
            return 'missing'
        return ('link' if st_.S_ISLNK(m) else 'fifo' if st_.S_ISFIFO(m) else 'chr' if st_.S_ISCHR(m) else
                'reg' if st_.S_ISREG(m) else 'other')

    def parts():
        return sorted(f for f in os.listdir(WORK) if f.endswith('.part') and f != 'mine.onnx.part')

    fifo = os.path.join(WORK, 'fifo.onnx')
    os.mkfifo(fifo)
    target = os.path.join(WORK, 'target.txt')
    with open(target, 'w') as f:
        f.write('precious\n')
    link = os.path.join(WORK, 'outlink.onnx')
    os.symlink(target, link)
    victims = [(fifo, 'fifo', 'a FIFO'), (link, 'link', 'a symbolic link')]
    if os.geteuid() == 0:  # mknod needs root: a stand-in for /dev/null (never the real one)
        dev = os.path.join(WORK, 'fakenull')
        os.mknod(dev, 0o666 | st_.S_IFCHR, os.makedev(1, 3))
        victims.append((dev, 'chr', 'a character device'))
    else:
        print('note: not root, the character device case is left out')
    good = os.path.join(WORK, 'good.onnx')
    for path, k, words in victims:
        for flag in ('--output', '--report'):
            args = ['--output', path] if flag == '--output' else ['--output', good, '--report', path]
            # y= is no input of the model: that error would come from calibrating, so the path's error shows the
            # check comes first
            code, so, se = run('quantize', MODEL, '--calibration', f'y={CALIB}', *args, '-q')
            check(code == 2 and f'{flag} {path} exists and is {words}' in se and kind(path) == k and
                  not os.path.exists(good),
                  f'{flag} onto {words}: exit {code} (2) before calibrating, {kind(path)} kept: {se.strip()[-200:]}')
    check(open(target).read() == 'precious\n', 'the symbolic link\'s target is untouched')
    # a user's OUT.part next to the output: kept byte for byte; no temporary file left behind
    mine = os.path.join(WORK, 'mine.onnx')
    with open(mine + '.part', 'w') as f:
        f.write('my notes\n')
    with open(mine, 'w') as f:
        f.write('old model\n')
    code, so, se = quantize(mine, '--report', os.path.join(WORK, 'mine.json'))
    check(code == 0 and open(mine + '.part').read() == 'my notes\n', f'an existing mine.onnx.part is left as it was '
          f'({code}: {se.strip()[-200:]})')
    check(code == 0 and onnx.load(mine).graph.node and parts() == [],
          f'the regular mine.onnx is replaced by the model, no temporary file left: {parts()}')

elif CASE == 'cancel':
    # SIGTERM while calibrating and SIGINT while the model is being written: exit 143 / 130, no output, no
    # temporary file left
    import signal
    import time

    def parts():
        return [f for f in os.listdir(WORK) if '.part' in f]

    big = os.path.join(WORK, 'calib_big.npy')
    np.save(big, rng.normal(0, 1, (20000, 3, 16, 16)).astype(np.float32))
    out = os.path.join(WORK, 'c1.onnx')
    p = subprocess.Popen([TOPLU, 'quantize', MODEL, '--calibration', f'x={big}', '--output', out, '--report',
                          os.path.join(WORK, 'c1.json'), '--batch-size', '1', '-q'], stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    se = p.communicate(timeout=120)[1]
    check(p.returncode == 143 and 'interrupted by SIGTERM' in se and ('while calibrating' in se or 'report pass' in se) and
          not os.path.exists(out) and not os.path.exists(os.path.join(WORK, 'c1.json')) and parts() == [],
          f'SIGTERM while calibrating: exit {p.returncode} (143), nothing written, no temporary file '
          f'{parts()}: {se.strip()[-200:]}')
    # a model with 64 MiB of float weights no node quantizes (an unused initializer): writing takes long enough to
    # be interrupted once the temporary file has data
    mb = onnx.load(MODEL)
    mb.graph.initializer.append(numpy_helper.from_array(rng.normal(0, 1, 16 << 20).astype(np.float32), 'ballast'))
    bigm = os.path.join(WORK, 'ballast.onnx')
    onnx.save(mb, bigm)
    out = os.path.join(WORK, 'c2.onnx')
    hit = False
    for attempt in range(5):
        p = subprocess.Popen([TOPLU, 'quantize', bigm, '--calibration', f'x={CALIB}', '--output', out, '-q'],
                             stderr=subprocess.PIPE, text=True)
        seen = False
        while p.poll() is None and not seen:
            for f in parts():
                try:
                    seen = seen or os.path.getsize(os.path.join(WORK, f)) > 0
                except FileNotFoundError:
                    pass
            if not seen:
                time.sleep(0.0005)
        if seen:
            p.send_signal(signal.SIGINT)
        se = p.communicate(timeout=120)[1]
        if not seen or p.returncode == 0:  # finished before the poll saw the file, or before the signal landed
            print(f'note: attempt {attempt}: the write was not caught (exit {p.returncode}, seen {seen})')
            if os.path.exists(out):
                os.remove(out)
            continue
        hit = True
        check(p.returncode == 130 and 'interrupted by SIGINT' in se and 'while writing' in se and
              not os.path.exists(out) and parts() == [],
              f'SIGINT while writing: exit {p.returncode} (130), no output, the temporary file removed '
              f'{parts()}: {se.strip()[-200:]}')
        break
    check(hit, 'a SIGINT landed while the temporary file was being written')

elif CASE == 'zero':
    # all-zero calibration rows are refused (exit 2) naming the input; a tensor to quantize that is 0 on every
    # calibration row is named in a warning (shown with -q too)
    zp = os.path.join(WORK, 'zeros.npy')
    np.save(zp, np.zeros((10, 3, 16, 16), np.float32))
    out = os.path.join(WORK, 'z.onnx')
    code, so, se = quantize(out, calib=f'x={zp}')
    check(code == 2 and '--calibration' in se and "'x' always 0" in se and not os.path.exists(out),
          f'all-zero calibration rows: exit {code} (2), naming x, nothing written: {se.strip()[-300:]}')
    # x >= 0 through a Gemm of negative weights: the Relu after it is 0 on every row
    wa = -np.abs(rng.normal(0, 1, (3, 4))).astype(np.float32)
    wb = rng.normal(0, 1, (2, 3)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node('Gemm', ['x', 'wa'], ['h'], name='fa', transB=1),
         helper.make_node('Relu', ['h'], ['hr'], name='relu'),
         helper.make_node('Gemm', ['hr', 'wb'], ['y'], name='fb', transB=1)],
        'dead', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 4])],
        [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 2])],
        [numpy_helper.from_array(wa, 'wa'), numpy_helper.from_array(wb, 'wb')])
    mm = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    mm.ir_version = 7
    dm = os.path.join(WORK, 'deadrelu.onnx')
    onnx.save(mm, dm)
    rp = os.path.join(WORK, 'pos.npy')
    np.save(rp, np.abs(rng.normal(0, 1, (32, 4))).astype(np.float32))
    code, so, se = quantize(out, model=dm, calib=f'x={rp}')
    check(code == 0 and 'warning' in se and "1 tensor to quantize had every value 0" in se and "'hr'" in se and
          "'x'" not in se, f'a Relu output 0 on every row: exit {code}, a warning names hr (and not x): {se.strip()[-300:]}')
    code, so, se = quantize(out)
    check(code == 0 and 'every value 0' not in se, f'real rows: no zero-range warning ({se.strip()[-200:]})')
    # a range no float32 scale holds (calibration values of 1e-44, subnormal): the scale is 1, as for a zero range,
    # never 0 (a fresh user's finding of 2026-12-07: y_scale 0 was written, and every run answered wrongly with
    # exit 0); the written model loads and runs
    tp = os.path.join(WORK, 'tiny.npy')
    np.save(tp, (rng.random((6, 4)) * 1e-44).astype(np.float32))
    tiny_out = os.path.join(WORK, 'tiny.onnx')
    code, so, se = quantize(tiny_out, model=dm, calib=f'x={tp}')
    scales = [v for k, v in inits(onnx.load(tiny_out)).items() if k.endswith('scale')] if code == 0 else []
    check(code == 0 and scales and all(np.all(np.isfinite(v) & (v > 0)) for v in scales) and
          'range under 3e-36' in se,
          f'calibration values of 1e-44: exit {code}, every scale finite and above 0 ({scales}), warned: '
          f'{se.strip()[-300:]}')
    code, _, se = run('info', tiny_out)
    check(code == 0, f'the model written from them loads ({se.strip()[-200:]})')
    # the engine refuses a constant QuantizeLinear scale of 0 (x / 0) or NaN and a DequantizeLinear scale of Inf,
    # naming the node and the scale (each ran and answered zeros or NaN)
    for op, sv, words in (('QuantizeLinear', 0.0, "y_scale 's' element 0 is 0"),
                          ('QuantizeLinear', float('nan'), "y_scale 's' element 0 is nan"),
                          ('DequantizeLinear', float('inf'), "x_scale 's' element 0 is inf")):
        xin = 'x' if op == 'QuantizeLinear' else 'xq'
        g = helper.make_graph(
            [helper.make_node(op, [xin, 's', 'z'], ['y'], name='qnode')], 'badscale',
            [helper.make_tensor_value_info(xin, TensorProto.FLOAT if op == 'QuantizeLinear' else TensorProto.INT8,
                                           ['N', 4])],
            [helper.make_tensor_value_info('y', TensorProto.INT8 if op == 'QuantizeLinear' else TensorProto.FLOAT,
                                           ['N', 4])],
            [numpy_helper.from_array(np.array(sv, np.float32), 's'), numpy_helper.from_array(np.array(0, np.int8), 'z')])
        mm = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
        mm.ir_version = 7
        bp = os.path.join(WORK, 'badscale.onnx')
        onnx.save(mm, bp)
        code, _, se = run('info', bp)
        check(code == 2 and "'qnode'" in se and words in se,
              f'{op} with scale {sv}: exit {code} (2), naming the node and the scale: {se.strip()[-300:]}')
    # NaN inside the model on the calibration rows (Sqrt of negative values before a Gemm): a warning names the
    # tensor, and the report gives the nodes whose float output is NaN no error (it gave 0.0, "perfect")
    g = helper.make_graph(
        [helper.make_node('Sqrt', ['x'], ['s'], name='sq'),
         helper.make_node('Gemm', ['s', 'wb4'], ['y'], name='fc', transB=1)],
        'nan', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 4])],
        [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3])],
        [numpy_helper.from_array(rng.normal(0, 1, (3, 4)).astype(np.float32), 'wb4')])
    mm = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    mm.ir_version = 7
    nm = os.path.join(WORK, 'nan.onnx')
    onnx.save(mm, nm)
    xn = rng.normal(0, 1, (32, 4)).astype(np.float32)
    xn[::2] = np.abs(xn[::2])  # half the rows finite all through, half with NaN after Sqrt
    np.save(os.path.join(WORK, 'nanx.npy'), xn)
    rep = os.path.join(WORK, 'nan_report.json')
    code, so, se = quantize(out, '--report', rep, model=nm, calib=f'x={os.path.join(WORK, "nanx.npy")}')
    if check(code == 0 and 'held NaN or Inf on the calibration rows' in se and "'s'" in se,
             f'NaN inside the model: a warning names s ({se.strip()[-300:]})'):
        r = json.load(open(rep))
        fc = [e for e in r['nodes'] if e['node'] == 'fc']
        check(fc and fc[0].get('relative_rms_error') is None and 'NaN or Inf' in fc[0].get('error_not_measured', ''),
              f'the report measures no error for fc: {fc}')
        st = [t for t in r['tensors'] if t['name'] == 's']
        check(st and st[0].get('nonfinite_values', 0) > 0, f'and counts the NaN values of s: {st}')

elif CASE == 'report':
    # every node of --op-types is in the report with "quantized" and, if not, its reason; unnamed nodes are
    # OPTYPE_INDEX there, in --exclude and in the written model
    wa = rng.normal(0, 0.5, (6, 4)).astype(np.float32)
    wb = rng.normal(0, 0.5, (3, 6)).astype(np.float32)
    cb = rng.normal(0, 0.1, 6).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node('Gemm', ['x', 'wa'], ['h'], transB=1),             # Gemm_0
         helper.make_node('Add', ['h', 'cb'], ['hb']),                       # Add_1: a constant operand
         helper.make_node('Relu', ['hb'], ['hr']),                           # Relu_2
         helper.make_node('Gemm', ['hr', 'wb'], ['y'], transB=1)],           # Gemm_3: its output is the model's
        'unnamed', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 4])],
        [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3])],
        [numpy_helper.from_array(wa, 'wa'), numpy_helper.from_array(wb, 'wb'), numpy_helper.from_array(cb, 'cb')])
    mm = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    mm.ir_version = 7
    um = os.path.join(WORK, 'unnamed.onnx')
    onnx.save(mm, um)
    rp = os.path.join(WORK, 'rows.npy')
    np.save(rp, rng.normal(0, 1, (40, 4)).astype(np.float32))

    def report_of(tag, *extra, keep_all=True):
        out, rep = os.path.join(WORK, f'{tag}.onnx'), os.path.join(WORK, f'{tag}.json')
        code, so, se = quantize(out, '--report', rep, *extra, model=um, calib=f'x={rp}', keep_all=keep_all)
        ok = check(code == 0, f'{tag}: exit {code} ({se.strip()[-200:]})')
        return (json.load(open(rep)), onnx.load(out)) if ok else (None, None)

    R, m = report_of('all')
    if R:
        N = {n['node']: n for n in R['nodes']}
        check(list(N) == ['Gemm_0', 'Add_1', 'Gemm_3'], f'every Gemm and Add listed, unnamed ones as OPTYPE_INDEX: {list(N)}')
        g3 = N.get('Gemm_3', {})
        check(N.get('Gemm_0', {}).get('quantized') and g3.get('quantized') and g3.get('output') == 'y' and
              0 < g3.get('relative_rms_error', -1) < 0.1,
              f'Gemm_3, whose output is the model output y, is listed quantized with its error at y: {N.get("Gemm_3")}')
        a1 = N.get('Add_1', {})
        check(a1.get('quantized') is False and a1.get('reason') == 'inputs' and 'relative_rms_error' not in a1,
              f'Add_1 (a constant operand) is listed not quantized, reason inputs: {N.get("Add_1")}')
        int8 = {n.name for n in m.graph.node if n.op_type == 'Gemm' and dq_of(m, n.input[1]) is not None}
        check(int8 == {'Gemm_0', 'Gemm_3'} == {k for k, v in N.items() if v['quantized']} and R['nodes_quantized'] == 2,
              f'the report\'s quantized nodes are the written model\'s int8 Gemms, named as in the report: {sorted(int8)}')
    R, m = report_of('ex', '--exclude', 'Gemm_0')
    if R:
        N = {n['node']: n for n in R['nodes']}
        check(N['Gemm_0']['quantized'] is False and N['Gemm_0']['reason'] == 'excluded' and
              node(m, 'Gemm_0').input[1] == 'wa', f'--exclude Gemm_0 (an unnamed node) leaves it float: {N.get("Gemm_0")}')
    R, m = report_of('tight', '--max-node-error', '1e-9', keep_all=False)
    if R:
        N = {n['node']: n for n in R['nodes']}
        check(all(N[k]['quantized'] is False and N[k]['reason'] == 'estimated_error' and N[k]['estimated_error'] > 1e-9 and
                  'relative_rms_error' in N[k] for k in ('Gemm_0', 'Gemm_3')) and R['nodes_left_float'] == 2,
              f'--max-node-error 1e-9: both Gemms listed left float for their estimated error, measured: '
              f'{[N.get(k) for k in ("Gemm_0", "Gemm_3")]}')

elif CASE == 'dead':
    # PaddleOCR det's p2o.Conv.22 in small: GlobalAveragePool -> 1x1 Conv whose last 2 output channels have
    # all-zero weights and a bias of 1e-28 -> Relu -> 1x1 Conv.  The dead channels are left out of the
    # estimate: it stays what it is without them, and the Conv stays int8.
    rr = np.random.default_rng(5)
    w1 = rr.normal(0, 0.5, (8, 8, 1, 1)).astype(np.float32)
    b1 = rr.normal(0.2, 0.1, 8).astype(np.float32)
    w2 = rr.normal(0, 0.5, (8, 8, 1, 1)).astype(np.float32)
    xd = rr.normal(0, 1, (32, 8, 6, 6)).astype(np.float32)
    cd = os.path.join(WORK, 'calib_dead.npy')
    np.save(cd, xd)

    def build_se(path, dead):
        a, b, c = w1.copy(), b1.copy(), w2.copy()
        if dead:
            a[6:] = 0
            b[6:] = 1e-28
            c[:, 6:] = 0
        else:  # the same model without the two dead channels
            a, b, c = a[:6], b[:6], c[:, :6]
        nodes = [helper.make_node('GlobalAveragePool', ['x'], ['p'], name='gap'),
                 helper.make_node('Conv', ['p', 'w1', 'b1'], ['s'], name='se1'),
                 helper.make_node('Relu', ['s'], ['sr'], name='relu'),
                 helper.make_node('Conv', ['sr', 'w2'], ['y'], name='se2')]
        g = helper.make_graph(nodes, 'se', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 8, 6, 6])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 8, 1, 1])],
                              [numpy_helper.from_array(a, 'w1'), numpy_helper.from_array(b, 'b1'),
                               numpy_helper.from_array(c, 'w2')])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
        m.ir_version = 7
        onnx.save(m, path)
        return path

    est = {}
    for dead in (True, False):
        src = build_se(os.path.join(WORK, f'se_{dead}.onnx'), dead)
        out, rep = os.path.join(WORK, f'q_se_{dead}.onnx'), os.path.join(WORK, f'rep_se_{dead}.json')
        code, so, se = quantize(out, '--method', 'minmax', '--report', rep, model=src, calib=f'x={cd}', keep_all=False)
        if not check(code == 0, f'dead={dead}: exit {code} ({se.strip()[-200:]})'):
            continue
        e = next(n for n in json.load(open(rep))['nodes'] if n['node'] == 'se1')
        est[dead] = e.get('estimated_error', -1)
        if dead:
            m = onnx.load(out)
            check(e.get('quantized') is True and dq_of(m, node(m, 'se1').input[1]) is not None and 0 < est[dead] < 0.03,
                  f'se1 with 2 dead channels: estimate {est[dead]:.3g} (not ~1e+28), int8: {e}')
    if len(est) == 2:
        check(abs(est[True] - est[False]) <= 0.01 * est[False],
              f'the estimate with dead channels {est[True]:.4g} is that of the model without them {est[False]:.4g} (1%)')

elif CASE == 'flags':
    # options that do nothing in a mode are refused, not ignored
    out = os.path.join(WORK, 'f.onnx')
    for args in (['--method', 'minmax'], ['--symmetric-activations'], ['--max-node-error', '0.1'],
                 ['--calibration-rows', '5'], ['--batch-size', '4'], ['--threads', '1'], ['--csv-header', 'yes'],
                 ['--csv-delimiter', ';']):
        code, so, se = run('quantize', MODEL, '--dynamic', '--output', out, *args)
        first = se.strip().splitlines()[0] if se.strip() else ''
        check(code == 2 and f'--dynamic takes no {args[0]}' in first and not os.path.exists(out),
              f'--dynamic {" ".join(args)}: exit {code} (2) naming {args[0]}: {first[-160:]}')
    code, so, se = run('quantize', MODEL, '--dynamic', '--output', out, '-q')
    check(code == 0 and os.path.exists(out), f'--dynamic alone still works ({se.strip()[-160:]})')
    for val in ('', ','):
        code, so, se = run('quantize', MODEL, '--calibration', f'x={CALIB}', '--output', out + '2', '--op-types', val)
        check(code == 2 and '--op-types' in se and not os.path.exists(out + '2'),
              f"--op-types '{val}': exit {code} (2), naming --op-types: {se.strip().splitlines()[0][-160:] if se.strip() else ''}")
    code, so, se = run('quantize', MODEL, '--calibration', f'x={CALIB}', '--output', out, '--max-node-error', 'none')
    summary = [l for l in se.splitlines() if ' -> ' in l]
    check(code == 0 and summary and 'estimated error above' not in summary[0] and
          'no node left float for its error (--max-node-error none)' in summary[0],
          f'--max-node-error none: the summary says so, no limit: {summary}')
    code, so, se = run('quantize', MODEL, '--calibration', f'x={CALIB}', '--output', out)
    summary = [l for l in se.splitlines() if ' -> ' in l]
    check(code == 0 and summary and 'no node left float for its error (limit 0.03)' in summary[0],
          f'the default limit with nothing left float: the summary says so: {summary}')

elif CASE == 'shared':
    # Until 2026-12-06 the second reader of a shared initializer took the first's DequantizeLinear names: two
    # nodes writing one output (onnx.checker: not SSA; ONNX Runtime: two nodes with the same name), exit 0.
    WS = rng.normal(0, 0.4, (4, 4, 1, 1)).astype(np.float32)
    BS = rng.normal(0, 0.2, 4).astype(np.float32)
    WM = rng.normal(0, 0.3, (16, 16)).astype(np.float32)
    nodes = [helper.make_node('Conv', ['x', 'ws', 'bs'], ['c1'], name='conv_a'),
             helper.make_node('Relu', ['c1'], ['r1'], name='relu_a'),
             helper.make_node('Conv', ['r1', 'ws', 'bs'], ['c2'], name='conv_b'),
             helper.make_node('Flatten', ['c2'], ['f'], name='flat', axis=1),
             helper.make_node('MatMul', ['f', 'wm'], ['m1'], name='mm_a'),
             helper.make_node('Relu', ['m1'], ['r2'], name='relu_b'),
             helper.make_node('MatMul', ['r2', 'wm'], ['y'], name='mm_b')]
    g = helper.make_graph(nodes, 'shared', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 4, 2, 2])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 16])],
                          [numpy_helper.from_array(WS, 'ws'), numpy_helper.from_array(BS, 'bs'),
                           numpy_helper.from_array(WM, 'wm')])
    mdl = os.path.join(WORK, 'shared.onnx')
    m0 = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m0.ir_version = 7
    onnx.save(m0, mdl)
    xs = rng.normal(0, 1, (64, 4, 2, 2)).astype(np.float32)
    cal = os.path.join(WORK, 'shared_cal.npy')
    np.save(cal, xs)
    out = os.path.join(WORK, 'shared_q.onnx')
    code, so, se = quantize(out, model=mdl, calib=f'x={cal}')
    if check(code == 0, f'a model with shared initializers quantizes ({se.strip()[-300:]})'):
        m = onnx.load(out)
        try:
            onnx.checker.check_model(m, full_check=True)
            why = ''
        except Exception as e:  # noqa: BLE001 (the checker's own exception types vary by version)
            why = str(e)[:300]
        check(not why, f'the file passes onnx.checker\'s full check {why}')
        names = [n.name for n in m.graph.node]
        outs = [o for n in m.graph.node for o in n.output]
        check(len(names) == len(set(names)) and len(outs) == len(set(outs)), 'node names and outputs unique')
        ca, cb = node(m, 'conv_a'), node(m, 'conv_b')
        dqa, dqb = dq_of(m, ca.input[2]), dq_of(m, cb.input[2])
        if check(dqa is not None and dqb is not None and dqa.name != dqb.name,
                 'each Conv reads its bias through a DequantizeLinear of its own'):
            iv = inits(m)
            sa, sb = iv[dqa.input[1]], iv[dqb.input[1]]
            # the bias scale is the reader's input scale times the weight scale: the Convs' inputs differ
            check(not np.allclose(sa, sb), f'with its own scale (x_scale * w_scale): {sa.ravel()[:2]} {sb.ravel()[:2]}')
        check(all(dq_of(m, node(m, k).input[1]) is not None for k in ('conv_a', 'conv_b', 'mm_a', 'mm_b')),
              'all four weighted nodes read quantized weights')
        xp = os.path.join(WORK, 'shared_x.npy')
        np.save(xp, xs[:8])
        od = os.path.join(WORK, 'shared_out')
        code, so, se = run('run', out, '--input', f'x={xp}', '--output', od, '-q')
        if check(code == 0, f'toplu runs the quantized file ({se.strip()[-300:]})'):
            got = np.load(os.path.join(od, 'y.npy')).astype(np.float64)
            x64 = xs[:8].astype(np.float64)
            w = WS.reshape(4, 4).astype(np.float64)
            c1 = np.einsum('oc,nchw->nohw', w, x64) + BS.reshape(1, 4, 1, 1)
            c2 = np.einsum('oc,nchw->nohw', w, np.maximum(c1, 0)) + BS.reshape(1, 4, 1, 1)
            want = np.maximum(c2.reshape(8, 16) @ WM, 0) @ WM
            rel = np.abs(got - want).max() / np.abs(want).max()
            check(rel < 0.05, f'and its output is near the float model\'s (max error {rel:.4f} of the largest value)')
    # Names the quantizer makes that a node of the file has already: an unnamed Conv at index 1 after a Conv named
    # Conv_1 (it was named Conv_1 too), a node named x_QuantizeLinear (the QuantizeLinear made for x took the name):
    # two nodes of one name, which ONNX Runtime refuses to load (exit 0 until 2026-12-06).
    W4 = rng.normal(0, 0.4, (4, 4, 1, 1)).astype(np.float32)
    nodes = [helper.make_node('Conv', ['x', 'w4'], ['a'], name='Conv_1'), helper.make_node('Conv', ['a', 'w4'], ['b']),
             helper.make_node('Relu', ['b'], ['y'], name='x_QuantizeLinear')]
    g = helper.make_graph(nodes, 'names', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 4, 2, 2])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 4, 2, 2])],
                          [numpy_helper.from_array(W4, 'w4')])
    mdl = os.path.join(WORK, 'names.onnx')
    m0 = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m0.ir_version = 7
    onnx.save(m0, mdl)
    out, rep = os.path.join(WORK, 'names_q.onnx'), os.path.join(WORK, 'names_q.json')
    code, so, se = quantize(out, '--report', rep, model=mdl, calib=f'x={cal}')
    if check(code == 0, f'a model whose names collide with made ones quantizes ({se.strip()[-300:]})'):
        m = onnx.load(out)
        names = [n.name for n in m.graph.node]
        check(len(names) == len(set(names)), f'node names unique: {sorted(names)}')
        convs = [n.name for n in m.graph.node if n.op_type == 'Conv']
        r = json.load(open(rep))
        rn = sorted(e['node'] for e in r['nodes'] if e.get('op_type', e.get('op')) == 'Conv') if r.get('nodes') else []
        check(convs == ['Conv_1', 'Conv_1_1'] and rn == ['Conv_1', 'Conv_1_1'],
              f'the unnamed Conv is Conv_1_1 in the file and the report ({convs}, {rn})')
    # A Clip whose min is below 0 is not taken into the Conv before it: the Conv's output is quantized and the Clip
    # reads a DequantizeLinear (quantized after Conv -> Clip(-1, 1), ONNX Runtime's optimizer made two nodes of one
    # name and refused the file); Clip(0, 6) is still taken in (the Conv's quantized output is the Clip's)
    for lo, taken in ((-1.0, False), (0.0, True)):
        nodes = [helper.make_node('Conv', ['x', 'w4'], ['a'], name='c1'),
                 helper.make_node('Clip', ['a', 'lo', 'hi'], ['b'], name='clip'),
                 helper.make_node('Conv', ['b', 'w4'], ['y'], name='c2')]
        g = helper.make_graph(nodes, 'clip', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 4, 2, 2])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 4, 2, 2])],
                              [numpy_helper.from_array(W4, 'w4'), numpy_helper.from_array(np.array(lo, np.float32), 'lo'),
                               numpy_helper.from_array(np.array(6.0 if taken else 1.0, np.float32), 'hi')])
        mdl = os.path.join(WORK, f'clip{lo}.onnx')
        m0 = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
        m0.ir_version = 7
        onnx.save(m0, mdl)
        out = os.path.join(WORK, f'clip{lo}_q.onnx')
        code, so, se = quantize(out, model=mdl, calib=f'x={cal}')
        if check(code == 0, f'Conv -> Clip({lo}, ...) -> Conv quantizes ({se.strip()[-200:]})'):
            m = onnx.load(out)
            prod = {o: n for n in m.graph.node for o in n.output}
            clip_in = prod.get(node(m, 'clip').input[0])
            check((clip_in is not None and clip_in.op_type == 'DequantizeLinear') != taken,
                  f'Clip({lo}): its input comes from {clip_in.op_type if clip_in is not None else None}')

elif CASE == 'writefail':
    # a write error (here a file size limit, as `ulimit -f` sets it, with SIGXFSZ at its default: toplu must not
    # be killed by it) is a failure while running: exit 1 as the help says, nothing written, no temporary file
    import resource
    import signal

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)

    out = os.path.join(WORK, 'w.onnx')
    p = subprocess.run([TOPLU, 'quantize', MODEL, '--calibration', f'x={CALIB}', '--output', out, '-q'],
                       capture_output=True, text=True, timeout=300, preexec_fn=small_files)
    left = [f for f in os.listdir(WORK) if '.part' in f]
    check(p.returncode == 1 and 'File too large' in p.stderr and '--output' in p.stderr and not os.path.exists(out)
          and left == [], f'a write past the file size limit: exit {p.returncode} (1), says so, nothing written, '
          f'no temporary file {left}: {p.stderr.strip()[-200:]}')
    code, so, se = quantize(out)
    check(code == 0 and os.path.getsize(out) > 600, f'without the limit the same call writes {out} (over 600 bytes)')

else:
    sys.exit(f'unknown case {CASE}')

sys.exit(1 if failures else 0)
