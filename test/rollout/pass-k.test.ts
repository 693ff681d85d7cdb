import test from 'ava';
import { passAtK } from '../../src/rollout/pass-k.ts';

test('pass^k and pass@k: k = 1 is the success rate, k = n asks all (pass^) or any (pass@) run to succeed', (t) => {
  const rows = passAtK([
    [true, true, true, true],
    [true, false, true, false],
    [false, false, false, false],
  ]);
  t.deepEqual(
    rows.map((r) => r.k),
    [1, 2, 3, 4],
  );
  t.is(rows[0]!.passHat, 6 / 12);
  t.is(rows[0]!.passAt, 6 / 12);
  t.is(rows[3]!.passHat, 1 / 3); // only the first task: every run
  t.is(rows[3]!.passAt, 2 / 3); // the first two: some run
  // Task 2 with c = 2 of n = 4 at k = 2: C(2,2)/C(4,2) = 1/6 all succeed; 1 − C(2,2)/C(4,2) = 5/6 one does.
  t.true(Math.abs(rows[1]!.passHat - (1 + 1 / 6) / 3) < 1e-12);
  t.true(Math.abs(rows[1]!.passAt - (1 + 5 / 6) / 3) < 1e-12);
  // pass^k never rises with k, pass@k never falls.
  for (let i = 1; i < rows.length; i++) {
    t.true(rows[i]!.passHat <= rows[i - 1]!.passHat);
    t.true(rows[i]!.passAt >= rows[i - 1]!.passAt);
  }
});

test('pass^k refuses no tasks, no runs, and tasks with different numbers of runs', (t) => {
  t.throws(() => passAtK([]), { message: /at least one task/ });
  t.throws(() => passAtK([[]]), { message: /same number of runs/ });
  t.throws(() => passAtK([[true], [true, false]]), { message: /got 1, 2/ });
});
