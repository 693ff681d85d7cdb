// AssemblyScript (compiled by bin/build-kernel.js into linear-wasm.ts; not TypeScript).
//
// A frozen model's linear maps for training (host: ./linear-kernel.ts): out = x·Wᵀ for a matrix W
// [N][K] kept in the kernel's memory in the checkpoint's own element type (float32, bfloat16 or
// IEEE half, widened exactly as it is loaded), on every thread. The backward pass to the inputs,
// dx = dy·W, is the same call on W's transposed copy, which the host keeps beside it. Each output
// is one dot product in a fixed order (./matmul.as.ts), so the results are the same bits for any
// number of threads.

import { colFrom, colTo, matmul } from './matmul.as';
import { barrier } from './threads.as';

const F_BF16: i32 = 1;
const F_F16: i32 = 2;

/**
 * out [S][N] = x [S][K] · w [N][K]ᵀ, thread t of T computing its share of the columns; `wide`: room
 * for T·4·K float32, where 16-bit columns are widened (./matmul.as.ts).
 */
export function apply(x: usize, S: i32, K: i32, w: usize, N: i32, out: usize, format: i32, wide: usize, t: i32, T: i32, sync: usize): void {
  const n0 = colFrom(N, t, T);
  const n1 = colTo(N, t, T);
  const mine = wide + ((<usize>t * <usize>K) << 4);
  if (format == F_BF16) matmul<u16>(x, K, S, K, w, n0, n1, 0, out, N, false, mine);
  else if (format == F_F16) matmul<i16>(x, K, S, K, w, n0, n1, 0, out, N, false, mine);
  else matmul<f32>(x, K, S, K, w, n0, n1, 0, out, N, false, 0);
  barrier(sync, T);
}
