import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { z } from 'zod';
import { checkScenario, checkScenarioDir, checkScenarioModule, checkTools } from '../../src/app/check-scenario.ts';
import { innerDifference } from '../../src/app/check-determinism.ts';
import { checkScenarioDirInThread } from '../../src/app/check-in-thread.ts';
import { cli } from '../helpers/cli.ts';
import { calculator } from '../../scenarios/calculator/index.ts';
import { createMultihopQaScenario } from '../../scenarios/multihop-qa/index.ts';
import { builtinScenarios } from '../../scenarios/index.ts';
import { loadScenario } from '../../src/scenario/load.ts';

const BROKEN = 'test/fixtures/broken-scenario';

test('scenario check names every defect of the broken fixture', async (t) => {
  const { problems, checked } = await checkScenarioDir(BROKEN, { episodeTimeoutMs: 300 });
  const found = problems.map((p) => `${p.where} ${p.kind}`);
  const expected = [
    'version bad_field',
    'description missing_export',
    'tools[1] (schedule) tool_schema',
    'tools[2] (search) tool_schema',
    'tools[3] (lookup) tool_schema',
    'tools[4] (shout) tool_schema',
    'tools[5] (echo) tool',
    'tools[6] (bad name) tool',
    'worldMachine world_machine',
    'policies.stuck policy',
    'policies.crash policy',
    'policies.empty policy',
  ];
  for (const e of expected) t.true(found.includes(e), `missing: ${e}\nfound: ${found.join('\n')}`);
  t.is(problems.filter((p) => p.where === 'tools[6] (bad name)').length, 3, 'name, description and execute');
  const message = (where: string) => problems.find((p) => p.where === where)!.message;
  t.regex(message('tools[1] (schedule)'), /Date cannot be represented/);
  t.regex(message('tools[2] (search)'), /minLength must be >= 0/);
  t.regex(message('tools[4] (shout)'), /must describe an object/);
  t.regex(message('worldMachine'), /the door is missing/);
  t.regex(message('policies.stuck'), /did not finish an episode .* within 300 ms/);
  t.regex(message('policies.crash'), /ended in an error .*model server unreachable/);
  t.false(
    found.some((f) => f.startsWith('policies.expert')),
    'the working policy is not a problem',
  );
  t.true(checked.some((c) => c.startsWith('policies.expert: finished')));
});

test('a fixed split whose taskCount disagrees with tasks() is a problem; multihop-qa agrees', async (t) => {
  const qa = createMultihopQaScenario({ size: 'tiny', seed: '3' });
  t.deepEqual(
    (await checkScenario(qa, { determinism: false })).problems.filter((p) => p.where.startsWith('taskCount')),
    [],
  );
  const lying = { ...calculator, taskCount: () => 5 };
  const found = (await checkScenario(lying)).problems.filter((p) => p.where.startsWith('taskCount'));
  t.deepEqual(
    found.map((p) => p.where),
    ['taskCount(train)', 'taskCount(dev)', 'taskCount(test)'],
  );
  t.regex(found[0]!.message, /taskCount says 5 tasks, tasks\(\) gives 6/);
});

test('loading problems: no folder, no index.ts, no default export, a throwing factory, not an object', async (t) => {
  t.regex((await checkScenarioDir('test/fixtures/nope')).problems[0]!.message, /is not a folder/);
  t.regex((await checkScenarioDir('test/fixtures')).problems[0]!.message, /has no index.ts/);
  t.like((await checkScenarioModule({})).problems[0], { kind: 'missing_export', where: 'default' });
  const threw = await checkScenarioModule({
    default: () => {
      throw new Error('no data file');
    },
  });
  t.regex(threw.problems[0]!.message, /the scenario function threw: no data file/);
  t.regex((await checkScenarioModule({ default: 42 })).problems[0]!.message, /not a scenario object/);
});

test('an empty object lists every missing field at once', async (t) => {
  const { problems } = await checkScenario({} as never);
  const missing = problems.filter((p) => p.kind === 'missing_export').map((p) => p.where);
  t.deepEqual(missing, ['id', 'version', 'description', 'splits', 'options', 'tasks', 'tools', 'env', 'policies']);
});

test("a summarizer is run over the reference policies' episodes: one that throws or is not a fold is named", async (t) => {
  const check = async (summarizer: unknown, extra: object = {}) =>
    (await checkScenario({ ...calculator, summarizer, ...extra } as never, { determinism: false })).problems;
  const throwing = () => ({
    add: () => {},
    result: () => {
      throw new Error('no metric here');
    },
  });
  t.deepEqual(await check(throwing), [
    { kind: 'summarizer', where: 'summarizer', message: 'the summarizer threw: no metric here' },
  ]);
  t.regex(
    (await check(() => (records: unknown[]) => records.length))[0]!.message,
    /must return \{ add\(record\), result\(\) \}/,
  );
  t.regex((await check(() => ({ add() {}, result: () => 3 })))[0]!.message, /result\(\) must be an object of metrics/);
  t.deepEqual(await check(() => ({ add() {}, result: () => ({ n: 1 }) })), []);
  // A digest is taken as a worker thread takes it: its result must cross threads.
  const sums = () => {
    let turns = 0;
    return {
      digest: (r: { turns: unknown[] }) => r.turns.length,
      add: (n: number) => (turns += n),
      result: () => ({ turns }),
    };
  };
  t.deepEqual(await check(sums), []);
  t.regex((await check(() => ({ ...sums(), digest: 3 })))[0]!.message, /digest must be a function/);
  t.regex(
    (await check(() => ({ ...sums(), digest: () => ({ later: () => 0 }) })))[0]!.message,
    /digest must return plain data .* can be sent between threads: .*could not be cloned/,
  );
  // Written for the old contract: told what replaced it.
  const old = await check(undefined, { summarize: () => ({}) });
  t.like(old[0], { kind: 'bad_field', where: 'summarize' });
  t.regex(old[0]!.message, /replaced by "summarizer\(\)"/);
});

