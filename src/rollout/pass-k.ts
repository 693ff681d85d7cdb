/**
 * τ-bench's reliability metrics over K runs of each task: pass^k, the chance that k runs of a task
 * drawn from its n all succeed, C(c, k) / C(n, k) for c successes; and pass@k, that at least one
 * does, 1 − C(n − c, k) / C(n, k). Both averaged over tasks, for every k from 1 to n. pass^1 =
 * pass@1 = the success rate; pass^n asks every run to succeed.
 */
export interface PassAtK {
  k: number;
  /** pass^k: k runs of a task all succeed. */
  passHat: number;
  /** pass@k: at least one of k runs succeeds. */
  passAt: number;
}

/** C(n, k) as a float (n is small: the runs per task). */
function choose(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let c = 1;
  for (let i = 1; i <= k; i++) c = (c * (n - k + i)) / i;
  return c;
}

/** `runs[t]`: task t's outcomes (success or not), each task with the same number of runs n ≥ 1. */
export function passAtK(runs: readonly (readonly boolean[])[]): PassAtK[] {
  if (runs.length === 0) throw new RangeError('pass^k needs at least one task');
  const n = runs[0]!.length;
  if (n === 0 || runs.some((r) => r.length !== n))
    throw new RangeError(
      `pass^k needs the same number of runs (≥ 1) for every task; got ${runs.map((r) => r.length).join(', ')}`,
    );
  const successes = runs.map((r) => r.filter(Boolean).length);
  return Array.from({ length: n }, (_, i) => {
    const k = i + 1;
    const all = choose(n, k);
    const mean = (f: (c: number) => number) => successes.reduce((s, c) => s + f(c), 0) / successes.length;
    return {
      k,
      passHat: mean((c) => choose(c, k) / all),
      passAt: mean((c) => 1 - choose(n - c, k) / all),
    };
  });
}
