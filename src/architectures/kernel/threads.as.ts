// AssemblyScript (not TypeScript): what the threaded kernels share. Their memory is shared; the host
// and its workers each call the same export with their thread index t of T, each doing its share,
// with a barrier between phases.

/** The first of `n` items that thread `t` of `T` takes (its share runs to first(n, t + 1, T)). */
@inline export function first(n: i32, t: i32, T: i32): i32 {
  return <i32>((<i64>n * <i64>t) / <i64>T);
}

// The barrier at `sync`: [arrived, generation] (i32 each, in shared memory).
const SPINS: i32 = 20000;

/** Waits until all `T` threads have come here (a generation barrier: the last one in releases the others). */
export function barrier(sync: usize, T: i32): void {
  if (T == 1) return;
  const gen = atomic.load<i32>(sync, 4);
  if (atomic.add<i32>(sync, 1) == T - 1) {
    atomic.store<i32>(sync, 0);
    atomic.store<i32>(sync, gen + 1, 4);
    atomic.notify(sync + 4);
    return;
  }
  let spins = 0;
  while (atomic.load<i32>(sync, 4) == gen) {
    if (++spins > SPINS) memory.atomic.wait32(sync + 4, gen, 1000000);
  }
}
