import test from 'ava';
import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.ts';

// `agent-r1 start --scenario S --quick` for every task family but the main job (which
// start.slow.test.ts runs): demonstrations → warm start → GRPO → greedy evaluation → the table and
// its JSON line, end to end on a tiny budget.
for (const family of ['calculator', 'gridworld', 'support-desk', 'helpdesk']) {
  test.serial(`start --scenario ${family} --quick runs the whole pipeline and prints the table`, async (t) => {
    t.timeout(10 * 60_000);
    const out = join(await mkdtemp(join(tmpdir(), `start-${family}-`)), 'run');
    const r = cli(['start', '--scenario', family, '--quick', '--out', out, '--json'], { timeout: 10 * 60_000 });
    t.is(r.code, 0, r.stderr.slice(-2000));
    t.log(r.stdout);
    for (const method of ['Expert \\(scripted, the ceiling\\)', 'Noisy expert', 'Base Tool Call', 'GRPO'])
      t.regex(r.stdout, new RegExp(`^${method}`, 'm'));
    t.regex(r.stdout, /^method\s+test success/m);
    const table = r.lastJson() as { methods: { method: string; test: { successRate: number } }[] };
    const grpo = table.methods.find((m) => m.method === 'GRPO')!;
    t.true(grpo.test.successRate >= 0 && grpo.test.successRate <= 100);
    t.is(table.methods.find((m) => m.method.startsWith('Expert'))!.test.successRate >= 50, true);
    t.true(existsSync(join(out, 'grpo', 'final', 'model.json')));
  });
}

test.serial(
  'start --scenario guessing --quick: the two-role game gives the one-role and the co-trained rows',
  async (t) => {
    t.timeout(10 * 60_000);
    const out = join(await mkdtemp(join(tmpdir(), 'start-guessing-')), 'run');
    const r = cli(['start', '--scenario', 'guessing', '--quick', '--out', out, '--json'], { timeout: 10 * 60_000 });
    t.is(r.code, 0, r.stderr.slice(-2000));
    t.log(r.stdout);
    const table = r.lastJson() as { methods: { method: string }[] };
    t.deepEqual(
      table.methods.map((m) => m.method),
      [
        'Expert (scripted, the ceiling)',
        'Expert, noisy describer (the demonstrations)',
        'Base Tool Call',
        'GRPO (agent; the user fixed)',
        'GRPO co-trained (agent + user)',
      ],
    );
    for (const dir of [
      ['warm-start', 'user'],
      ['grpo', 'final'],
      ['grpo-co-trained', 'final', 'user'],
    ])
      t.true(existsSync(join(out, ...dir, 'model.json')), dir.join('/'));
    t.false(existsSync(join(out, 'grpo', 'final', 'user')), 'the one-role run trains no user');
    t.regex(r.stdout, /^co-trained training reward per step: /m);
  },
);
