import test, { type ExecutionContext } from 'ava';
import { mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fromFloat32, toFloat32 } from '../../src/formats/dtype.ts';
import { ModelFileError } from '../../src/formats/errors.ts';
import {
  MAX_HEADER_BYTES,
  readSafetensorsHeader,
  readTensor,
  readTensorBytes,
  writeSafetensors,
  type TensorToWrite,
} from '../../src/formats/safetensors.ts';

let dir: string;
test.before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'agent-r1-safetensors-'));
});
test.after.always(async () => {
  await rm(dir, { recursive: true, force: true });
});

let fileCount = 0;
/** A file of these bytes in the temp dir. */
async function rawFile(bytes: Uint8Array): Promise<string> {
  const file = join(dir, `crafted-${fileCount++}.safetensors`);
  await writeFile(file, bytes);
  return file;
}

/** The 8 little-endian length bytes of a header of `n` bytes. */
const lengthBytes = (n: number | bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
};

/** A safetensors file: the length, the header (a value, written as JSON, or the text as is), then `data` bytes. */
async function crafted(header: unknown, data: number | Uint8Array = 0): Promise<string> {
  const text = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header));
  const body = typeof data === 'number' ? new Uint8Array(data) : data;
  return rawFile(Buffer.concat([lengthBytes(text.length), text, body]));
}

/** Asserts that reading the header of `file` is refused with a ModelFileError naming the file and `field`. */
async function refused(t: ExecutionContext, file: string, field: string | null, problem: RegExp): Promise<void> {
  const error = await t.throwsAsync(readSafetensorsHeader(file), { instanceOf: ModelFileError });
  if (!error) return;
  t.is(error.file, file);
  t.is(error.field, field);
  t.true(error.message.startsWith(file), `the message names the file: ${error.message}`);
  if (field !== null) t.true(error.message.includes(`(${field})`), `the message names ${field}: ${error.message}`);
  t.regex(error.problem, problem);
}

const ramp = (n: number, scale = 1) => Float32Array.from({ length: n }, (_, i) => scale * (i - n / 2) + 0.1 * i);

test('write → read keeps every tensor: names, dtypes, shapes and values (F16 and BF16 as rounded to that dtype)', async (t) => {
  const file = join(dir, 'round-trip.safetensors');
  const tensors: TensorToWrite[] = [
    { name: 'model.embed_tokens.weight', dtype: 'F32', shape: [5, 3], values: () => ramp(15, 1.7) },
    { name: 'model.layers.0.mlp.up_proj.weight', dtype: 'F16', shape: [2, 3, 4], values: () => ramp(24, 0.37) },
    { name: 'model.norm.weight', dtype: 'BF16', shape: [7], values: async () => ramp(7, 3.3) },
    { name: 'scalar', dtype: 'F32', shape: [], values: () => Float32Array.of(-2.5) },
    { name: 'empty', dtype: 'BF16', shape: [0, 4], values: () => new Float32Array(0) },
    { name: 'odd', dtype: 'F16', shape: [3], values: () => Float32Array.of(1, 2, 3) },
  ];
  await writeSafetensors(file, tensors);
  const header = await readSafetensorsHeader(file);
  t.deepEqual(header.metadata, { format: 'pt' });
  t.deepEqual(
    header.tensors.map((e) => [e.name, e.dtype, e.shape]),
    tensors.map((x) => [x.name, x.dtype, [...x.shape]]),
  );
  for (const x of tensors) {
    const entry = header.tensors.find((e) => e.name === x.name)!;
    t.is(entry.file, file);
    const want = toFloat32(fromFloat32(await x.values(), x.dtype), x.dtype);
    t.deepEqual(await readTensor(entry), want, x.name);
  }
  // F32 values come back bit for bit; the narrow dtypes as rounded (not the originals).
  t.deepEqual(await readTensor(header.tensors[0]!), ramp(15, 1.7));
  t.notDeepEqual(await readTensor(header.tensors[1]!), ramp(24, 0.37));
  t.deepEqual(Array.from(await readTensor(header.tensors[5]!)), [1, 2, 3]);
  t.deepEqual(Array.from(await readTensorBytes(header.tensors[5]!)), [0x00, 0x3c, 0x00, 0x40, 0x00, 0x42]);
});

