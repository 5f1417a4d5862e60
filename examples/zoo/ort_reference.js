#!/usr/bin/env node
// ONNX Runtime (npm's onnxruntime-node, its CPU execution provider) as an independent reference
// for ONNX models: runs MODEL on inputs from .npy files and writes every output of the model
// as an .npy file to OUT_DIR, with an index.txt naming them in the model's order, as
// `vpuc run --dump-all` writes a directory (frontend/tensor_file.h reads it back with
// read_tensor_dir; `vpuc compare` takes it). docs/zoo.md.
//
//   NODE_PATH=build-ort/node_modules node examples/zoo/ort_reference.js MODEL.onnx \
//       --input NAME=FILE.npy [--input ...] --out OUT_DIR
//
// Every graph input needs a file. The .npy files are those numpy.save writes: format 1.0, 2.0
// or 3.0, C order, little-endian, of the dtypes below. Any problem is a message on stderr
// naming the file or the input, and exit status 1.
'use strict';

const fs = require('fs');
const path = require('path');

class UsageError extends Error {}

const USAGE =
    'usage: ort_reference.js MODEL.onnx --input NAME=FILE.npy [--input NAME=FILE.npy ...] ' +
    '--out OUT_DIR';

// numpy's dtype (without its byte order) <-> ONNX Runtime's tensor type and typed array.
const DTYPES = [
  {dtype: 'f2', type: 'float16', array: Uint16Array},
  {dtype: 'f4', type: 'float32', array: Float32Array},
  {dtype: 'f8', type: 'float64', array: Float64Array},
  {dtype: 'i1', type: 'int8', array: Int8Array},
  {dtype: 'u1', type: 'uint8', array: Uint8Array},
  {dtype: 'i2', type: 'int16', array: Int16Array},
  {dtype: 'u2', type: 'uint16', array: Uint16Array},
  {dtype: 'i4', type: 'int32', array: Int32Array},
  {dtype: 'u4', type: 'uint32', array: Uint32Array},
  {dtype: 'i8', type: 'int64', array: BigInt64Array},
  {dtype: 'u8', type: 'uint64', array: BigUint64Array},
  {dtype: 'b1', type: 'bool', array: Uint8Array},
];
const SUPPORTED_DTYPES = DTYPES.map((d) => d.dtype).join(', ');

function parseArgs(argv) {
  const args = {model: null, inputs: [], out: null};
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new UsageError(`${arg} needs a value\n${USAGE}`);
      return argv[++i];
    };
    if (arg === '--input') {
      const spec = value();
      const eq = spec.indexOf('=');
      if (eq <= 0 || eq === spec.length - 1)
        throw new UsageError(`--input '${spec}': expected NAME=FILE.npy`);
      args.inputs.push({name: spec.slice(0, eq), file: spec.slice(eq + 1)});
    } else if (arg === '--out') {
      args.out = value();
    } else if (arg.startsWith('-')) {
      throw new UsageError(`unknown option '${arg}'\n${USAGE}`);
    } else if (args.model === null) {
      args.model = arg;
    } else {
      throw new UsageError(`unexpected argument '${arg}'\n${USAGE}`);
    }
  }
  if (args.model === null || args.out === null) throw new UsageError(USAGE);
  return args;
}

function readFile(file) {
  try {
    return fs.readFileSync(file);
  } catch (e) {
    throw new Error(`cannot read '${file}': ${e.message}`);
  }
}

// The tensor of an .npy file: {dtype, dims, data}, data a typed array of its own.
function readNpy(file) {
  const bytes = readFile(file);
  const fail = (what) => {
    throw new Error(`${file}: ${what}`);
  };
  const magic = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY
  if (bytes.length < 10 || !bytes.subarray(0, 6).equals(magic)) fail('not an .npy file');
  const major = bytes[6];
  if (major < 1 || major > 3) fail(`format version ${major}.${bytes[7]} is not 1.0, 2.0 or 3.0`);
  const lengthBytes = major === 1 ? 2 : 4;
  if (bytes.length < 8 + lengthBytes) fail('truncated header');
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const dataStart = 8 + lengthBytes + headerLength;
  if (bytes.length < dataStart) fail('truncated header');
  const header =
      bytes.subarray(8 + lengthBytes, dataStart).toString(major === 3 ? 'utf8' : 'latin1');

  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const order = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shapeText = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !order || !shapeText) fail(`header: expected 'descr', 'fortran_order' and 'shape'`);
  if (order[1] === 'True') fail('header: Fortran order is not supported, only C order');

  const byteOrder = descr[1][0], dtypeName = descr[1].slice(1);
  const dtype = DTYPES.find((d) => d.dtype === dtypeName);
  if (!dtype || !'<|='.includes(byteOrder))
    fail(`dtype '${descr[1]}' is not supported (little-endian ${SUPPORTED_DTYPES})`);
  const itemSize = dtype.array.BYTES_PER_ELEMENT;
  if (byteOrder === '|' && itemSize !== 1) fail(`dtype '${descr[1]}' has no byte order`);

  const shape = shapeText[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  if (!shape.every((s) => /^\d+$/.test(s)))
    fail(`header: shape (${shapeText[1]}) is not of extents`);
  const dims = shape.map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const dataLength = bytes.length - dataStart;
  if (dataLength !== count * itemSize)
    fail(`${dataLength} bytes of data, but shape (${dims.join(', ')}) of '${descr[1]}' needs ` +
         `${count * itemSize}`);
  // A copy, so that the typed array is aligned to its elements.
  const data = new dtype.array(count);
  Buffer.from(data.buffer).set(bytes.subarray(dataStart));
  return {dtype, dims, data};
}

