import { fileURLToPath } from 'node:url';
import test from 'ava';
import { QueueExecutor } from '../../src/queue/queue-executor.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { load, server, trusting, workers } from '../helpers/queue.ts';

const FAULTY = fileURLToPath(new URL('../fixtures/faulty', import.meta.url));
const call = (name: string, args: object = {}) => `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;

// Slower checks of this feature (npm run test:slow); the rest are in queue-executor.test.ts.

test.serial(
  'a duplicate with a different record is reported as a determinism fault naming both workers, and dropped',
  async (t) => {
    const redis = await server(t);
    // Episode 0 takes ~3 s and ends with a nondeterministic tool; episode 1 three times as long, so the
    // run is still open when the second play of episode 0 ends (unless the two plays start 6 s apart).
    const scripts = [
      [call('hang'), call('random'), '<answer>ok</answer>'],
      [call('hang'), call('hang'), call('hang'), call('random'), '<answer>ok</answer>'],
    ];
    const scenario = await load(FAULTY, { scripts: JSON.stringify(scripts), hangMs: '3000' });
    const policy = await scenario.policies.script!({ scenario, seed: 0 });
    const faults: string[] = [];
    const executor = new QueueExecutor({
      url: redis.url,
      chunkSize: 2,
      scenarioSource: FAULTY,
      checkEveryMs: 500,
      onFault: (f) => faults.push(`${f.index}: ${f.committedBy} vs ${f.duplicateBy}`),
    });
    // Worker a does not renew its lock, as if its event loop were stuck: its job is taken over by b
    // while a is still playing it, and both write their (different) records.
    const [a] = await workers(t, redis.url, ['a'], {
      loadScenario: trusting([FAULTY]),
      concurrency: 1,
      renewLocks: false,
      lockDurationMs: 400,
      stalledIntervalMs: 300,
    });
    try {
      const run = rollout({ scenario, policy, split: 'train', episodes: 2, seed: 1, executor });
      while (a!.status().jobs.length === 0) await new Promise((r) => setTimeout(r, 50));
      await workers(t, redis.url, ['b'], { loadScenario: trusting([FAULTY]), concurrency: 1, stalledIntervalMs: 300 });
      const { records } = await run;
      t.is(records.length, 2);
      t.true(faults.includes('0: a vs b') || faults.includes('0: b vs a'), faults.join('; '));
      t.is(executor.stats.faults[0]!.episodeId, `${records[0]!.task.id}#0`);
      t.true(executor.stats.duplicates >= 1);
      for (const record of records) t.true((await replayRecord(record, scenario)).verified);
    } finally {
      await executor.close();
    }
  },
);
