import { spawn, type ChildProcess } from 'node:child_process';
import test from 'ava';
import { replayRecord, rollout, serializeRecord } from 'agent-r1-ts';
import { loadScenarioFolder } from '../../src/scenario/load.ts';
import { repoRoot } from '../helpers/cli.ts';

// Per-episode MCP servers under load (issue 56, item 2): the mcp template's scenario (server-memory,
// a spare server and a data file per episode) played with twice the cores' worth of episodes at
// once, beside two processes that keep both cores busy, twice: the records are the same bytes, and
// each replays with its tools run again for real.

function busy(): ChildProcess {
  return spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
}

test('per-episode MCP servers under load: 4 episodes at once on 2 busy cores, twice, give the same records, and each replays live', async (t) => {
  t.timeout(600_000);
  const scenario = await loadScenarioFolder(`${repoRoot}/scenarios/templates/mcp`);
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const neighbours = [busy(), busy()];
  try {
    const play = () =>
      rollout({ scenario, policy, split: 'train', episodes: 32, seed: 11, concurrency: 4 }).then((r) => r.records);
    const first = await play();
    const second = await play();
    t.is(first.length, 32);
    t.true(
      first.every((r) => r.status === 'ok'),
      first.find((r) => r.status !== 'ok')?.error,
    );
    t.deepEqual(second.map(serializeRecord), first.map(serializeRecord));
    for (const record of first) {
      const replayed = await replayRecord(record, scenario, { liveTools: true });
      t.true(replayed.verified, JSON.stringify(replayed.divergence));
    }
  } finally {
    for (const n of neighbours) n.kill('SIGKILL');
  }
});