// The bytes numpy.save writes for a tensor of `dtype` and `dims` holding `data`.
function npyBytes(dtype, dims, data) {
  const itemSize = dtype.array.BYTES_PER_ELEMENT;
  const byteOrder = itemSize === 1 ? '|' : '<';
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header =
      `{'descr': '${byteOrder}${dtype.dtype}', 'fortran_order': False, 'shape': ${shape}, }`;
  // Magic, version and length take 10 bytes; the header ends in '\n' at a multiple of 64.
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header.padEnd(total - 10 - 1, ' ') + '\n';
  const prefix = Buffer.alloc(10);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(prefix);
  prefix.writeUInt16LE(header.length, 8);
  const payload = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.concat([prefix, Buffer.from(header, 'latin1'), payload]);
}

// A file name for tensor `name`, as frontend/tensor_file.cpp's write_tensor_dir makes it.
function tensorFileName(name) {
  return name.slice(0, 200).replace(/[^A-Za-z0-9._-]/g, '_') + '.npy';
}

function loadOnnxRuntime() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    const what = e.code === 'MODULE_NOT_FOUND' ? 'it is not installed' : e.message;
    const nodePath = process.env.NODE_PATH || '';
    throw new Error(`cannot load onnxruntime-node from NODE_PATH '${nodePath}': ${what}; ` +
                    '`make deps` installs it into build-ort/node_modules');
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const inputs = args.inputs.map((input) => ({...input, tensor: readNpy(input.file)}));
  readFile(args.model); // a missing model is named as a missing input file is

  const ort = loadOnnxRuntime();
  let session;
  try {
    session = await ort.InferenceSession.create(
        args.model, {intraOpNumThreads: 1, interOpNumThreads: 1});
  } catch (e) {
    throw new Error(`${args.model}: ONNX Runtime cannot load the model: ${e.message}`);
  }
  const feeds = {};
  for (const {name, file, tensor} of inputs) {
    if (!session.inputNames.includes(name))
      throw new Error(`--input ${name}: the model has no input '${name}' (its inputs: ` +
                      `${session.inputNames.join(', ')})`);
    if (name in feeds) throw new Error(`--input ${name}: given twice`);
    const expected = session.inputMetadata.find((m) => m.name === name);
    if (expected.isTensor && expected.type !== tensor.dtype.type)
      throw new Error(`--input ${name}: ${file} holds ${tensor.dtype.type} ` +
                      `('${tensor.dtype.dtype}'), the model's input is ${expected.type}`);
    feeds[name] = new ort.Tensor(tensor.dtype.type, tensor.data, tensor.dims);
  }
  const missing = session.inputNames.filter((name) => !(name in feeds));
  if (missing.length > 0)
    throw new Error(`no --input for the model's inputs ${missing.join(', ')}`);

  let results;
  try {
    results = await session.run(feeds);
  } catch (e) {
    throw new Error(`${args.model}: ONNX Runtime failed: ${e.message}`);
  }

  fs.mkdirSync(args.out, {recursive: true});
  const written = new Set();
  let index = '';
  for (const name of session.outputNames) {
    const tensor = results[name];
    const dtype = DTYPES.find((d) => d.type === tensor.type);
    if (!dtype)
      throw new Error(`output '${name}': ONNX Runtime's type ${tensor.type} has no .npy dtype`);
    if (name.includes('\n')) throw new Error(`output '${name}': a name holding a newline`);
    let file = tensorFileName(name);
    // Names that differ only in characters made '_' still get files of their own.
    while (written.has(file)) file = '_' + file;
    written.add(file);
    fs.writeFileSync(path.join(args.out, file), npyBytes(dtype, tensor.dims, tensor.data));
    index += `${name} ${file}\n`;
  }
  fs.writeFileSync(path.join(args.out, 'index.txt'), index);
}

main().catch((e) => {
  process.stderr.write(`ort_reference: ${e.message}\n`);
  process.exit(1);
});