test('the written file is what the safetensors library writes: header 8-byte aligned, __metadata__ {"format":"pt"} first, offsets contiguous', async (t) => {
  const file = join(dir, 'layout.safetensors');
  const shapes = [[3], [1, 5], [2, 2, 3]];
  const dtypes = ['F32', 'BF16', 'F16'] as const;
  await writeSafetensors(
    file,
    shapes.map((shape, i) => ({
      name: `t${i}`,
      dtype: dtypes[i]!,
      shape,
      values: () => ramp(shape.reduce((a, b) => a * b, 1)),
    })),
  );
  const bytes = await readFile(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  t.is((8 + headerLength) % 8, 0, 'the data starts 8-byte aligned');
  const text = bytes.subarray(8, 8 + headerLength).toString('utf8');
  t.regex(text, /^\{"__metadata__":\{"format":"pt"\}/);
  t.regex(text, /^[^\n]*\} *$/, 'padded with spaces only');
  const json = JSON.parse(text);
  t.deepEqual(json.__metadata__, { format: 'pt' });
  t.deepEqual(json.t0, { dtype: 'F32', shape: [3], data_offsets: [0, 12] });
  t.deepEqual(json.t1, { dtype: 'BF16', shape: [1, 5], data_offsets: [12, 22] });
  t.deepEqual(json.t2, { dtype: 'F16', shape: [2, 2, 3], data_offsets: [22, 46] });
  t.is(bytes.length, 8 + headerLength + 46, 'nothing past the last tensor');
  const header = await readSafetensorsHeader(file);
  t.deepEqual(
    header.tensors.map((e) => [e.begin, e.end]),
    [
      [8 + headerLength, 8 + headerLength + 12],
      [8 + headerLength + 12, 8 + headerLength + 22],
      [8 + headerLength + 22, 8 + headerLength + 46],
    ],
  );
});

test('other metadata is written and read back as given', async (t) => {
  const file = join(dir, 'metadata.safetensors');
  await writeSafetensors(file, [{ name: 'w', dtype: 'F32', shape: [1], values: () => Float32Array.of(1) }], {
    format: 'pt',
    note: 'héllo',
  });
  t.deepEqual((await readSafetensorsHeader(file)).metadata, { format: 'pt', note: 'héllo' });
});

test('writing values that do not fill the shape is refused by tensor name, and leaves neither the file nor a temporary one', async (t) => {
  const sub = await mkdtemp(join(dir, 'write-'));
  const file = join(sub, 'bad.safetensors');
  const error = await t.throwsAsync(
    writeSafetensors(file, [
      { name: 'ok', dtype: 'F32', shape: [2], values: () => Float32Array.of(1, 2) },
      { name: 'short', dtype: 'BF16', shape: [2, 3], values: () => Float32Array.of(1, 2, 3) },
    ]),
    { instanceOf: ModelFileError },
  );
  t.is(error?.file, file);
  t.is(error?.field, 'short');
  t.regex(error?.message ?? '', /3 values for shape \[2,3\] \(6\)/);
  t.deepEqual(await readdir(sub), []);
});

test('a missing file is a ModelFileError naming it', async (t) => {
  await refused(t, join(dir, 'no-such.safetensors'), null, /no such file/);
});

test('an empty file is refused: too short to be a safetensors file', async (t) => {
  await refused(t, await rawFile(new Uint8Array(0)), null, /^0 bytes: too short/);
});

test('a file shorter than the 8 length bytes is refused', async (t) => {
  await refused(t, await rawFile(Uint8Array.of(1, 0, 0, 0, 0)), null, /^5 bytes: too short/);
});

test('a header length larger than the file is refused as truncated, before it is read', async (t) => {
  const file = await rawFile(Buffer.concat([lengthBytes(1000), Buffer.from('{}')]));
  await refused(t, file, null, /claims 1000 bytes but the file has 10 in all \(truncated\?\)/);
});

test('a header over the 100 MB limit is refused from the 8 length bytes alone (no 100 MB file needed, nothing allocated)', async (t) => {
  t.is(MAX_HEADER_BYTES, 100_000_000);
  await refused(t, await rawFile(lengthBytes(MAX_HEADER_BYTES + 1)), null, /a header of 100000001 bytes; the most is/);
  await refused(t, await rawFile(lengthBytes(2n ** 64n - 1n)), null, /the most is 100000000/);
});

test('a header that is not JSON is refused', async (t) => {
  await refused(t, await crafted('{"w": {"dtype": "F32",'), null, /the header is not JSON/);
  await refused(t, await crafted(''), null, /the header is not JSON/);
});

test('a header that is JSON but not an object is refused', async (t) => {
  for (const header of ['[1, 2]', 'null', '42', '"F32"'])
    await refused(t, await crafted(header), null, /the header is not a JSON object/);
});

test('a tensor entry that is not an object is refused by tensor name', async (t) => {
  await refused(t, await crafted({ w: [0, 4] }, 4), 'w', /the entry is not an object/);
});

test('an unknown or missing dtype is refused by tensor name, quoting the dtype', async (t) => {
  await refused(
    t,
    await crafted({ w: { dtype: 'F128', shape: [1], data_offsets: [0, 16] } }, 16),
    'w',
    /unknown dtype "F128"/,
  );
  await refused(
    t,
    await crafted({ w: { dtype: 'f32', shape: [1], data_offsets: [0, 4] } }, 4),
    'w',
    /unknown dtype "f32"/,
  );
  await refused(t, await crafted({ w: { shape: [1], data_offsets: [0, 4] } }, 4), 'w', /unknown dtype undefined/);
  await refused(
    t,
    await crafted({ w: { dtype: 'toString', shape: [1], data_offsets: [0, 4] } }, 4),
    'w',
    /unknown dtype/,
  );
});

test('a shape with a negative, fractional or non-number dim, or too many dims, is refused by tensor name', async (t) => {
  for (const shape of [[-1, 4], [1.5, 2], ['2'], [null], 4, null, [1, 1, 1, 1, 1, 1, 1, 1, 1]])
    await refused(
      t,
      await crafted({ w: { dtype: 'F32', shape, data_offsets: [0, 4] } }, 4),
      'w',
      /shape .* is not a list of at most 8 non-negative integers/,
    );
});

test('data_offsets that are not [begin, end] with 0 ≤ begin ≤ end are refused by tensor name', async (t) => {
  for (const offsets of [[0], [0, 4, 8], [8, 4], '0-4', [-4, 0], [0, 4.5], null, [0, '4']])
    await refused(
      t,
      await crafted({ w: { dtype: 'F32', shape: [1], data_offsets: offsets } }, 8),
      'w',
      /data_offsets .* is not \[begin, end\]/,
    );
});

test('data_offsets whose span is not shape × dtype size are refused by tensor name', async (t) => {
  await refused(
    t,
    await crafted({ w: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 12] } }, 16),
    'w',
    /shape \[2,2\] of F32 is 16 bytes but its data_offsets span 12/,
  );
  await refused(
    t,
    await crafted({ w: { dtype: 'BF16', shape: [3], data_offsets: [0, 12] } }, 16),
    'w',
    /of BF16 is 6 bytes but its data_offsets span 12/,
  );
  // A product that overflows every integer type still does not match any span.
  const huge = Number.MAX_SAFE_INTEGER;
  await refused(
    t,
    await crafted({ w: { dtype: 'F32', shape: [huge, huge], data_offsets: [0, huge] } }, 8),
    'w',
    /but its data_offsets span/,
  );
});

