import test from 'ava';
import fc from 'fast-check';
import { DTYPE_BYTES, fromFloat32, isFloatDtype, toFloat32 } from '../../src/formats/dtype.ts';

type Narrow = 'F16' | 'BF16';

/** The float32 value whose bits are `bits`. */
const f32 = (bits: number): number => new Float32Array(Uint32Array.of(bits >>> 0).buffer)[0]!;
/** The bits of a float32 value. */
const bitsOf = (x: number): number => new Uint32Array(Float32Array.of(x).buffer)[0]!;
/** The 16-bit pattern `dtype` stores for one float32 value. */
const narrow = (x: number, dtype: Narrow): number => {
  const bytes = fromFloat32(Float32Array.of(x), dtype);
  return bytes[0]! | (bytes[1]! << 8);
};
/** The float32 value of one 16-bit pattern of `dtype`. */
const widen = (h: number, dtype: Narrow): number => toFloat32(Uint8Array.of(h & 0xff, h >>> 8), dtype)[0]!;
const hex = (n: number) => `0x${n.toString(16).padStart(4, '0')}`;

/** The value of an F16 pattern, from the IEEE 754 binary16 definition (in float64: independent of the code under test). */
function f16Value(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return mant ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  if (exp === 0) return sign * mant * 2 ** -24;
  return sign * 2 ** (exp - 15) * (1 + mant / 1024);
}

/** The value of a BF16 pattern (8 exponent bits, 7 mantissa bits), from its definition. */
function bf16Value(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 7) & 0xff;
  const mant = h & 0x7f;
  if (exp === 0xff) return mant ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  if (exp === 0) return sign * mant * 2 ** -133;
  return sign * 2 ** (exp - 127) * (1 + mant / 128);
}

