import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { Task } from '../../src/core/types.ts';
import { cli, repoRoot } from '../helpers/cli.ts';
import { calc, calculatorCheckpoint } from '../openai/fixtures.ts';

// Every algorithm trains an agent through the gateway as it trains a scenario's policy.
const AGENT = join(repoRoot, 'test/fixtures/agents/openai-loop.ts');

for (const algo of ['ppo', 'reinforce++', 'rloo'] as const) {
  test.serial(`train --agent --algo ${algo}: the agent's episodes train the model and replay`, async (t) => {
    t.timeout(240_000);
    const { dir } = await calculatorCheckpoint();
    const tmp = mkdtempSync(join(tmpdir(), 'agent-r1-agent-algos-'));
    const tasks = join(tmp, 'tasks.jsonl');
    const list = calc.tasks({ split: 'train', seed: 78, count: 4 }) as Task[];
    writeFileSync(
      tasks,
      list.map((x) => JSON.stringify({ id: x.id, question: x.question, answer: x.answer })).join('\n'),
    );
    const out = join(tmp, 'run');
    const run = cli(
      [
        ...['train', '--agent', AGENT, '--tasks', tasks, '--algo', algo, '--init', `ckpt:${dir}`],
        ...['--steps', '2', '--tasks-per-step', '2', '--group', '4', '--minibatch', '8', '--lr', '0.01'],
        ...['--eval-every', '0', '--train-threads', '1', '--out', out, '--json'],
      ],
      { timeout: 200_000 },
    );
    t.is(run.code, 0, run.stderr);
    t.is(run.lastJson().lastStep.step, 2);
    t.notDeepEqual(readFileSync(join(out, 'final/weights.bin')), readFileSync(join(dir, 'weights.bin')));
    const replayed = cli(['replay', '--agent', AGENT, join(out, 'episodes.jsonl'), '--json']);
    t.like(replayed.lastJson(), { episodes: 16, verified: 16 });
  });
}
