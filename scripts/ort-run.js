#!/usr/bin/env node
'use strict';
/*
 * scripts/ort-run.js - run an ONNX model with ONNX Runtime (onnxruntime-node,
 * installed into the cache by scripts/fetch-models.sh) on .npy inputs: the
 * reference ("oracle") that toplu's model tests compare against.
 *
 *   node scripts/ort-run.js MODEL IN.npy OUT.npy
 *       first input <- IN.npy, first output -> OUT.npy
 *   node scripts/ort-run.js MODEL --input NAME=FILE.npy ... --output DIR
 *       [--per-sample | --steps NAME [--carry IN=OUT]...] [--threads T]
 *       every output -> DIR/<name>.npy (characters outside [A-Za-z0-9._-] -> '_')
 *
 * --per-sample runs the batch one row (dim 0) at a time and concatenates the
 * outputs: for models whose file fixes the batch dim to 1.
 * --steps NAME: NAME's file holds one input per step along an extra leading
 * dim T; the model runs T times, step t on NAME[t], and every output is
 * written stacked, [T, ...].  --carry IN=OUT feeds output OUT of step t as
 * input IN of step t+1 (IN's file is step 0's): a streaming model's state
 * (Silero VAD).  Without either option every input goes in as it is.
 */
const path = require('path');
const { readNpy, writeNpy, loadOrt, outputFileName } = require('./npy');

/* Print usage and exit 2. */
function usage(msg) {
  if (msg) console.error(`ort-run: ${msg}`);
  console.error('usage: ort-run.js MODEL IN.npy OUT.npy\n' +
    '       ort-run.js MODEL --input NAME=FILE.npy ... --output DIR [--per-sample] [--threads T]');
  process.exit(2);
}

/* Rows [r0, r1) of a tensor along dim 0, as an ort.Tensor. */
function sliceRows(ort, t, r0, r1) {
  const row = t.dims.slice(1).reduce((a, b) => a * b, 1);
  const data = t.data.slice(r0 * row, r1 * row);
  return new ort.Tensor(t.type, data, [r1 - r0, ...t.dims.slice(1)]);
}

/* Concatenate ort.Tensors along dim 0 into {type, dims, data}. */
function concatRows(parts) {
  const first = parts[0];
  const n = parts.reduce((a, p) => a + p.dims[0], 0);
  const total = parts.reduce((a, p) => a + p.data.length, 0);
  const Ctor = first.data.constructor;
  const data = new Ctor(total);
  let off = 0;
  for (const p of parts) {
    data.set(p.data, off);
    off += p.data.length;
  }
  return { type: first.type, dims: [n, ...first.dims.slice(1)], data };
}

/* Parse arguments, run, write outputs. */
async function main() {
  const args = process.argv.slice(2);
  if (args.length < 1) usage();
  const model = args[0];
  const inputs = [];
  let outDir = null, outFile = null, perSample = false, threads = 1, steps = null;
  const carry = {};
  let positional = [];
  for (let i = 1; i < args.length; i++) {
    const a = args[i];
    if (a === '--input') {
      const v = args[++i];
      if (!v || !v.includes('=')) usage('--input needs NAME=FILE.npy');
      const k = v.indexOf('=');
      inputs.push([v.slice(0, k), v.slice(k + 1)]);
    } else if (a === '--output') {
      outDir = args[++i];
    } else if (a === '--per-sample') {
      perSample = true;
    } else if (a === '--steps') {
      steps = args[++i];
    } else if (a === '--carry') {
      const v = args[++i];
      if (!v || !v.includes('=')) usage('--carry needs IN=OUT');
      carry[v.slice(0, v.indexOf('='))] = v.slice(v.indexOf('=') + 1);
    } else if (a === '--threads') {
      threads = parseInt(args[++i], 10);
    } else if (a.startsWith('--')) {
      usage(`unknown option ${a}`);
    } else {
      positional.push(a);
    }
  }
  if (positional.length === 2 && inputs.length === 0 && !outDir) {
    inputs.push([null, positional[0]]);
    outFile = positional[1];
  } else if (positional.length || !outDir || !inputs.length) {
    usage();
  }

  const ort = loadOrt();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const [name, file] of inputs) {
    const key = name === null ? session.inputNames[0] : name;
    if (!session.inputNames.includes(key)) {
      throw new Error(`${model} has no input ${key} (inputs: ${session.inputNames.join(', ')})`);
    }
    feeds[key] = readNpy(file);
  }
  if (steps && perSample) usage('--steps and --per-sample do not go together');
  if (steps && !feeds[steps]) usage(`--steps ${steps}: no such --input`);
  const results = {};
  if (steps) {
    let prev = null;
    const t = feeds[steps];
    for (let i = 0; i < t.dims[0]; i++) {
      const f = {};
      for (const [k, x] of Object.entries(feeds)) {
        if (k === steps) {
          const step = sliceRows(ort, x, i, i + 1);
          f[k] = new ort.Tensor(x.type, step.data, x.dims.slice(1));
        } else if (prev && carry[k]) {
          f[k] = prev[carry[k]];
        } else {
          f[k] = new ort.Tensor(x.type, x.data, x.dims);
        }
      }
      prev = await session.run(f);
      for (const name of session.outputNames) {
        const o = prev[name];
        (results[name] = results[name] || []).push({ type: o.type, dims: [1, ...o.dims], data: o.data });
      }
    }
  } else {
    const rows = Object.values(feeds)[0].dims[0];
    const chunks = perSample ? Array.from({ length: rows }, (_, r) => [r, r + 1]) : [null];
    for (const c of chunks) {
      const f = {};
      for (const [k, t] of Object.entries(feeds))
        f[k] = c ? sliceRows(ort, t, c[0], c[1]) : new ort.Tensor(t.type, t.data, t.dims);
      const out = await session.run(f);
      for (const name of session.outputNames) (results[name] = results[name] || []).push(out[name]);
    }
  }
  if (outFile) {
    writeNpy(outFile, concatRows(results[session.outputNames[0]]));
  } else {
    for (const name of session.outputNames) {
      writeNpy(path.join(outDir, outputFileName(name)), concatRows(results[name]));
    }
  }
}

main().catch((e) => {
  console.error(`ort-run: ${e.message || e}`);
  process.exit(1);
});
