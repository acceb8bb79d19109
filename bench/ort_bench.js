#!/usr/bin/env node
'use strict';
/*
 * bench/ort_bench.js - the ONNX Runtime side of the benchmark: time
 * session.run on one model at one batch size, like bench/toplu_bench.c.
 *
 *   node bench/ort_bench.js MODEL [--batch B] [--threads T] [--warmup W] [--runs R]
 *        [--seconds S] [--shape NAME=D0xD1x...] [--per-sample] [--profile PREFIX]
 *        [--batch-dim K]
 *
 * onnxruntime-node 1.30 from toplu's cache (scripts/fetch-models.sh), with
 * intraOpNumThreads T, interOpNumThreads 1, graphOptimizationLevel 'all'.
 * Inputs are random (float in [0,1), integers 0..255) at batch B (dim 0 of
 * --shape, or of the model's declared shape, is replaced by B; dim K with
 * --batch-dim K, for sequence-first models).  --per-sample
 * times B runs of one row each as one batch (for models whose file fixes the
 * batch dim to 1).  --profile PREFIX turns on ONNX Runtime's own profiler
 * (enableProfiling): its per-node JSON is written to PREFIX_<date>.json
 * (bench/op_compare.py reads it).  Prints one JSON line in toplu_bench's
 * format, side "ort".
 */
const path = require('path');
const { loadOrt } = require(path.join(__dirname, '..', 'scripts', 'npy.js'));

/* Print usage and exit 2. */
function usage(msg) {
  if (msg) console.error(`ort_bench: ${msg}`);
  console.error('usage: ort_bench.js MODEL [--batch B] [--threads T] [--warmup W] [--runs R]\n' +
    '                   [--seconds S] [--shape NAME=D0xD1x...] [--per-sample] [--profile PREFIX]\n' +
    '                   [--batch-dim K]');
  process.exit(2);
}

/* A typed array of n random elements of an ONNX Runtime type. */
function randomData(type, n, rng) {
  switch (type) {
    case 'float32': { const a = new Float32Array(n); for (let i = 0; i < n; i++) a[i] = rng(); return a; }
    case 'uint8': { const a = new Uint8Array(n); for (let i = 0; i < n; i++) a[i] = (rng() * 256) | 0; return a; }
    case 'int8': { const a = new Int8Array(n); for (let i = 0; i < n; i++) a[i] = ((rng() * 256) | 0) - 128; return a; }
    case 'int64': { const a = new BigInt64Array(n); for (let i = 0; i < n; i++) a[i] = BigInt((rng() * 256) | 0); return a; }
    case 'int32': { const a = new Int32Array(n); for (let i = 0; i < n; i++) a[i] = (rng() * 256) | 0; return a; }
    default: throw new Error(`no random data for type ${type}`);
  }
}

/* A small seeded generator (mulberry32): reproducible inputs. */
function makeRng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6D2B79F5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/* Parse arguments, build the session and inputs, time, print. */
async function main() {
  const args = process.argv.slice(2);
  let model = null, batch = 1, threads = 0, warmup = 3, runs = 10, seconds = 2, perSample = false, profile = null;
  let batchDim = 0;
  const shapes = {};
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (!a.startsWith('--')) { if (model) usage(); model = a; continue; }
    if (a === '--per-sample') { perSample = true; continue; }
    const v = args[++i];
    if (v === undefined) usage(`${a} needs a value`);
    if (a === '--batch') batch = parseInt(v, 10);
    else if (a === '--threads') threads = parseInt(v, 10);
    else if (a === '--warmup') warmup = parseInt(v, 10);
    else if (a === '--runs') runs = parseInt(v, 10);
    else if (a === '--seconds') seconds = parseFloat(v);
    else if (a === '--profile') profile = v;
    else if (a === '--batch-dim') batchDim = parseInt(v, 10);
    else if (a === '--shape') {
      const k = v.lastIndexOf('=');
      if (k < 0) usage('--shape needs NAME=D0xD1x...');
      shapes[v.slice(0, k)] = v.slice(k + 1).split(/[x,]/).map(Number);
    } else usage(`unknown option ${a}`);
  }
  if (!model || !(batch >= 1) || !(batchDim >= 0)) usage();
  if (!threads) threads = require('os').availableParallelism ? require('os').availableParallelism() : require('os').cpus().length;

  const ort = loadOrt();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    ...(profile ? { enableProfiling: true, profileFilePrefix: profile } : {}),
  });
  const rng = makeRng(1);
  const rowsPerRun = perSample ? 1 : batch;
  const feeds = {};
  session.inputNames.forEach((name, idx) => {
    const meta = session.inputMetadata ? session.inputMetadata[idx] : null;
    let dims = shapes[name] || (meta && meta.shape ? meta.shape.slice() : null);
    if (!dims) throw new Error(`input ${name}: unknown shape, give --shape ${name}=...`);
    dims = dims.slice();
    if (dims.length > batchDim) dims[batchDim] = rowsPerRun;
    else if (dims.length) dims[0] = rowsPerRun;
    dims.forEach((d, k) => {
      if (typeof d !== 'number' || !(d >= 0)) throw new Error(`input ${name}: symbolic dim ${k}, give --shape ${name}=...`);
    });
    const type = meta && meta.type ? meta.type : 'float32';
    const n = dims.reduce((p, q) => p * q, 1);
    feeds[name] = new ort.Tensor(type, randomData(type, n, rng), dims);
  });

  /* One timed "inference batch": batch rows, in one run or row by row. */
  const once = async () => {
    if (!perSample) { await session.run(feeds); return; }
    for (let r = 0; r < batch; r++) await session.run(feeds);
  };
  for (let w = 0; w < warmup; w++) await once();
  const times = [];
  const start = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - start) / 1e9;
  while (times.length < runs || elapsed() < seconds) {
    const t0 = process.hrtime.bigint();
    await once();
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const wall = elapsed(); /* the timed loop's wall clock: what a shared core's waits cost shows here */
  if (profile) session.endProfiling();
  times.sort((a, b) => a - b);
  const n = times.length;
  const median = n % 2 ? times[(n - 1) / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  const best = times[0];
  console.log(JSON.stringify({
    side: 'ort', model, batch, threads, runs: n, per_sample: perSample,
    median_ms: +(median * 1e3).toFixed(4), best_ms: +(best * 1e3).toFixed(4),
    ips_median: +(batch / median).toFixed(3), ips_best: +(batch / best).toFixed(3),
    wall_s: +wall.toFixed(4), ips_wall: +(wall > 0 ? (batch * n) / wall : 0).toFixed(3),
  }));
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message || e}`);
  process.exit(1);
});