const isNaNPattern = (h: number, dtype: Narrow) =>
  dtype === 'F16' ? (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0 : (h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0;

/** Every 16-bit pattern, as little-endian bytes. */
const allPatterns = (() => {
  const bytes = new Uint8Array(65536 * 2);
  const view = new DataView(bytes.buffer);
  for (let h = 0; h < 65536; h++) view.setUint16(h * 2, h, true);
  return bytes;
})();

test('the dtypes and their sizes: F32 is 4 bytes, F16 and BF16 2; nothing else is a float dtype here', (t) => {
  t.deepEqual(DTYPE_BYTES, { F32: 4, F16: 2, BF16: 2 });
  for (const d of ['F32', 'F16', 'BF16']) t.true(isFloatDtype(d));
  for (const d of ['I8', 'F64', 'f32', 'bf16', 'F8_E4M3', '']) t.false(isFloatDtype(d), d);
});

for (const [dtype, value] of [
  ['F16', f16Value],
  ['BF16', bf16Value],
] as const) {
  test(`widening every ${dtype} pattern is exact: the float32 equals the value the bits define (signed zeros included)`, (t) => {
    const out = toFloat32(allPatterns, dtype);
    t.is(out.length, 65536);
    let wrong = 0;
    for (let h = 0; h < 65536; h++) {
      const want = value(h);
      const ok = Number.isNaN(want) ? Number.isNaN(out[h]!) : Object.is(out[h], want);
      if (!ok && wrong++ < 5) t.fail(`${dtype} ${hex(h)}: ${out[h]} but the bits define ${want}`);
    }
    t.is(wrong, 0);
  });

  test(`every ${dtype} pattern survives widen → narrow unchanged (a NaN stays a NaN)`, (t) => {
    const back = fromFloat32(toFloat32(allPatterns, dtype), dtype);
    const view = new DataView(back.buffer);
    let wrong = 0;
    for (let h = 0; h < 65536; h++) {
      const got = view.getUint16(h * 2, true);
      const ok = isNaNPattern(h, dtype) ? isNaNPattern(got, dtype) : got === h;
      if (!ok && wrong++ < 5) t.fail(`${dtype} ${hex(h)} came back as ${hex(got)}`);
    }
    t.is(wrong, 0);
  });

  test(`${dtype}: any 16-bit pattern (fast-check) survives widen → narrow, and narrowing its value again is the identity`, (t) => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffff }), (h) => {
        const x = widen(h, dtype);
        const back = narrow(x, dtype);
        if (isNaNPattern(h, dtype)) return Number.isNaN(x) && isNaNPattern(back, dtype);
        return back === h && narrow(widen(back, dtype), dtype) === h;
      }),
      { numRuns: 5000 },
    );
    t.pass();
  });

  test(`${dtype}: narrowing any finite float32 (fast-check) gives the nearest ${dtype} value, ties to the even pattern, overflow to ±infinity`, (t) => {
    const infBits = dtype === 'F16' ? 0x7c00 : 0x7f80;
    // The value one step past the largest finite pattern: rounding to infinity happens at the midpoint to it.
    const beyond = dtype === 'F16' ? 2 ** 16 : 2 ** 128;
    const magnitude = (m: number) => (m === infBits ? beyond : Math.abs(value(m)));
    // Random bits, and bits made a tie (the dropped bits exactly half a step; in F16's normal range for F16).
    const tieBits = dtype === 'F16' ? [0x1fff, 0x1000] : [0xffff, 0x8000];
    const anyBits = fc.integer({ min: 0, max: 0xffffffff });
    const bitsArb = fc.oneof(
      anyBits,
      anyBits.map((b) => ((b & ~tieBits[0]!) | tieBits[1]!) >>> 0),
    );
    fc.assert(
      fc.property(bitsArb, (bits) => {
        const x = f32(bits);
        if (!Number.isFinite(x)) return true;
        const h = narrow(x, dtype);
        const m = h & 0x7fff;
        if (x !== 0 && (h & 0x8000 ? -1 : 1) !== Math.sign(x)) return false;
        if (x === 0) return h === (Object.is(x, -0) ? 0x8000 : 0);
        if (m > infBits) return false; // a finite value never narrows to a NaN
        const a = Math.abs(x);
        const d = Math.abs(a - magnitude(m));
        for (const n of [m - 1, m + 1]) {
          if (n < 0 || n > infBits) continue;
          const dn = Math.abs(a - magnitude(n));
          if (dn < d) return false;
          if (dn === d && m & 1) return false; // a tie goes to the even pattern
        }
        return true;
      }),
      { numRuns: 20000 },
    );
    t.pass();
  });
}

test('BF16: ties round to the even pattern, anything past the midpoint rounds away (hand-computed bits)', (t) => {
  const cases: Array<[number, number, string]> = [
    [0x3f800000, 0x3f80, '1.0 exactly'],
    [0x3f808000, 0x3f80, '1 + 2⁻⁸: halfway between 0x3f80 and 0x3f81 → the even 0x3f80'],
    [0x3f818000, 0x3f82, 'halfway between 0x3f81 and 0x3f82 → the even 0x3f82'],
    [0x3f808001, 0x3f81, 'just past halfway → up'],
    [0x3f807fff, 0x3f80, 'just below halfway → down'],
    [0xbf818000, 0xbf82, 'a negative tie → the even pattern'],
    [0x3fffffff, 0x4000, 'a carry out of the mantissa moves into the exponent'],
    [0x00008000, 0x0000, 'a float32 subnormal tie → +0'],
    [0x00018000, 0x0002, 'a float32 subnormal tie → the even subnormal'],
    [0x80000000, 0x8000, '-0 stays -0'],
  ];
  for (const [bits, want, why] of cases) t.is(hex(narrow(f32(bits), 'BF16')), hex(want), why);
});

