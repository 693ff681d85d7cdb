import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import test from 'ava';
import type { Task } from '../../src/core/types.ts';
import { cli, cliArgs, repoRoot } from '../helpers/cli.ts';
import { exampleAgentFolder } from '../helpers/example-agent.ts';
import { calc, calculatorCheckpoint } from '../openai/fixtures.ts';
import agent from '../fixtures/agents/openai-loop.ts';
import { serializeRecord } from '../../src/record/record.ts';
import { rollout } from '../../src/rollout/rollout.ts';

/**
 * The gateway end to end through the CLI, with an agent the framework does not know: the official
 * openai client in a plain tool loop (test/fixtures/agents/openai-loop.ts).
 */
const AGENT = join(repoRoot, 'test/fixtures/agents/openai-loop.ts');
const EDITED = join(repoRoot, 'test/fixtures/agents/openai-loop-edited.ts');
const tmp = mkdtempSync(join(tmpdir(), 'agent-r1-gateway-cli-'));
const at = (name: string) => join(tmp, name);

/** Tasks of a seed no other test draws, as a user's tasks.jsonl. */
function writeTasks(): string {
  const tasks = calc.tasks({ split: 'train', seed: 77, count: 6 }) as Task[];
  const file = at('tasks.jsonl');
  writeFileSync(
    file,
    tasks.map((t) => JSON.stringify({ id: t.id, question: t.question, answer: t.answer })).join('\n') + '\n',
  );
  return file;
}

const trainArgs = (ckpt: string, tasks: string, out: string) => [
  'train',
  '--agent',
  AGENT,
  '--tasks',
  tasks,
  '--algo',
  'grpo',
  '--init',
  `ckpt:${ckpt}`,
  '--steps',
  '2',
  '--tasks-per-step',
  '2',
  '--group',
  '4',
  '--minibatch',
  '8',
  '--lr',
  '0.01',
  '--eval-every',
  '0',
  '--train-threads',
  '1',
  '--seed',
  '3',
  '--out',
  out,
  '--json',
];

