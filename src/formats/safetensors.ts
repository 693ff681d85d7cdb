import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { DTYPE_BYTES, fromFloat32, isFloatDtype, toFloat32, type FloatDtype } from './dtype.ts';
import { ModelFileError } from './errors.ts';

/**
 * The safetensors format (huggingface/safetensors): an 8-byte little-endian header length, a JSON
 * header `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {string: string}}`,
 * then the tensors' bytes, offsets relative to the end of the header.
 *
 * A file is untrusted: the header is bounded and checked against the file's size before anything
 * is allocated for a tensor (a header that claims 10^12 elements in a small file is refused), and a
 * tensor is read from its own byte range only when it is asked for, so loading a multi-GB model
 * never holds the file and the weights at once.
 */

/** The safetensors library refuses headers over 100 MB; so do we. */
export const MAX_HEADER_BYTES = 100_000_000;
const MAX_RANK = 8;

/** Bytes per element of every dtype a header may name (reading to float32 takes F32, F16, BF16). */
const ELEMENT_BYTES: { readonly [dtype: string]: number } = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  U16: 2,
  I16: 2,
  F16: 2,
  BF16: 2,
  U32: 4,
  I32: 4,
  F32: 4,
  U64: 8,
  I64: 8,
  F64: 8,
};

/** One tensor of a safetensors file: where its bytes are (absolute offsets in `file`). */
export interface TensorEntry {
  name: string;
  dtype: string;
  shape: number[];
  file: string;
  begin: number;
  end: number;
}

export interface SafetensorsHeader {
  tensors: TensorEntry[];
  metadata: { [key: string]: string };
}

/** Reads and checks a safetensors file's header. */
export async function readSafetensorsHeader(file: string): Promise<SafetensorsHeader> {
  const fh = await openForReading(file);
  try {
    const size = (await fh.stat()).size;
    const fail = (problem: string, field: string | null = null) => new ModelFileError(file, field, problem);
    if (size < 8) throw fail(`${size} bytes: too short to be a safetensors file (it is truncated or not one)`);
    const head = Buffer.alloc(8);
    await readFully(fh, head, 0, file);
    const headerBytes = Number(head.readBigUInt64LE(0));
    if (headerBytes > MAX_HEADER_BYTES) throw fail(`a header of ${headerBytes} bytes; the most is ${MAX_HEADER_BYTES}`);
    if (8 + headerBytes > size)
      throw fail(`the header claims ${headerBytes} bytes but the file has ${size} in all (truncated?)`);
    const text = Buffer.alloc(headerBytes);
    await readFully(fh, text, 8, file);
    let json: unknown;
    const headerText = text.toString('utf8');
    try {
      json = JSON.parse(headerText);
    } catch (error) {
      throw fail(`the header is not JSON: ${(error as Error).message}`);
    }
    if (json === null || typeof json !== 'object' || Array.isArray(json)) throw fail('the header is not a JSON object');
    // JSON.parse keeps the last of two equal keys: a second entry would silently replace the first.
    const twice = duplicateKey(headerText);
    if (twice)
      throw twice.within === null
        ? fail(`the header names ${twice.key} twice`, twice.key)
        : fail(`its entry names "${twice.key}" twice`, twice.within);
    const dataStart = 8 + headerBytes;
    const dataBytes = size - dataStart;
    const tensors: TensorEntry[] = [];
    let metadata: { [key: string]: string } = {};
    for (const [name, value] of Object.entries(json)) {
      if (name === '__metadata__') {
        metadata = checkMetadata(value, (p) => fail(p, '__metadata__'));
        continue;
      }
      tensors.push(checkEntry(name, value, file, dataStart, dataBytes));
    }
    // Byte ranges must not overlap (a crafted header could alias one tensor's bytes as another's).
    const byStart = tensors.slice().sort((a, b) => a.begin - b.begin || a.end - b.end); // empty ones first
    for (let i = 1; i < byStart.length; i++) {
      if (byStart[i]!.begin < byStart[i - 1]!.end)
        throw fail(`its bytes overlap those of ${byStart[i - 1]!.name}`, byStart[i]!.name);
    }
    // Every data byte belongs to a tensor, as the safetensors library requires: bytes no tensor
    // names are something else hidden in a model file.
    let covered = dataStart;
    for (const e of byStart) {
      if (e.begin > covered) {
        const [from, to] = [covered - dataStart, e.begin - dataStart];
        throw fail(`bytes ${from} to ${to} of its data belong to no tensor (they come before ${e.name})`);
      }
      covered = Math.max(covered, e.end);
    }
    const end = Math.max(covered, dataStart);
    if (end < size) throw fail(`bytes ${end - dataStart} to ${dataBytes} of its data, at its end, belong to no tensor`);
    return { tensors, metadata };
  } finally {
    await fh.close();
  }
}

