import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { createRng, type EpisodeRecord } from 'agent-r1-ts';
import { filesScenario, filesEnv } from '../../scenarios/files/index.ts';
import { expert } from '../../scenarios/files/policies.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { replayRecord } from '../../src/replay/replay.ts';

const scratch = mkdtempSync(join(tmpdir(), 'agent-r1-files-'));
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));

test('the expert does every kind of task; replay feeds the results back and starts no server', async (t) => {
  const live = await filesScenario();
  const { records } = await rollout({ scenario: live.scenario, policy: expert, split: 'train', episodes: 9, seed: 0 });
  t.deepEqual([...new Set(records.map((r) => r.task.type!))].sort(), ['append', 'find-move', 'rename']);
  t.true(records.every((r) => r.outcome.success && r.status === 'ok'));
  t.regex(
    records[0]!.scenario.version,
    /^1\+secure-filesystem-server@0\.2\.0\+npm@\d+\.\d+\.\d+$/,
    "the server's name and version, and its package's",
  );
  t.true(live.server.started > 0);
  await live.server.close();

  const again = await filesScenario();
  for (const record of records) t.true((await replayRecord(record, again.scenario)).verified, record.episodeId);
  t.is(again.server.started, 0, 'no server was started to replay');
  t.false(JSON.stringify(records).includes(tmpdir()), 'no scratch path in a record');
});

test('a server that dies mid-episode ends that episode with error observations; the other episodes and the run go on', async (t) => {
  const { scenario, server } = await filesScenario('episode');
  const env = filesEnv(server);
  const dying = {
    ...scenario,
    env: {
      ...env,
      step: (input: Parameters<typeof env.step>[0]) => {
        // The first episode's server is killed after its first turn.
        if (input.task.id.endsWith('-0') && input.turn === 0) input.state.mcp.connection!.kill('SIGKILL');
        return env.step(input);
      },
    },
  };
  const { records } = await rollout({ scenario: dying, policy: expert, split: 'train', episodes: 3, seed: 3 });
  t.is(records.length, 3);
  const [killed, ...others] = records as [EpisodeRecord, ...EpisodeRecord[]];
  t.false(killed.outcome.success);
  const gone = killed.turns.slice(1).flatMap((turn) => turn.results);
  t.true(gone.length > 0 && gone.every((r) => !r.ok && /the MCP server server-filesystem is gone/.test(r.content)));
  t.true(others.every((r) => r.outcome.success));
  await server.close();
  t.is(server.openConnections, 0);
});

test('roots: a warm server moved to the next episode folder refuses the old one', async (t) => {
  const { scenario, server } = await filesScenario('roots', { maxServers: 1, spares: 0 });
  const [task] = await scenario.tasks({ split: 'train', seed: 0, count: 1 });
  const rng = createRng(0);
  const first = await scenario.env.init!(task!, { rng, tools: 'live' });
  const oldFolder = first.mcp.scratch!;
  const pid = first.mcp.connection!.pid;
  await scenario.env.dispose!(first);
  const second = await scenario.env.init!(task!, { rng, tools: 'live' });
  try {
    t.is(second.mcp.connection!.pid, pid, 'the same process');
    const raw = await second.mcp.connection!.call('list_allowed_directories', {}, { timeoutMs: 5000 });
    const text = (raw.content[0] as { text: string }).text;
    t.true(text.includes(second.mcp.scratch!));
    t.false(text.includes(oldFolder));
    const old = await second.mcp.connection!.call(
      'read_text_file',
      { path: `${oldFolder}/archive/readme.txt` },
      { timeoutMs: 5000 },
    );
    t.true(old.isError);
  } finally {
    await scenario.env.dispose!(second);
    await server.close();
  }
});