test('BF16: overflow rounds to ±infinity, infinity stays infinity, NaN stays NaN (also a NaN whose payload is only in the low bits)', (t) => {
  t.is(hex(narrow(f32(0x7f7fffff), 'BF16')), '0x7f80', 'the largest float32 rounds past the largest BF16');
  t.is(hex(narrow(f32(0x7f7f8000), 'BF16')), '0x7f80', 'a tie at the top: 0x7f7f is odd, so it rounds up, to infinity');
  t.is(hex(narrow(f32(0x7f7f7fff), 'BF16')), '0x7f7f', 'below the midpoint stays the largest finite BF16');
  t.is(hex(narrow(f32(0xff7fffff), 'BF16')), '0xff80');
  t.is(hex(narrow(Number.POSITIVE_INFINITY, 'BF16')), '0x7f80');
  t.is(hex(narrow(Number.NEGATIVE_INFINITY, 'BF16')), '0xff80');
  for (const nanBits of [0x7fc00000, 0x7f800001, 0xff800001, 0x7fffffff]) {
    const h = narrow(f32(nanBits), 'BF16');
    t.true(isNaNPattern(h, 'BF16'), `float32 ${nanBits.toString(16)} → ${hex(h)} is not a NaN`);
    t.true(Number.isNaN(widen(h, 'BF16')));
  }
});

test('F16: ties round to the even pattern, anything past the midpoint rounds away (hand-computed bits)', (t) => {
  const cases: Array<[number, number, string]> = [
    [1, 0x3c00, '1.0 exactly'],
    [1 + 2 ** -11, 0x3c00, '1 + 2⁻¹¹: halfway between 0x3c00 and 0x3c01 → the even 0x3c00'],
    [1 + 3 * 2 ** -11, 0x3c02, 'halfway between 0x3c01 and 0x3c02 → the even 0x3c02'],
    [f32(0x3f801001), 0x3c01, 'just past halfway → up'],
    [f32(0x3f800fff), 0x3c00, 'just below halfway → down'],
    [-(1 + 3 * 2 ** -11), 0xbc02, 'a negative tie → the even pattern'],
    [2 - 2 ** -12, 0x4000, 'a carry out of the mantissa moves into the exponent'],
    [65504, 0x7bff, 'the largest F16'],
    [65519, 0x7bff, 'below the midpoint to 65536 stays the largest F16'],
    [-0, 0x8000, '-0 stays -0'],
  ];
  for (const [x, want, why] of cases) t.is(hex(narrow(x, 'F16')), hex(want), why);
  t.is(bitsOf(1 + 2 ** -11), 0x3f801000, 'the tie above is what it says');
});

test('F16: overflow rounds to ±infinity (from the midpoint 65520 up), infinity stays infinity, NaN stays NaN', (t) => {
  t.is(hex(narrow(65520, 'F16')), '0x7c00', 'a tie at the top: 0x7bff is odd, so it rounds up, to infinity');
  t.is(hex(narrow(-65520, 'F16')), '0xfc00');
  t.is(hex(narrow(1e6, 'F16')), '0x7c00');
  t.is(hex(narrow(-3.4e38, 'F16')), '0xfc00');
  t.is(hex(narrow(Number.POSITIVE_INFINITY, 'F16')), '0x7c00');
  t.is(hex(narrow(Number.NEGATIVE_INFINITY, 'F16')), '0xfc00');
  for (const nanBits of [0x7fc00000, 0x7f800001, 0xff800001, 0x7fffffff]) {
    const h = narrow(f32(nanBits), 'F16');
    t.true(isNaNPattern(h, 'F16'), `float32 ${nanBits.toString(16)} → ${hex(h)} is not a NaN`);
    t.true(Number.isNaN(widen(h, 'F16')));
  }
  t.is(widen(0x7c00, 'F16'), Number.POSITIVE_INFINITY);
  t.is(widen(0xfc00, 'F16'), Number.NEGATIVE_INFINITY);
});

