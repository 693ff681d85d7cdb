import test from 'ava';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { inThread } from '../../src/rollout/in-thread.ts';
import type { RolloutExecutor } from '../../src/rollout/executor.ts';
import { rollout, type RolloutOptions } from '../../src/rollout/rollout.ts';
import { summarizeRecords } from '../../src/rollout/summary.ts';
import { instantiateScenario } from '../../src/scenario/load.ts';
import { ScenarioError } from '../../src/core/errors.ts';
import { gridworld } from '../../scenarios/gridworld/index.ts';
import { toyScenario } from '../helpers/toy-scenario.ts';

const options = async (): Promise<RolloutOptions> => ({
  scenario: gridworld,
  policy: await gridworld.policies['random']!({ scenario: gridworld, seed: 1 }),
  split: 'train',
  episodes: 24,
  seed: 5,
  concurrency: 6,
});

/**
 * Plays the batch in this thread, then hands the records on as a crashed and rerun worker pool
 * may: out of order, some twice, and (with `drop`) one never, leaving a gap.
 */
function scrambling(drop?: number): RolloutExecutor {
  const played = inThread();
  return {
    async play(batch, emit, signal) {
      const records: EpisodeRecord[] = [];
      const report = await played.play(batch, (r) => records.push(r as EpisodeRecord), signal);
      const order = [...records].sort((a, b) => ((a.index * 7) % 11) - ((b.index * 7) % 11) || b.index - a.index);
      for (const r of [...order, ...order.slice(0, 5)]) if (r.index !== drop) emit(r);
      return report;
    },
    close: () => played.close(),
  };
}

test('without keepRecords the result holds no record, and everything else is what a kept run says', async (t) => {
  const seen: number[][] = [[], []];
  const kept = await rollout({ ...(await options()), onRecord: (r) => seen[0]!.push(r.index) });
  const streamed = await rollout({ ...(await options()), keepRecords: false, onRecord: (r) => seen[1]!.push(r.index) });
  t.is(kept.records.length, 24);
  t.deepEqual(streamed.records, []);
  t.deepEqual(seen[1], seen[0]);
  t.deepEqual(streamed.summary, kept.summary);
  // The scenario's own metrics are in it, the same as a summary of the records in hand.
  t.deepEqual(Object.keys(kept.summary).slice(6), ['escapedRate', 'fellRate', 'keyRate', 'doorRate', 'meanMoves']);
  t.deepEqual(summarizeRecords(kept.records, gridworld), kept.summary);
  t.is(streamed.throughput.envStepsPerSecond > 0, true);
});

test('records arriving out of order and twice are handed on once each, in episode order, kept or not', async (t) => {
  const reference = await rollout(await options());
  for (const keepRecords of [true, false]) {
    const order: number[] = [];
    const result = await rollout({
      ...(await options()),
      executor: scrambling(),
      keepRecords,
      onRecord: (r) => order.push(r.index),
    });
    t.deepEqual(order, [...Array(24).keys()]);
    t.deepEqual(result.summary, reference.summary);
    t.is(result.records.length, keepRecords ? 24 : 0);
  }
});

test('past a gap (an episode that never finished), the records after it are still handed on and summarized', async (t) => {
  const order: number[] = [];
  const result = await rollout({
    ...(await options()),
    executor: scrambling(3),
    keepRecords: false,
    onRecord: (r) => order.push(r.index),
  });
  t.deepEqual(
    order,
    [...Array(24).keys()].filter((i) => i !== 3),
  );
  t.is(result.summary.episodes, 23);
});

test('a scenario with the old summarize(records) is refused, saying what replaced it', async (t) => {
  const old = { ...toyScenario(), summarize: () => ({}) };
  const err = await t.throwsAsync(instantiateScenario(old, {}), { instanceOf: ScenarioError });
  t.regex(
    err!.message,
    /scenario toy: "summarize\(records\)" was replaced by "summarizer\(\)".*add\(record\), result\(\)/,
  );
});
