import test from 'ava';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { resolvePolicy } from '../../src/app/resolve-policy.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { createMultihopQaScenario, loadWorld } from '../../scenarios/multihop-qa/index.ts';
import { noisyMode } from '../../scenarios/multihop-qa/policies.ts';
import { WORLD_SPLITS } from '../../scenarios/multihop-qa/questions.ts';

const scenario = createMultihopQaScenario({});
const pool = loadWorld(1, 'small').tasks;

async function run(policyName: string, split: string, episodes: number, seed = 0) {
  const policy = await resolvePolicy(policyName, scenario, seed);
  return rollout({ scenario, policy, split, episodes, seed });
}

const byType = (summary: { [k: string]: unknown }) =>
  summary.byType as { [type: string]: { n: number; em: number; f1: number } };

for (const split of WORLD_SPLITS) {
  test(`expert: ≥ 99% EM on ${split}, every gold document retrieved`, async (t) => {
    // every task of the small splits; 400 of train
    const episodes = Math.min(pool[split].length, 400);
    const { records, summary } = await run('expert', split, episodes);
    t.is(records.length, episodes);
    t.is(typeof summary.em, 'number');
    t.true((summary.em as number) >= 0.99, `EM ${String(summary.em)}`);
    t.is(summary.successRate, summary.em as number);
    t.is(summary.failed, 0);
    for (const r of records) {
      const found = r.turns.flatMap((x) => (x.info?.goldFound as string[] | undefined) ?? []);
      t.deepEqual([...found].sort(), [...(r.task.meta!.gold as string[])].sort(), r.task.id);
    }
  });
}

test('naive-rag (one retrieval + perfect reader) is clearly below the expert on bridge questions, and on ood', async (t) => {
  const test_ = await run('naive-rag', 'test', pool.test.length);
  const bridge = byType(test_.summary).bridge!;
  t.true(bridge.n >= 40);
  t.true(bridge.em <= 0.2, `naive-rag bridge EM ${bridge.em}`);
  t.true((test_.summary.em as number) <= 0.5);
  t.true(test_.records.every((r) => r.turns.length === 2));
  const ood = await run('naive-rag', 'ood', pool.ood.length);
  t.true((ood.summary.em as number) <= 0.1, `naive-rag ood EM ${ood.summary.em}`);
});

test('noisy-expert: imperfect demonstrations at the documented rates, deterministic per episode', async (t) => {
  const a = await run('noisy-expert', 'train', 400, 3);
  const em = a.summary.em as number;
  t.true(em > 0.7 && em < 0.9, `noisy EM ${em} (expected about 0.8)`);
  // short episodes (answered one search early) exist
  t.true(a.records.some((r) => r.turns.length < (r.task.meta!.hops as number) + 1));
  const b = await run('noisy-expert', 'train', 400, 3);
  t.deepEqual(
    a.records.map((r) => r.checksum),
    b.records.map((r) => r.checksum),
  );
  t.is(noisyMode(3, 'x#0', { early: 0, distractor: 0 }), 'clean');
  t.is(noisyMode(3, 'x#0', { early: 1, distractor: 0 }), 'early');
  t.is(noisyMode(3, 'x#0', { early: 0, distractor: 1 }), 'distractor');
  t.throws(
    () =>
      createMultihopQaScenario({ noisyEarly: '0.8', noisyDistractor: '0.8' }).policies['noisy-expert']!({
        scenario,
        seed: 0,
      }),
    {
      message: /sum to ≤ 1/,
    },
  );
});

test('same seed ⇒ byte-identical records; summary per question type', async (t) => {
  const one = await run('naive-rag', 'dev', 60, 11);
  const two = await run('naive-rag', 'dev', 60, 11);
  const bytes = (rs: EpisodeRecord[]) => rs.map((r) => JSON.stringify(r)).join('\n');
  t.is(bytes(one.records), bytes(two.records));
  const types = byType(one.summary);
  t.deepEqual(Object.keys(types), ['bridge', 'comparison', 'compositional', 'inference']);
  t.is(
    Object.values(types).reduce((a, s) => a + s.n, 0),
    60,
  );
  const weighted = Object.values(types).reduce((a, s) => a + s.n * s.em, 0) / 60;
  t.true(Math.abs(weighted - (one.summary.em as number)) < 1e-9);
});