test('F16 subnormals both ways: exact widening, rounding to nearest even into, within and out of the subnormal range', (t) => {
  // Widening.
  t.is(widen(0x0001, 'F16'), 2 ** -24, 'the smallest subnormal');
  t.is(widen(0x8001, 'F16'), -(2 ** -24));
  t.is(widen(0x03ff, 'F16'), 1023 * 2 ** -24, 'the largest subnormal');
  t.is(widen(0x0400, 'F16'), 2 ** -14, 'the smallest normal');
  t.true(Object.is(widen(0x8000, 'F16'), -0));
  // Narrowing.
  const cases: Array<[number, number, string]> = [
    [2 ** -24, 0x0001, 'the smallest subnormal, exactly'],
    [1023 * 2 ** -24, 0x03ff, 'the largest subnormal, exactly'],
    [2 ** -25, 0x0000, 'half the smallest subnormal: a tie → +0 (even)'],
    [f32(bitsOf(2 ** -25) + 1), 0x0001, 'just past half the smallest subnormal → 0x0001'],
    [3 * 2 ** -25, 0x0002, '1.5 units: a tie → the even 0x0002'],
    [5 * 2 ** -25, 0x0002, '2.5 units: a tie → the even 0x0002'],
    [1023.5 * 2 ** -24, 0x0400, 'a tie between the largest subnormal (odd) and the smallest normal → the normal'],
    [2 ** -14, 0x0400, 'the smallest normal, exactly'],
    [-(3 * 2 ** -25), 0x8002, 'a negative subnormal tie'],
    [1e-10, 0x0000, 'far below the smallest subnormal → +0'],
    [-1e-10, 0x8000, 'far below, negative → -0'],
    [f32(0x00000001), 0x0000, 'a float32 subnormal → +0'],
    [2 ** -26 * 1.5, 0x0000, 'below half the smallest subnormal → +0'],
  ];
  for (const [x, want, why] of cases) t.is(hex(narrow(x, 'F16')), hex(want), why);
});

test('conversions read and write little-endian bytes, from a view at any offset (Buffers from a pool start mid-buffer)', (t) => {
  const values = Float32Array.of(1, -2.5, 0.333984375, 65504);
  for (const dtype of ['F32', 'F16', 'BF16'] as const) {
    const bytes = fromFloat32(values, dtype);
    t.is(bytes.length, values.length * DTYPE_BYTES[dtype]);
    const shifted = new Uint8Array(bytes.length + 3);
    shifted.set(bytes, 1);
    const back = toFloat32(shifted.subarray(1, 1 + bytes.length), dtype);
    t.deepEqual(Array.from(back), dtype === 'BF16' ? [1, -2.5, 0.333984375, 65536] : Array.from(values), dtype);
  }
  t.deepEqual(Array.from(fromFloat32(Float32Array.of(1), 'F16')), [0x00, 0x3c], 'F16 1.0 is 00 3c on disk');
  t.deepEqual(Array.from(fromFloat32(Float32Array.of(1), 'BF16')), [0x80, 0x3f], 'BF16 1.0 is 80 3f on disk');
  t.deepEqual(Array.from(fromFloat32(Float32Array.of(1), 'F32')), [0, 0, 0x80, 0x3f], 'F32 1.0 is 00 00 80 3f on disk');
  // A Float32Array that is itself a view into a larger buffer.
  const big = Float32Array.of(9, 1, 2, 9);
  t.deepEqual(Array.from(toFloat32(fromFloat32(big.subarray(1, 3), 'F16'), 'F16')), [1, 2]);
});

test('F32 passes every bit through unchanged, NaN payloads and subnormals included', (t) => {
  const bits = Uint32Array.of(0, 0x80000000, 1, 0x007fffff, 0x7f7fffff, 0x7f800000, 0x7fc00001, 0xffc12345, 0x3eaaaaab);
  const bytes = fromFloat32(new Float32Array(bits.buffer), 'F32');
  t.deepEqual(Array.from(new Uint32Array(toFloat32(bytes, 'F32').buffer)), Array.from(bits));
});