test.serial(
  'train --agent: 2 GRPO steps of an unmodified openai-client agent; every episode recorded and replay-verified, the weights changed, the records reproducible',
  (t) => {
    return calculatorCheckpoint().then(({ dir }) => {
      const tasks = writeTasks();
      const run = cli(trainArgs(dir, tasks, at('run-a')), { timeout: 180_000 });
      t.is(run.code, 0, run.stderr);
      const result = run.lastJson();
      t.is(result.lastStep.step, 2);
      t.is(result.lastStep.episodes, 8);
      t.is(result.lastStep.failed, 0);
      const lines = readFileSync(at('run-a/episodes.jsonl'), 'utf8').trim().split('\n');
      t.is(lines.length, 16);
      const records = lines.map((l) => JSON.parse(l));
      t.true(records.every((r) => r.scenario.id === 'agent' && r.status === 'ok' && r.turns.length >= 1));
      t.deepEqual(
        records.map((r) => r.index),
        [...Array(16).keys()],
      );
      // The weights moved: the final checkpoint's bytes differ from the initial one's.
      t.notDeepEqual(readFileSync(at('run-a/final/weights.bin')), readFileSync(join(dir, 'weights.bin')));

      // Each record replays: the agent's code re-run against it, and its prompt ids against the template.
      const replayed = cli(['replay', '--agent', AGENT, at('run-a/episodes.jsonl'), '--json']);
      t.is(replayed.code, 0, replayed.stdout + replayed.stderr);
      t.like(replayed.lastJson(), { episodes: 16, verified: 16, diverged: 0, corrupt: 0 });
      const checked = cli(['replay', at('run-a/episodes.jsonl'), '--policy', `ckpt:${dir}`, '--json']);
      t.like(checked.lastJson(), { episodes: 16, verified: 16 });

      // The agent's code changed: the first request that differs is named, field and both values.
      const edited = cli(['replay', '--agent', EDITED, at('run-a/episodes.jsonl'), '--quiet']);
      t.is(edited.code, 1);
      t.regex(edited.stdout, /DIVERGED 0:calc-train-77-\d+#0 at turn 1, field messages\[0\]\.content/);
      t.regex(edited.stdout, /content \(from character \d+\)\n +expected: .*\n +actual: +….*Be brief\./);

      // Exported as training data with the tools the agent offered.
      const exported = cli(['export', at('run-a'), '--format', 'messages', '--out', at('run-a.messages.jsonl')]);
      t.is(exported.code, 0, exported.stderr);
      const rows = readFileSync(at('run-a.messages.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      t.is(rows.length, 16);
      t.is(rows[0].tools[0].function.name, 'calculate');

      // Same seed, config and checkpoint: byte-identical records.
      const again = cli(trainArgs(dir, tasks, at('run-b')), { timeout: 180_000 });
      t.is(again.code, 0, again.stderr);
      t.is(readFileSync(at('run-b/episodes.jsonl'), 'utf8'), lines.join('\n') + '\n');
    });
  },
);

test.serial(
  'serve --record: an agent plays an episode closed by POST /v1/episodes/ID/reward, and its record replays',
  async (t) => {
    const { dir } = await calculatorCheckpoint();
    const child = spawn(
      process.execPath,
      cliArgs(['serve', '--policy', `ckpt:${dir}`, '--port', '0', '--record', at('served'), '--json', '--quiet']),
      { cwd: repoRoot },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', () => reject(new Error(`serve exited: ${stderr}`)));
      });
      const { url, model, records } = JSON.parse(line);
      t.is(records, join(at('served'), 'episodes.jsonl'));
      const task = (calc.tasks({ split: 'test', seed: 0, count: 1 }) as Task[])[0]!;
      const headers = { 'x-agent-r1-episode': 'held-out-1' };
      const result = await agent(task, { baseURL: url, apiKey: 'none', model, headers });
      const posted = await fetch(`${url}/episodes/held-out-1/reward`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(result),
      });
      t.is(posted.status, 200);
      // A second episode is left open: the server's stop writes it as unfinished.
      await agent(task, { baseURL: url, apiKey: 'none', model, headers: { 'x-agent-r1-episode': 'left-open' } });
      child.kill('SIGTERM');
      t.is(await exited, 0);
      t.regex(stderr, /recording episodes to .*episodes\.jsonl/);
      const written = readFileSync(records, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      t.deepEqual(
        written.map((r) => [r.episodeId, r.status, r.index]),
        [
          ['held-out-1', 'ok', 0],
          ['left-open', 'error', 1],
        ],
      );
      t.is(written[0].outcome.reward, result.reward);
      const replayed = cli(['replay', '--agent', AGENT, records, '--episode', 'held-out-1', '--json']);
      t.is(replayed.code, 0, replayed.stdout);
      t.like(replayed.lastJson(), { episodes: 1, verified: 1 });
    } finally {
      child.kill('SIGKILL');
    }
  },
);

test.serial(
  'start --agent --quick: the warm start from the demonstrator, GRPO through the gateway, the table as JSON; the footer counts the test tasks used',
  (t) => {
    // 4 test tasks, fewer than the quick budget's 8: the footer and the records say 4.
    const agent = exampleAgentFolder(at('four-tests'), ['train', 'dev', 'test'], 4);
    const r = cli(['start', '--agent', agent, '--quick', '--out', at('start'), '--json'], {
      timeout: 120_000,
    });
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /; 4 held-out test tasks \(of \d+ in .*tasks\.jsonl: train 1000, dev 64\)/);
    const table = r.lastJson();
    t.deepEqual(
      table.methods.map((m: { method: string }) => m.method),
      ['Base Tool Call', 'GRPO'],
    );
    t.is(typeof table.methods[1].test.successRate, 'number');
    t.regex(r.stdout, /every episode the agent's own code, through the gateway/);
    const records = readFileSync(at('start/test-grpo.jsonl'), 'utf8').trim().split('\n');
    t.is(records.length, 4);
  },
);

test.serial(
  'start --agent: a tasks.jsonl without a train or test split is refused, naming the split and the file',
  (t) => {
    for (const [name, splits, missing] of [
      ['no-test', ['train', 'dev'], 'test'],
      ['no-train', ['dev', 'test'], 'train'],
    ] as const) {
      const agent = exampleAgentFolder(at(name), [...splits]);
      const r = cli(['start', '--agent', agent, '--quick', '--out', at(`start-${name}`)]);
      t.is(r.code, 2, r.stderr);
      t.is(r.stderr.trim().split('\n').length, 1, r.stderr);
      t.true(r.stderr.includes(`${join(agent, 'tasks.jsonl')} has no tasks in the "${missing}" split`), r.stderr);
      t.false(existsSync(at(`start-${name}`)), 'nothing written');
    }
  },
);

test.serial('start --help names the splits start --agent needs', (t) => {
  const r = cli(['start', '--help']);
  t.is(r.code, 0);
  t.regex(r.stdout.replace(/\s+/g, ' '), /"split": "train" tasks .* "test" tasks .* "dev" tasks, if any/);
});

test.serial('train --agent and replay --agent refuse what they cannot use, naming it', async (t) => {
  const tasks = writeTasks();
  const both = cli(['train', '--agent', AGENT, '--scenario', 'calculator', '--algo', 'grpo', '--out', at('x')]);
  t.is(both.code, 2);
  t.regex(both.stderr, /give --scenario NAME or --agent FILE \(one of them\)/);
  const noTasks = cli(['train', '--agent', AGENT, '--algo', 'grpo', '--out', at('y')]);
  t.is(noTasks.code, 2);
  t.regex(noTasks.stderr, /--tasks FILE\.jsonl/);
  const foreign = cli([
    'train',
    '--agent',
    AGENT,
    '--tasks',
    tasks,
    '--option',
    'a=b',
    '--algo',
    'grpo',
    '--out',
    at('z'),
  ]);
  t.is(foreign.code, 2);
  t.regex(foreign.stderr, /--option: not with --agent/);
  const noDemo = cli(['train', '--agent', AGENT, '--tasks', tasks, '--algo', 'grpo', '--out', at('w')]);
  t.is(noDemo.code, 2);
  t.regex(noDemo.stderr, /exports no demonstrator to warm-start from: start from a model \(--init/);
  const bad = at('bad-tasks.jsonl');
  writeFileSync(bad, '{"id":"a","question":"q"}\n{"id":"a","question":"again"}\n');
  const dup = cli(['train', '--agent', AGENT, '--tasks', bad, '--algo', 'grpo', '--out', at('v')]);
  t.regex(dup.stderr, /bad-tasks\.jsonl:2: task id "a" is used twice/);
  writeFileSync(bad, '{"id":"a","question":"q"}\n{"id":"b"}\n');
  const missing = cli(['train', '--agent', AGENT, '--tasks', bad, '--algo', 'grpo', '--out', at('u')]);
  t.regex(missing.stderr, /bad-tasks\.jsonl:2: not a task: .*question/s);
  const notAgent = cli([
    'train',
    '--agent',
    join(repoRoot, 'test/fixtures/agents/not-an-agent.ts'),
    '--tasks',
    tasks,
    '--algo',
    'grpo',
    '--out',
    at('s'),
  ]);
  t.not(notAgent.code, 0);
  t.regex(notAgent.stderr, /its default export is not a function/);
  // A scenario's records are not an agent's: each says so, none is run against the agent.
  const { records } = await rollout({
    scenario: calc,
    policy: await calc.policies.expert!({ scenario: calc, seed: 0 }),
    split: 'train',
    episodes: 2,
    seed: 1,
  });
  writeFileSync(at('calc.jsonl'), records.map(serializeRecord).join('\n') + '\n');
  const foreignRecords = cli(['replay', '--agent', AGENT, at('calc.jsonl'), '--quiet']);
  t.is(foreignRecords.code, 1);
  t.regex(
    foreignRecords.stdout,
    /DIVERGED calc-train-\S+ at episode, field scenario\.id\n +expected: "agent"\n +actual: +"calculator"/,
  );
  const gone = cli(['replay', '--agent', at('nope.ts'), tasks]);
  t.regex(gone.stderr, /agent .*nope\.ts: no such file or folder/);
});
