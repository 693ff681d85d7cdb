import { randomBytes } from 'node:crypto';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { DTYPE_BYTES, fromFloat32, type FloatDtype } from './dtype.ts';
import { ModelFileError } from './errors.ts';

/**
 * Writes GGUF v3 files (ggml's model format: what llama.cpp, Ollama and LM Studio load), little
 * endian: the magic and version, the tensor and key-value counts, the key-values, each tensor's
 * info (name, dims innermost first, ggml type, offset), then, aligned to 32 bytes, the tensors'
 * data, each padded to 32.
 */

/** A metadata value with its GGUF type (llama.cpp checks types strictly: a count is a u32, an epsilon an f32). */
export type GgufValue =
  | { type: 'u32' | 'i32' | 'f32' | 'u64'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'strings'; value: readonly string[] }
  | { type: 'i32s'; value: readonly number[] }
  | { type: 'f32s'; value: readonly number[] };

/** One tensor: its shape as PyTorch and safetensors write it (outermost first), its values, its dtype in the file. */
export interface GgufTensor {
  name: string;
  shape: readonly number[];
  dtype: FloatDtype;
  values: () => Float32Array | Promise<Float32Array>;
}

const ALIGNMENT = 32;
const VALUE_TYPE = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10 } as const;
const GGML_TYPE: { readonly [D in FloatDtype]: number } = { F32: 0, F16: 1, BF16: 30 };
/** llama.cpp's GGML_MAX_NAME: a tensor name is shorter. */
const MAX_NAME_BYTES = 63;

class Bytes {
  private readonly parts: Buffer[] = [];
  length = 0;
  private push(b: Buffer): void {
    this.parts.push(b);
    this.length += b.length;
  }
  u32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    this.push(b);
  }
  i32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(n);
    this.push(b);
  }
  u64(n: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(n));
    this.push(b);
  }
  f32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(n);
    this.push(b);
  }
  u8(n: number): void {
    this.push(Buffer.of(n));
  }
  string(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  raw(b: Buffer): void {
    this.push(b);
  }
  buffer(): Buffer {
    return Buffer.concat(this.parts);
  }
}

function writeValue(out: Bytes, key: string, v: GgufValue, file: string): void {
  out.string(key);
  if (v.type === 'strings' || v.type === 'i32s' || v.type === 'f32s') {
    if (v.value.length === 0) throw new ModelFileError(file, key, 'an empty array (GGUF readers refuse them)');
    out.u32(VALUE_TYPE.array);
    out.u32(v.type === 'strings' ? VALUE_TYPE.string : v.type === 'i32s' ? VALUE_TYPE.i32 : VALUE_TYPE.f32);
    out.u64(v.value.length);
    if (v.type === 'strings') for (const x of v.value) out.string(x);
    else if (v.type === 'i32s') for (const x of v.value) out.i32(x);
    else for (const x of v.value) out.f32(x);
    return;
  }
  out.u32(VALUE_TYPE[v.type]);
  if (v.type === 'string') out.string(v.value);
  else if (v.type === 'bool') out.u8(v.value ? 1 : 0);
  else if (v.type === 'u32') out.u32(v.value);
  else if (v.type === 'i32') out.i32(v.value);
  else if (v.type === 'f32') out.f32(v.value);
  else out.u64(v.value);
}

const pad = (n: number) => (ALIGNMENT - (n % ALIGNMENT)) % ALIGNMENT;

/** Writes a GGUF file atomically (a temporary sibling renamed into place), one tensor's data at a time. */
export async function writeGguf(
  file: string,
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: readonly GgufTensor[],
): Promise<void> {
  const names = new Set<string>();
  for (const t of tensors) {
    if (Buffer.byteLength(t.name) > MAX_NAME_BYTES)
      throw new ModelFileError(file, t.name, `a tensor name of more than ${MAX_NAME_BYTES} bytes`);
    if (names.has(t.name)) throw new ModelFileError(file, t.name, 'two tensors of one name');
    if (t.shape.length < 1 || t.shape.length > 4)
      throw new ModelFileError(file, t.name, 'GGUF tensors have 1 to 4 dims');
    names.add(t.name);
  }
  const head = new Bytes();
  head.raw(Buffer.from('GGUF', 'ascii'));
  head.u32(3);
  head.u64(tensors.length);
  head.u64(metadata.length);
  for (const [key, value] of metadata) writeValue(head, key, value, file);
  let offset = 0;
  for (const t of tensors) {
    head.string(t.name);
    head.u32(t.shape.length);
    for (const d of [...t.shape].reverse()) head.u64(d);
    head.u32(GGML_TYPE[t.dtype]);
    head.u64(offset);
    const bytes = t.shape.reduce((n, d) => n * d, DTYPE_BYTES[t.dtype]);
    offset += bytes + pad(bytes);
  }
  head.raw(Buffer.alloc(pad(head.length)));
  const tmp = join(dirname(file), `.${basename(file)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  const fh = await open(tmp, 'w');
  try {
    await writeAll(fh, head.buffer());
    for (const t of tensors) {
      const values = await t.values();
      const expected = t.shape.reduce((n, d) => n * d, 1);
      if (values.length !== expected)
        throw new ModelFileError(file, t.name, `${values.length} values for shape [${t.shape}] (${expected})`);
      const bytes = fromFloat32(values, t.dtype);
      await writeAll(fh, bytes);
      await writeAll(fh, new Uint8Array(pad(bytes.length)));
    }
    await fh.close();
    await rename(tmp, file);
  } catch (error) {
    await fh.close().catch(() => {});
    await rm(tmp, { force: true });
    throw error;
  }
}

async function writeAll(fh: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await fh.write(bytes, done, Math.min(bytes.length - done, 1 << 30));
    done += bytesWritten;
  }
}