/**
 * The first key that an object of `text` (valid JSON) has twice, and the top-level key of the
 * object it is in (null: the header itself). Keys are compared as JSON.parse reads them, escapes
 * decoded, so "a" and "\u0061" are the same name.
 */
function duplicateKey(text: string): { key: string; within: string | null } | null {
  // One entry per open object or array: an object's keys so far (null for an array).
  const open: (Set<string> | null)[] = [];
  let topKey: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */) open.push(new Set());
    else if (c === 0x5b /* [ */) open.push(null);
    else if (c === 0x7d /* } */ || c === 0x5d /* ] */) open.pop();
    else if (c === 0x22 /* " */) {
      let end = i + 1;
      while (text.charCodeAt(end) !== 0x22) end += text.charCodeAt(end) === 0x5c /* \ */ ? 2 : 1;
      const keys = open.at(-1);
      let next = end + 1;
      while (/\s/.test(text[next] ?? '')) next++;
      // A string followed by ':' inside an object is a key; any other string is a value.
      if (keys && text[next] === ':') {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (keys.has(key)) return { key, within: open.length === 1 ? null : topKey };
        keys.add(key);
        if (open.length === 1) topKey = key;
      }
      i = end;
    }
  }
  return null;
}

function checkMetadata(value: unknown, fail: (problem: string) => ModelFileError): { [key: string]: string } {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw fail('is not an object');
  for (const [k, v] of Object.entries(value)) if (typeof v !== 'string') throw fail(`"${k}" is not a string`);
  return value as { [key: string]: string };
}

function checkEntry(name: string, value: unknown, file: string, dataStart: number, dataBytes: number): TensorEntry {
  const fail = (problem: string) => new ModelFileError(file, name, problem);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw fail('the entry is not an object');
  const { dtype, shape, data_offsets: offsets } = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
  if (typeof dtype !== 'string' || !Object.hasOwn(ELEMENT_BYTES, dtype))
    throw fail(`unknown dtype ${JSON.stringify(dtype)}`);
  if (!Array.isArray(shape) || shape.length > MAX_RANK || !shape.every((d) => Number.isSafeInteger(d) && d >= 0))
    throw fail(`shape ${JSON.stringify(shape)} is not a list of at most ${MAX_RANK} non-negative integers`);
  if (
    !Array.isArray(offsets) ||
    offsets.length !== 2 ||
    !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) ||
    offsets[1] < offsets[0]
  )
    throw fail(`data_offsets ${JSON.stringify(offsets)} is not [begin, end] with 0 ≤ begin ≤ end`);
  // In floating point, so a product that overflows is still far larger than the file.
  const bytes = shape.reduce((n: number, d: number) => n * d, ELEMENT_BYTES[dtype]!);
  const [begin, end] = offsets as [number, number];
  if (bytes !== end - begin)
    throw fail(`shape [${shape}] of ${dtype} is ${bytes} bytes but its data_offsets span ${end - begin}`);
  if (end > dataBytes)
    throw fail(`its bytes end at ${end}, past the ${dataBytes} bytes of data the file holds (truncated?)`);
  return { name, dtype, shape: shape as number[], file, begin: dataStart + begin, end: dataStart + end };
}

/** A tensor's bytes, as the file stores them. */
export async function readTensorBytes(entry: TensorEntry): Promise<Uint8Array> {
  const fh = await openForReading(entry.file);
  try {
    const bytes = new Uint8Array(entry.end - entry.begin);
    await readFully(fh, bytes, entry.begin, entry.file);
    return bytes;
  } finally {
    await fh.close();
  }
}

