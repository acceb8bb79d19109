#!/usr/bin/env node
'use strict';
/*
 * scripts/ort-node-test.js - run ONNX backend node tests with ONNX Runtime
 * (onnxruntime-node) and say whether ORT reproduces the expected outputs the
 * test suite ships.  Used to tell toplu bugs from tests whose expected output
 * (ONNX 1.12) ORT disagrees with too; those are listed in the notes section
 * of docs/conformance.md.
 *
 *   node scripts/ort-node-test.js TEST_DIR [TEST_DIR ...] [--rtol X] [--atol X]
 *
 * The .pb files (TensorProto) are converted to .npy by /usr/bin/python3 with
 * onnx.numpy_helper; the comparison rule is toplu-conformance's:
 * |got - want| <= atol + rtol*|want| (default 1e-5, 1e-3), NaN equals NaN,
 * integers and bool exact.  Prints one line per test:
 *   ORT-MATCH test_x | ORT-DIFFERS test_x: <first mismatch> | ORT-ERROR test_x: <message>
 * Exit status: 0 when ORT matches every test, 1 otherwise, 2 on usage errors.
 */
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const { readNpy, loadOrt } = require('./npy');

/* Convert every test's .pb files to OUT/<k>/<set>/<name>.npy in one Python
 * process (k = the test's position); a test that cannot be converted gets
 * OUT/<k>/error.txt. */
const PY = `
import sys, os, glob, numpy as np, onnx
from onnx import numpy_helper
out = sys.argv[1]
for k, test in enumerate(sys.argv[2:]):
    base = os.path.join(out, str(k))
    os.makedirs(base, exist_ok=True)
    try:
        for d in sorted(glob.glob(os.path.join(test, 'test_data_set_*'))):
            od = os.path.join(base, os.path.basename(d))
            os.makedirs(od, exist_ok=True)
            for f in sorted(glob.glob(os.path.join(d, '*.pb'))):
                t = onnx.TensorProto()
                with open(f, 'rb') as fh:
                    t.ParseFromString(fh.read())
                a = numpy_helper.to_array(t)
                if a.dtype == object:
                    raise ValueError('string tensor in ' + os.path.basename(f))
                np.save(os.path.join(od, os.path.basename(f)[:-3] + '.npy'), a)
    except Exception as e:
        with open(os.path.join(base, 'error.txt'), 'w') as fh:
            fh.write(str(e).splitlines()[0] if str(e) else type(e).__name__)
`;

/* Load onnxruntime-node: toplu's cache, then $TOPLU_ORT or /root/.cache/toplu-ort. */
function ort() {
  try {
    return loadOrt();
  } catch (e) {
    const alt = process.env.TOPLU_ORT || '/root/.cache/toplu-ort';
    return require(path.join(alt, 'node_modules', 'onnxruntime-node'));
  }
}

/* Element i as a Number (BigInt arrays converted). */
function num(data, i) {
  const v = data[i];
  return typeof v === 'bigint' ? Number(v) : v;
}

/* Float16 bits to a Number. */
function half(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
  if (e === 0) return s * f * Math.pow(2, -24);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * Math.pow(2, e - 15);
}

/* First mismatch between ORT's output and the expected .npy, or null. */
function compare(name, got, want, rtol, atol) {
  const gd = got.dims.join(','), wd = want.dims.join(',');
  if (gd !== wd) return `output '${name}': shape [${gd}], expected [${wd}]`;
  const isFloat = ['float32', 'float64', 'float16'].includes(want.type);
  const f16 = want.type === 'float16';
  let bad = 0, first = -1;
  for (let i = 0; i < want.data.length; i++) {
    let g = num(got.data, i), w = num(want.data, i);
    if (f16) {
      g = half(g);
      w = half(w);
    }
    let ok;
    if (!isFloat) ok = want.type === 'bool' ? (!!g === !!w) : g === w;
    else if (Number.isNaN(w)) ok = Number.isNaN(g);
    else if (!Number.isFinite(w)) ok = g === w;
    else ok = Math.abs(g - w) <= atol + rtol * Math.abs(w);
    if (!ok) {
      bad++;
      if (first < 0) first = i;
    }
  }
  if (!bad) return null;
  let g = num(got.data, first), w = num(want.data, first);
  if (f16) {
    g = half(g);
    w = half(w);
  }
  return `output '${name}' ${want.type}: index ${first}: ORT ${g}, expected ${w} (${bad} of ${want.data.length} differ)`;
}

/* Run one test directory whose data was converted to tmp; returns [verdict, message]. */
async function runTest(o, dir, tmp, rtol, atol) {
  try {
    const errFile = path.join(tmp, 'error.txt');
    if (fs.existsSync(errFile)) return ['ORT-ERROR', `converting .pb: ${fs.readFileSync(errFile, 'utf8')}`];
    const sess = await o.InferenceSession.create(path.join(dir, 'model.onnx'));
    for (const set of fs.readdirSync(tmp).filter((n) => n.startsWith('test_data_set_')).sort()) {
      const sd = path.join(tmp, set);
      const feeds = {};
      sess.inputNames.forEach((name, i) => {
        const f = path.join(sd, `input_${i}.npy`);
        if (!fs.existsSync(f)) return;
        const t = readNpy(f);
        feeds[name] = new o.Tensor(t.type, t.data, t.dims);
      });
      const res = await sess.run(feeds);
      for (let i = 0; i < sess.outputNames.length; i++) {
        const f = path.join(sd, `output_${i}.npy`);
        if (!fs.existsSync(f)) continue;
        const name = sess.outputNames[i];
        const msg = compare(name, res[name], readNpy(f), rtol, atol);
        if (msg) return ['ORT-DIFFERS', `${set}: ${msg}`];
      }
    }
    return ['ORT-MATCH', ''];
  } catch (e) {
    return ['ORT-ERROR', String(e.message || e).split('\n')[0]];
  }
}

async function main() {
  const args = process.argv.slice(2);
  let rtol = 1e-3, atol = 1e-5;
  const dirs = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--rtol') rtol = Number(args[++i]);
    else if (args[i] === '--atol') atol = Number(args[++i]);
    else if (args[i].startsWith('-')) {
      console.error('usage: ort-node-test.js TEST_DIR [TEST_DIR ...] [--rtol X] [--atol X]');
      process.exit(2);
    } else dirs.push(args[i]);
  }
  if (!dirs.length) {
    console.error('usage: ort-node-test.js TEST_DIR [TEST_DIR ...] [--rtol X] [--atol X]');
    process.exit(2);
  }
  const o = ort();
  const clean = dirs.map((d) => d.replace(/\/+$/, ''));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-node-test-'));
  let all = true;
  try {
    const py = spawnSync('/usr/bin/python3', ['-c', PY, tmp, ...clean], { encoding: 'utf8' });
    if (py.status !== 0) {
      console.error(`ort-node-test: converting .pb files failed: ${(py.stderr || '').trim()}`);
      process.exit(2);
    }
    for (let k = 0; k < clean.length; k++) {
      const [v, msg] = await runTest(o, clean[k], path.join(tmp, String(k)), rtol, atol);
      if (v !== 'ORT-MATCH') all = false;
      console.log(`${v} ${path.basename(clean[k])}${msg ? ': ' + msg : ''}`);
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  process.exit(all ? 0 : 1);
}

main();