test.serial(
  'a header claiming 10^12 elements (offsets to match) in a small file is refused without allocating them',
  async (t) => {
    const before = process.memoryUsage().arrayBuffers;
    const started = performance.now();
    const bytes = 4e12;
    await refused(
      t,
      await crafted({ w: { dtype: 'F32', shape: [1_000_000, 1_000_000], data_offsets: [0, bytes] } }, 64),
      'w',
      /its bytes end at 4000000000000, past the 64 bytes of data the file holds \(truncated\?\)/,
    );
    t.true(performance.now() - started < 2000);
    t.true(process.memoryUsage().arrayBuffers - before < 64 << 20, 'no large buffer was allocated');
  },
);

test('a tensor whose bytes end past the end of the data (a truncated file) is refused by tensor name', async (t) => {
  const header = {
    a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
    b: { dtype: 'F32', shape: [4], data_offsets: [8, 24] },
  };
  await refused(t, await crafted(header, 20), 'b', /its bytes end at 24, past the 20 bytes of data/);
  // A file cut off after a good write is the same.
  const file = join(dir, 'cut.safetensors');
  await writeSafetensors(file, [{ name: 'w', dtype: 'F16', shape: [8], values: () => ramp(8) }]);
  const size = (await readFile(file)).length;
  await truncate(file, size - 1);
  await refused(t, file, 'w', /its bytes end at 16, past the 15 bytes of data/);
});

test('two tensors whose byte ranges overlap are refused, naming the one that overlaps and the other', async (t) => {
  const header = {
    a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] },
    b: { dtype: 'F32', shape: [4], data_offsets: [8, 24] },
  };
  await refused(t, await crafted(header, 24), 'b', /its bytes overlap those of a/);
  // The same bytes named twice (one tensor aliased as another) is an overlap too.
  const alias = {
    b: { dtype: 'F32', shape: [4], data_offsets: [0, 16] },
    a: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] },
  };
  const error = await t.throwsAsync(readSafetensorsHeader(await crafted(alias, 16)), { instanceOf: ModelFileError });
  t.regex(error?.message ?? '', /overlap/);
  // And a range that lies inside an earlier, larger one.
  const inside = {
    big: { dtype: 'F32', shape: [8], data_offsets: [0, 32] },
    small: { dtype: 'F32', shape: [1], data_offsets: [8, 12] },
    after: { dtype: 'F32', shape: [1], data_offsets: [32, 36] },
  };
  await refused(t, await crafted(inside, 36), 'small', /overlap those of big/);
});