test('checkTools accepts good tools and rejects non-tools', (t) => {
  const good = {
    name: 'add',
    description: 'Add.',
    parameters: z.object({ a: z.number(), b: z.number() }),
    execute: () => 0,
  };
  t.deepEqual(checkTools([good]), []);
  t.regex(checkTools([null])[0]!.message, /must be an object/);
  t.regex(
    checkTools([{ ...good, parameters: z.object({ f: z.custom(() => true) }) }])[0]!.message,
    /Custom types cannot be represented/,
  );
});

test.serial('agent-r1 scenario check exits 2 and prints each problem; 0 on a good scenario', (t) => {
  const bad = cli(['scenario', 'check', BROKEN, '--timeout', '300']);
  t.is(bad.code, 2, bad.stderr);
  t.regex(bad.stdout, /14 problems/);
  t.regex(bad.stdout, /✗ policies\.stuck \[policy\]/);
  const good = cli(['scenario', 'check', 'scenarios/support-desk', '--json']);
  t.is(good.code, 0, good.stderr);
  t.like(good.lastJson(), { ok: true, problems: [] });
  const usage = cli(['scenario', 'check']);
  t.is(usage.code, 2);
  t.regex(usage.stderr, /missing required argument 'dir'/);
});

// The determinism checks: each flaw is named where it is, with its likely cause, and the CLI exits 2.
const FLAWED = 'test/fixtures/flawed';

test('state kept across episodes is named, and a sound scenario says what it played and replayed', async (t) => {
  const shared = await checkScenarioDir(`${FLAWED}/shared-state`);
  t.is(shared.problems.length, 1);
  t.like(shared.problems[0], { where: 'policies.expert', kind: 'nondeterminism' });
  t.regex(shared.problems[0]!.message, /field results\[0\]\.data\.call differs .*state kept across episodes/);
  const minimal = await checkScenarioDir('scenarios/templates/minimal');
  t.deepEqual([minimal.problems, minimal.warnings], [[], []]);
  t.true(
    minimal.checked.includes(
      'policies.expert: 6 episodes played here and in a fresh worker thread: identical bytes; replayed (recorded tool results, live tools): verified; success 6/6',
    ),
    minimal.checked.join('\n'),
  );
});

test('the user-sim template (a conversation with a scripted user) checks clean: both sides replay, in a worker thread too', async (t) => {
  const userSim = await checkScenarioDir('scenarios/templates/user-sim');
  t.deepEqual([userSim.problems, userSim.warnings], [[], []]);
  t.true(
    userSim.checked.some((c) =>
      /^policies\.expert: \d+ episodes played here and in a fresh worker thread: identical bytes; replayed .*verified; success (\d+)\/\1$/.test(
        c,
      ),
    ),
    userSim.checked.join('\n'),
  );
});

test('checkScenario on an object (no folder) plays the second run in this thread', async (t) => {
  const { problems, warnings, checked } = await checkScenario(calculator, { episodesPerSplit: 1 });
  t.deepEqual([problems, warnings], [[], []]);
  // One per split asked, but enough to meet its four kinds of problem: 16 + 13 + 5.
  t.true(checked.some((c) => /^policies\.random: 34 episodes played twice in this thread: identical bytes/.test(c)));
  t.true(
    checked.includes(
      "task types: every one among a split's first 64 tasks is played: train 16 (add-sub, divide, mixed, multiply); dev 13 (add-sub, divide, mixed, multiply); test 5 (add-sub, divide, mixed, multiply)",
    ),
  );
});

test('innerDifference names the path of the first differing leaf', (t) => {
  t.deepEqual(innerDifference([{ a: 1, b: { c: [1, 2] } }], [{ a: 1, b: { c: [1, 3] } }]), {
    path: '[0].b.c[1]',
    a: 2,
    b: 3,
  });
  t.deepEqual(innerDifference({ content: 'x', data: { n: 1 } }, { content: 'y', data: { n: 2 } }).path, '.data.n');
  t.deepEqual(innerDifference(1, 2), { path: '', a: 1, b: 2 });
});

test('a scenario whose module loops at import: the check ends with a hang at load', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-busy-load-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'index.mjs'), 'const a = new Int32Array(1);\nwhile (true) Atomics.load(a, 0);\n');
  const result = await checkScenarioDirInThread(dir, { episodeTimeoutMs: 500, setupTimeoutMs: 2000 });
  t.deepEqual(
    result.problems.map((p) => `${p.where} ${p.kind}`),
    ['load hang'],
  );
  t.regex(result.problems[0]!.message, /^importing the scenario module kept its thread busy for over 2000 ms/);
});

test('a scenario with a state card is also checked in the mode that shows it (--context card); one without is not', async (t) => {
  const grid = await loadScenario('gridworld', builtinScenarios, {});
  const { problems, checked } = await checkScenario(grid, { episodesPerSplit: 1 });
  t.deepEqual(problems, []);
  t.true(
    checked.some((c) =>
      /^policies\.expert: .* identical bytes; replayed .*verified.* \(with --context card\)$/.test(c),
    ),
  );
  const named = await checkScenario(grid, { episodesPerSplit: 1, config: { context: 'window:2' } });
  t.false(
    named.checked.some((c) => c.includes('--context card')),
    'a mode named is the one checked',
  );
  const plain = await checkScenario(calculator, { episodesPerSplit: 1 });
  t.false(plain.checked.some((c) => c.includes('--context card')));
});