/** Reads a tensor's bytes, as stored, into `into` (exactly its length: e.g. a view of a kernel's memory). */
export async function readTensorInto(entry: TensorEntry, into: Uint8Array): Promise<void> {
  if (into.length !== entry.end - entry.begin)
    throw new ModelFileError(entry.file, entry.name, `${entry.end - entry.begin} bytes read into ${into.length}`);
  const fh = await openForReading(entry.file);
  try {
    await readFully(fh, into, entry.begin, entry.file);
  } finally {
    await fh.close();
  }
}

/** A tensor's values as float32 (F32, F16 and BF16; other dtypes are refused by name). */
export function tensorValues(entry: TensorEntry, bytes: Uint8Array): Float32Array {
  if (!isFloatDtype(entry.dtype))
    throw new ModelFileError(entry.file, entry.name, `dtype ${entry.dtype} cannot be read (only F32, F16 and BF16)`);
  return toFloat32(bytes, entry.dtype);
}

/** A tensor's values as float32, read from its file. */
export async function readTensor(entry: TensorEntry): Promise<Float32Array> {
  return tensorValues(entry, await readTensorBytes(entry));
}

/** One tensor to write: its values in float32, written as `dtype`. */
export interface TensorToWrite {
  name: string;
  dtype: FloatDtype;
  shape: readonly number[];
  values: () => Float32Array | Promise<Float32Array>;
}

/**
 * Writes a safetensors file, atomically (a temporary sibling renamed into place), one tensor at a
 * time: each tensor's values are asked for as they are written. `__metadata__` is written first
 * (Transformers wants `{"format": "pt"}`); tensors follow in the order given, the header padded with
 * spaces to 8 bytes as the safetensors library does.
 */
export async function writeSafetensors(
  file: string,
  tensors: readonly TensorToWrite[],
  metadata: { [key: string]: string } = { format: 'pt' },
): Promise<void> {
  const header: { [key: string]: unknown } = { __metadata__: metadata };
  let at = 0;
  for (const t of tensors) {
    const bytes = t.shape.reduce((n, d) => n * d, DTYPE_BYTES[t.dtype]);
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + bytes] };
    at += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const tmp = join(dirname(file), `.${basename(file)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  const fh = await open(tmp, 'w');
  try {
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
    await fh.write(length);
    await fh.write(json);
    for (const t of tensors) {
      const values = await t.values();
      const expected = t.shape.reduce((n, d) => n * d, 1);
      if (values.length !== expected)
        throw new ModelFileError(file, t.name, `${values.length} values for shape [${t.shape}] (${expected})`);
      await writeFully(fh, fromFloat32(values, t.dtype));
    }
    await fh.close();
    await rename(tmp, file);
  } catch (error) {
    await fh.close().catch(() => {});
    await rm(tmp, { force: true });
    throw error;
  }
}

/**
 * The file opened for reading if it is a regular file: opened without blocking and checked on the
 * descriptor, since a FIFO or device in its place would block every read forever.
 */
async function openForReading(file: string): Promise<FileHandle> {
  let fh: FileHandle;
  try {
    fh = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ModelFileError(file, null, code === 'ENOENT' ? 'no such file' : `cannot open it (${code ?? error})`);
  }
  const st = await fh.stat();
  if (!st.isFile()) {
    await fh.close();
    const kind = st.isDirectory() ? 'a folder' : st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : 'a device';
    throw new ModelFileError(file, null, `is not a file (it is ${kind})`);
  }
  return fh;
}

/** Reads exactly `into.length` bytes at `position` (in pieces: one read is at most 2 GiB). */
async function readFully(fh: FileHandle, into: Uint8Array, position: number, file: string): Promise<void> {
  let done = 0;
  while (done < into.length) {
    const want = Math.min(into.length - done, 1 << 30);
    const { bytesRead } = await fh.read(into, done, want, position + done);
    if (bytesRead === 0) throw new ModelFileError(file, null, `ends early, at byte ${position + done} (truncated?)`);
    done += bytesRead;
  }
}

async function writeFully(fh: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await fh.write(bytes, done, Math.min(bytes.length - done, 1 << 30));
    done += bytesWritten;
  }
}