test('zero-size tensors at a boundary overlap nothing, whatever the order of the header', async (t) => {
  const header = {
    a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] },
    b: { dtype: 'F32', shape: [4], data_offsets: [16, 32] },
    empty: { dtype: 'F32', shape: [0], data_offsets: [16, 16] },
    first: { dtype: 'BF16', shape: [0, 3], data_offsets: [0, 0] },
  };
  const { tensors } = await readSafetensorsHeader(await crafted(header, 32));
  t.deepEqual(
    tensors.map((e) => e.name),
    ['a', 'b', 'empty', 'first'],
  );
  t.deepEqual(await readTensor(tensors.find((e) => e.name === 'empty')!), new Float32Array(0));
});

test('__metadata__ that is not an object of strings is refused, naming __metadata__', async (t) => {
  await refused(t, await crafted({ __metadata__: ['pt'] }), '__metadata__', /is not an object/);
  await refused(t, await crafted({ __metadata__: { format: 'pt', n: 3 } }), '__metadata__', /"n" is not a string/);
});

test('readTensor refuses a dtype it cannot read (I8, quantized) by tensor name and dtype; its raw bytes still read', async (t) => {
  const file = await crafted(
    { __metadata__: { format: 'pt' }, q: { dtype: 'I8', shape: [2, 2], data_offsets: [0, 4] } },
    Uint8Array.of(1, 2, 254, 255),
  );
  const [entry] = (await readSafetensorsHeader(file)).tensors;
  const error = await t.throwsAsync(readTensor(entry!), { instanceOf: ModelFileError });
  t.is(error?.file, file);
  t.is(error?.field, 'q');
  t.regex(error?.message ?? '', /\(q\): dtype I8 cannot be read \(only F32, F16 and BF16\)/);
  t.deepEqual(Array.from(await readTensorBytes(entry!)), [1, 2, 254, 255]);
});

test('a file that shrinks after its header was read is refused when the tensor is read, not read as zeros', async (t) => {
  const file = join(dir, 'shrinks.safetensors');
  await writeSafetensors(file, [{ name: 'w', dtype: 'F32', shape: [16], values: () => ramp(16) }]);
  const [entry] = (await readSafetensorsHeader(file)).tensors;
  await truncate(file, entry!.begin + 10);
  const error = await t.throwsAsync(readTensor(entry!), { instanceOf: ModelFileError });
  t.is(error?.file, file);
  t.regex(error?.message ?? '', new RegExp(`ends early, at byte ${entry!.begin + 10} \\(truncated\\?\\)`));
  await rm(file);
  await t.throwsAsync(readTensor(entry!), { instanceOf: ModelFileError, message: /no such file/ });
});

test('a tensor named twice in the header (the second on bytes of its own) is refused naming it, not read as the last', async (t) => {
  const entry = (begin: number) => `{"dtype":"F32","shape":[2],"data_offsets":[${begin},${begin + 8}]}`;
  await refused(t, await crafted(`{"a":${entry(0)},"a":${entry(8)}}`, 16), 'a', /the header names a twice/);
  // Named as JSON.parse reads it: an escaped spelling of the same name is the same name.
  await refused(t, await crafted(`{"a":${entry(0)}, "\\u0061" :${entry(8)}}`, 16), 'a', /names a twice/);
  await refused(
    t,
    await crafted('{"w":{"dtype":"F32","shape":[2],"dtype":"F16","data_offsets":[0,8]}}', 8),
    'w',
    /its entry names "dtype" twice/,
  );
  // A name that is also a value elsewhere, or holds quotes and colons, is one name.
  const { tensors } = await readSafetensorsHeader(
    await crafted(`{"__metadata__":{"format":"a","x":"\\"a\\":"},"a":${entry(0)},"\\"a\\":":${entry(8)}}`, 16),
  );
  t.deepEqual(
    tensors.map((e) => e.name),
    ['a', '"a":'],
  );
});

test('data bytes that no tensor covers (between tensors, or after the last) are refused naming where they are', async (t) => {
  const gap = {
    a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
    b: { dtype: 'F32', shape: [2], data_offsets: [12, 20] },
  };
  await refused(
    t,
    await crafted(gap, 20),
    null,
    /bytes 8 to 12 of its data belong to no tensor \(they come before b\)/,
  );
  const first = { a: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } };
  await refused(
    t,
    await crafted(first, 12),
    null,
    /bytes 0 to 4 of its data belong to no tensor \(they come before a\)/,
  );
  const tail = { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } };
  await refused(t, await crafted(tail, 13), null, /bytes 8 to 13 of its data, at its end, belong to no tensor/);
  await refused(t, await crafted({ __metadata__: { format: 'pt' } }, 3), null, /bytes 0 to 3 of its data, at its end/);
});
