/**
 * The floating-point dtypes model weights come in, and their conversions to and from float32 (what
 * the kernels and tfjs compute in). Widening is exact; narrowing rounds to nearest, ties to even, as
 * PyTorch's `.to(torch.bfloat16)` / `.half()` do, so a float32 → dtype → float32 round trip of
 * values that came from that dtype gives back the same bits.
 */
export type FloatDtype = 'F32' | 'F16' | 'BF16';

export const FLOAT_DTYPES: readonly FloatDtype[] = ['F32', 'F16', 'BF16'];

export const DTYPE_BYTES: { readonly [D in FloatDtype]: number } = { F32: 4, F16: 2, BF16: 2 };

export function isFloatDtype(value: string): value is FloatDtype {
  return (FLOAT_DTYPES as readonly string[]).includes(value);
}

const scratch = new DataView(new ArrayBuffer(4));

/** float32 bits of a half-precision value. */
function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24; // zero and subnormals: exact in float32
  if (exp === 31) {
    scratch.setUint32(0, ((h & 0x8000) << 16) | 0x7f800000 | (mant << 13));
    return scratch.getFloat32(0);
  }
  scratch.setUint32(0, ((h & 0x8000) << 16) | ((exp + 112) << 23) | (mant << 13));
  return scratch.getFloat32(0);
}

/** Half-precision bits of a float32 value (round to nearest even; overflow to infinity). */
function floatToHalf(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  if (exp > 142) return sign | 0x7c00;
  if (exp < 113) {
    // A half subnormal: the 24-bit significand shifted right, rounded.
    if (exp < 102) return sign;
    const m = mant | 0x800000;
    const shift = 126 - exp;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = sign | ((exp - 112) << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++; // a carry moves into the exponent, as it should
  return h;
}

/** bfloat16 bits of a float32 value (round to nearest even; NaN stays a quiet NaN). */
function floatToBfloat(bits: number): number {
  if ((bits & 0x7f800000) === 0x7f800000 && bits & 0x7fffff) return ((bits >>> 16) | 0x40) & 0xffff;
  return Math.floor((bits + 0x7fff + ((bits >>> 16) & 1)) / 65536) & 0xffff;
}

/** Little-endian bytes of `dtype` as float32 values. */
export function toFloat32(bytes: Uint8Array, dtype: FloatDtype): Float32Array {
  const n = bytes.byteLength / DTYPE_BYTES[dtype];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(n);
  if (dtype === 'F32') {
    for (let i = 0; i < n; i++) out[i] = view.getFloat32(i * 4, true);
  } else if (dtype === 'BF16') {
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i++) bits[i] = view.getUint16(i * 2, true) << 16;
  } else {
    for (let i = 0; i < n; i++) out[i] = halfToFloat(view.getUint16(i * 2, true));
  }
  return out;
}

/** float32 values as little-endian bytes of `dtype`. */
export function fromFloat32(values: Float32Array, dtype: FloatDtype): Uint8Array {
  const out = new Uint8Array(values.length * DTYPE_BYTES[dtype]);
  const view = new DataView(out.buffer);
  if (dtype === 'F32') {
    for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i]!, true);
    return out;
  }
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const narrow = dtype === 'BF16' ? floatToBfloat : floatToHalf;
  for (let i = 0; i < values.length; i++) view.setUint16(i * 2, narrow(bits[i]!), true);
  return out;
}
