import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { QueueExecutor } from '../../src/queue/queue-executor.ts';
import { serializeRecord } from '../../src/record/record.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { workerThreads } from '../../src/rollout/worker-threads.ts';
import { load, server, trusting, workers } from '../helpers/queue.ts';

// Slow: worker threads crash and restart three times over, locally and on the queue.

const FAULTY = fileURLToPath(new URL('../fixtures/faulty', import.meta.url));
const bytes = (records: EpisodeRecord[]) => records.map(serializeRecord).join('\n');
const call = (name: string, args: object = {}) => `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;

test('an episode that kills its worker thread on every attempt is an error record, as in a local run', async (t) => {
  const redis = await server(t);
  const scripts = [
    [call('echo', { text: 'x' }), '<answer>ok</answer>'],
    [call('exit', { marker: 'a', always: true })],
    ['<answer>ok</answer>'],
  ];
  const options = { markers: mkdtempSync(join(tmpdir(), 'agent-r1-markers-')), scripts: JSON.stringify(scripts) };
  const scenario = await load(FAULTY, options);
  const policy = await scenario.policies.script!({ scenario, seed: 0 });
  const plan = { scenario, policy, split: 'train', episodes: 6, seed: 3 };
  const pool = workerThreads({ workers: 1, scenarioSource: FAULTY });
  const local = await rollout({ ...plan, executor: pool });
  await pool.close();
  t.is(local.records.filter((r) => r.status === 'error').length, 2);
  await workers(t, redis.url, ['w'], { threads: 1, loadScenario: trusting([FAULTY]) });
  const executor = new QueueExecutor({ url: redis.url, chunkSize: 3, scenarioSource: FAULTY });
  try {
    const queued = await rollout({ ...plan, executor });
    t.is(bytes(queued.records), bytes(local.records));
  } finally {
    await executor.close();
  }
});
