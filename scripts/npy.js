'use strict';
/*
 * scripts/npy.js - read and write NumPy .npy files (format versions 1.0-3.0,
 * C order, little-endian) and load onnxruntime-node from toplu's cache.
 * Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
 */
const fs = require('fs');
const os = require('os');
const path = require('path');

/* descr -> [ONNX Runtime tensor type, typed array constructor, element bytes] */
const DESCR = {
  '<f4': ['float32', Float32Array, 4],
  '<f8': ['float64', Float64Array, 8],
  '<f2': ['float16', Uint16Array, 2],
  '|u1': ['uint8', Uint8Array, 1],
  '|i1': ['int8', Int8Array, 1],
  '<u2': ['uint16', Uint16Array, 2],
  '<i2': ['int16', Int16Array, 2],
  '<u4': ['uint32', Uint32Array, 4],
  '<i4': ['int32', Int32Array, 4],
  '<u8': ['uint64', BigUint64Array, 8],
  '<i8': ['int64', BigInt64Array, 8],
  '|b1': ['bool', Uint8Array, 1],
};
const TYPE_TO_DESCR = {};
for (const [d, [t]] of Object.entries(DESCR)) TYPE_TO_DESCR[t] = d;

/* Read an .npy file: {type, dims, data (typed array)}. Throws on anything else. */
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.readUInt8(0) !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') {
    throw new Error(`${file}: not an .npy file`);
  }
  const major = buf.readUInt8(6);
  let hlen, hstart;
  if (major === 1) {
    hlen = buf.readUInt16LE(8);
    hstart = 10;
  } else if (major === 2 || major === 3) {
    hlen = buf.readUInt32LE(8);
    hstart = 12;
  } else {
    throw new Error(`${file}: unsupported .npy version ${major}`);
  }
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${file}: bad .npy header ${header}`);
  if (fortran[1] === 'True') throw new Error(`${file}: fortran_order arrays are not supported`);
  let d = descr[1];
  if (d === '<b1' || d === '>b1') d = '|b1';
  if (d === '<u1' || d === '>u1') d = '|u1';
  if (d === '<i1' || d === '>i1') d = '|i1';
  if (!DESCR[d]) throw new Error(`${file}: unsupported dtype ${descr[1]}`);
  const [type, Ctor, size] = DESCR[d];
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const n = dims.reduce((a, b) => a * b, 1);
  const off = hstart + hlen;
  if (buf.length < off + n * size) throw new Error(`${file}: truncated data`);
  const data = new Ctor(n);
  new Uint8Array(data.buffer).set(buf.subarray(off, off + n * size));
  return { type, dims, data };
}

/* Write {type, dims, data} as an .npy file (version 1.0, or 2.0 for huge headers). */
function writeNpy(file, t) {
  const descr = TYPE_TO_DESCR[t.type];
  if (!descr) throw new Error(`${file}: cannot write dtype ${t.type}`);
  const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  let pre = 10;
  let total = pre + header.length + 1;
  let pad = (64 - (total % 64)) % 64;
  if (header.length + pad + 1 > 65535) {
    pre = 12;
    total = pre + header.length + 1;
    pad = (64 - (total % 64)) % 64;
  }
  header = header + ' '.repeat(pad) + '\n';
  const head = Buffer.alloc(pre);
  head.writeUInt8(0x93, 0);
  head.write('NUMPY', 1, 'latin1');
  head.writeUInt8(pre === 10 ? 1 : 2, 6);
  head.writeUInt8(0, 7);
  if (pre === 10) head.writeUInt16LE(header.length, 8);
  else head.writeUInt32LE(header.length, 8);
  const data = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

/* toplu's cache folder: $TOPLU_CACHE or ~/.cache/toplu. */
function cacheDir() {
  return process.env.TOPLU_CACHE || path.join(os.homedir(), '.cache', 'toplu');
}

/* onnxruntime-node as installed by scripts/fetch-models.sh (or from NODE_PATH). */
function loadOrt() {
  const p = path.join(cacheDir(), 'node', 'node_modules', 'onnxruntime-node');
  try {
    return require(p);
  } catch (e) {
    try {
      return require('onnxruntime-node');
    } catch (e2) {
      throw new Error(`onnxruntime-node not found in ${p} (run scripts/fetch-models.sh): ${e.message}`);
    }
  }
}

/* The file name toplu run uses for an output tensor: unsafe characters -> '_'. */
function outputFileName(name) {
  return name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy';
}

module.exports = { readNpy, writeNpy, cacheDir, loadOrt, outputFileName };
