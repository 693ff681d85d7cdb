import test from 'ava';
import { checkScenarioDir } from '../../src/app/check-scenario.ts';
import { checkScenarioDirInThread } from '../../src/app/check-in-thread.ts';
import { cli } from '../helpers/cli.ts';

const FLAWED = 'test/fixtures/flawed';

// Slower checks of this feature (npm run test:slow); the rest are in check-scenario.test.ts.

test.serial(
  'a tool that never yields: scenario check stops that policy at its deadline (a hang problem), checks the rest, exits 2',
  async (t) => {
    const started = performance.now();
    // 3 s an episode: the lazy policy's episodes, played again in a fresh worker thread (which loads
    // the folder), finish well within theirs even on a loaded machine.
    const result = await checkScenarioDirInThread(`${FLAWED}/busy-tool`, { episodeTimeoutMs: 3000 });
    t.deepEqual(
      result.problems.map((p) => `${p.where} ${p.kind}`),
      ['policies.expert hang'],
    );
    t.regex(
      result.problems[0]!.message,
      /^an episode of policies\.expert kept its thread busy for over 3000 ms without yielding: scenario code that never returns/,
    );
    t.true(result.checked.includes('policies.lazy: finished (answered) in 1 turns, success false'));
    t.true(result.checked.some((c) => /^policies\.lazy: 4 episodes played .*identical bytes/.test(c)));
    t.true((performance.now() - started) / 1000 < 30);
    const printed = cli(['scenario', 'check', `${FLAWED}/busy-tool`, '--timeout', '3000'], { timeout: 90_000 });
    t.is(printed.code, 2, printed.stderr);
    t.regex(printed.stdout, /^ {2}✗ policies\.expert \[hang\]: an episode of policies\.expert kept its thread busy/m);
  },
);

test.serial(
  'scenario check names Math.random in a tool or in tasks, unsynced effects and a failing expert; exit 2',
  async (t) => {
    const expected: Array<[string, string, string, RegExp]> = [
      [
        'random-tool',
        'problems',
        'policies.expert nondeterminism',
        /turn 1, field results\[0\]\.data\.luck differs.*Math\.random or Date\.now in a tool/,
      ],
      [
        'random-tasks',
        'problems',
        'tasks(train) nondeterminism',
        /task 0's question: "Press the button \d+ times\.", then .*Math\.random or Date\.now in the task source/,
      ],
      [
        'unsynced-effects',
        'problems',
        'policies.expert replay',
        /recorded tool results.*field outcome\.reward differs \(recorded: 1; replayed: 0\).*syncEffects/,
      ],
      [
        'key-order',
        'problems',
        'policies.expert replay',
        /replayed with live tools, .*field results\[0\]\.content differs.*likely cause: a tool's result depends on the order of an object's keys: a record stores objects with their keys sorted/,
      ],
      [
        'failing-expert',
        'warnings',
        'policies.expert expert',
        /succeeded in 0 of 4 of its own episodes \(0%\).*ended answered/,
      ],
    ];
    for (const [fixture, list, named, message] of expected) {
      const result = await checkScenarioDir(`${FLAWED}/${fixture}`);
      const found = (list === 'problems' ? result.problems : result.warnings).map((p) => ({
        ...p,
        named: `${p.where} ${p.kind}`,
      }));
      const hit = found.find((p) => p.named === named);
      t.truthy(hit, `${fixture}: ${named} not in ${JSON.stringify(found)}`);
      t.regex(hit?.message ?? '', message, fixture);
    }
    // The CLI: a warning fails the check (exit 2) unless --expert-success allows it.
    const json = cli(['scenario', 'check', `${FLAWED}/random-tool`, '--json']);
    t.is(json.code, 2, json.stderr);
    t.false((json.lastJson() as { ok: boolean }).ok);
    // What failed is a ✗ line, never a ✓ one.
    const ticks = cli(['scenario', 'check', `${FLAWED}/random-tool`]).stdout.split('\n');
    t.true(ticks.some((l) => l.startsWith('  ✗ policies.expert [nondeterminism]')));
    t.deepEqual(
      ticks.filter((l) => l.startsWith('  ✓') && /policies\.expert: \d+ episodes|differ|diverged/.test(l)),
      [],
    );
    const human = cli(['scenario', 'check', `${FLAWED}/failing-expert`]);
    t.is(human.code, 2);
    t.regex(human.stdout, /1 warning\n {2}⚠ policies\.expert \[expert\]/);
    t.is(cli(['scenario', 'check', `${FLAWED}/failing-expert`, '--expert-success', '0']).code, 0);
  },
);

test('the built-in scenarios and the world-machine template pass the check', async (t) => {
  for (const dir of ['scenarios/support-desk', 'scenarios/gridworld', 'scenarios/templates/world-machine']) {
    const { problems, checked } = await checkScenarioDir(dir);
    t.deepEqual(problems, [], dir);
    t.true(
      checked.some((c) => c.startsWith('worldMachine: starts')),
      dir,
    );
    t.true(
      checked.some((c) => c.startsWith('policies.expert: finished')),
      dir,
    );
  }
});
