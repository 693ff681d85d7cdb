import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { createRng, type EpisodeRecord } from 'agent-r1-ts';
import { filesScenario, filesEnv } from '../../scenarios/files/index.ts';
import { expert } from '../../scenarios/files/policies.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { checkScenarioDir } from '../../src/app/check-scenario.ts';
import { cli, cliArgs, repoRoot } from '../helpers/cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'agent-r1-files-'));
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));

test('the expert does every kind of task; replay feeds the results back and starts no server', async (t) => {
  const live = await filesScenario();
  const { records } = await rollout({ scenario: live.scenario, policy: expert, split: 'train', episodes: 9, seed: 0 });
  t.deepEqual([...new Set(records.map((r) => r.task.type!))].sort(), ['append', 'find-move', 'rename']);
  t.true(records.every((r) => r.outcome.success && r.status === 'ok'));
  t.is(records[0]!.scenario.version, '1+secure-filesystem-server@0.2.0', "the server's name and version");
  t.true(live.server.started > 0);
  await live.server.close();

  const again = await filesScenario();
  for (const record of records) t.true((await replayRecord(record, again.scenario)).verified, record.episodeId);
  t.is(again.server.started, 0, 'no server was started to replay');
  t.false(JSON.stringify(records).includes(tmpdir()), 'no scratch path in a record');
});

test('isolation modes give the same records: a server per episode, spare ones, warm ones moved by roots', async (t) => {
  const bytes = new Set<string>();
  for (const isolation of ['episode', 'spare', 'roots'] as const) {
    const { scenario, server } = await filesScenario(isolation, { maxServers: 2, spares: 1 });
    const { records } = await rollout({ scenario, policy: expert, split: 'dev', episodes: 4, seed: 1 });
    bytes.add(JSON.stringify(records));
    t.true(
      records.every((r) => r.outcome.success),
      isolation,
    );
    await server.close();
    t.is(server.openConnections, 0, `${isolation}: every server ended`);
  }
  t.is(bytes.size, 1);
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

test.serial('CLI: rollout of 20, replay with no server verifies all 20; --workers 2 gives the same bytes', (t) => {
  const runs = ['0', '2'].map((workers) => {
    const out = join(scratch, `w${workers}`);
    const r = cli([
      'rollout',
      '--scenario',
      'files',
      '--policy',
      'expert',
      '--episodes',
      '20',
      '--workers',
      workers,
      '--out',
      out,
    ]);
    t.is(r.code, 0, r.stderr);
    return readFileSync(join(out, 'episodes.jsonl'), 'utf8');
  });
  t.is(runs[0], runs[1]);
  const replay = cli(['replay', join(scratch, 'w2', 'episodes.jsonl'), '--json']);
  t.is(replay.code, 0, replay.stderr);
  t.like(replay.lastJson(), { episodes: 20, verified: 20, diverged: 0, corrupt: 0 });
});

test.serial('CLI: replay --live-tools re-runs the calls and reports drift at the first call that differs', (t) => {
  const source = join(scratch, 'source');
  const out = join(scratch, 'drift');
  const fixture = new URL('../fixtures/mcp/drift', import.meta.url).pathname;
  rmSync(source, { recursive: true, force: true });
  mkdirSync(source, { recursive: true });
  writeFileSync(join(source, 'notes.txt'), 'buy milk\n');
  const run = cli([
    'rollout',
    '--scenario',
    fixture,
    '--option',
    `source=${source}`,
    '--policy',
    'reader',
    '--episodes',
    '2',
    '--out',
    out,
  ]);
  t.is(run.code, 0, run.stderr);
  const file = join(out, 'episodes.jsonl');
  const same = cli(['replay', file, '--live-tools', '--json']);
  t.like(same.lastJson(), { episodes: 2, verified: 2 }, same.stderr);
  writeFileSync(join(source, 'notes.txt'), 'buy eggs\n');
  const drift = cli(['replay', file, '--live-tools', '--quiet']);
  t.is(drift.code, 1);
  t.regex(
    drift.stdout,
    /DIVERGED read-0#0 at turn 0, call 2 \(read_text_file\), field results\n\s+expected: .*buy milk.*\n\s+actual: .*buy eggs/,
  );
  const recorded = cli(['replay', file, '--json']);
  t.like(recorded.lastJson(), { episodes: 2, verified: 2 }, 'the recorded results still verify');
});

/** The processes whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1]!.split(' ')[1] === String(pid);
      } catch {
        return false;
      }
    })
    .map(Number);
}

const alive = (pid: number) =>
  existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');

test.serial('Ctrl-C during a files rollout on 2 workers: exit 130, records kept, no server left running', async (t) => {
  const out = join(scratch, 'sigint');
  const file = join(out, 'episodes.jsonl');
  const child = spawn(
    process.execPath,
    cliArgs([
      'rollout',
      '--scenario',
      'files',
      '--policy',
      'expert',
      '--episodes',
      '5000',
      '--workers',
      '2',
      '--out',
      out,
    ]),
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const lines = () => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0);
  const deadline = Date.now() + 90_000;
  while (lines() < 10 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const servers = childrenOf(child.pid!);
  t.true(servers.length > 0, 'server processes were running');
  child.kill('SIGINT');
  t.is(await exited, 130, stderr);
  t.regex(stderr, /interrupted: \d+ finished episodes written/);
  t.deepEqual(servers.filter(alive), [], 'every server process ended with the CLI');
});

test('scenario check is green for files and for the mcp template: episodes repeat, here and in a worker, and replay', async (t) => {
  for (const dir of ['scenarios/files', 'scenarios/templates/mcp']) {
    const { problems, warnings, checked } = await checkScenarioDir(dir);
    t.deepEqual(problems, [], dir);
    t.deepEqual(warnings, [], dir);
    t.true(
      checked.some((c) =>
        /policies\.expert: 6 episodes played here and in a fresh worker thread: identical bytes; replayed \(recorded tool results, live tools\): verified; success 6\/6/.test(
          c,
        ),
      ),
      `${dir}: ${checked.join('\n')}`,
    );
  }
});
