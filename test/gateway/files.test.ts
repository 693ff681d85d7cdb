import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { loadAgent } from '../../src/gateway/agent-module.ts';
import { RecordFile } from '../../src/gateway/record-file.ts';
import { readTasksFile } from '../../src/gateway/tasks-file.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { calc } from '../openai/fixtures.ts';

// What a user hands the gateway's commands: tasks files, agent modules, a records folder. Each bad
// one is refused with the file, the line where there is one, and what is wrong.

const tmp = mkdtempSync(join(tmpdir(), 'agent-r1-gateway-files-'));
const write = (name: string, text: string) => {
  const file = join(tmp, name);
  writeFileSync(file, text);
  return file;
};

test('a tasks file: each bad line is named with what is wrong; a good one gives its tasks, split train unless given', async (t) => {
  const good = write(
    'good.jsonl',
    '{"id":"a","question":"q"}\n\n{"id":"b","question":"r","split":"test","meta":{"x":[1]}}\n',
  );
  t.deepEqual(
    (await readTasksFile(good)).map((x) => [x.id, x.split]),
    [
      ['a', 'train'],
      ['b', 'test'],
    ],
  );
  const cases: [string, RegExp][] = [
    ['{"id":"a","question":"q"}\n{"id":', /bad\.jsonl:2: not valid JSON/],
    ['[1]\n', /bad\.jsonl:1: not a task: /],
    ['{"id":"a","question":"q","answr":"typo"}\n', /bad\.jsonl:1: not a task: .*answr/s],
    [
      `{"id":"a","question":"q","meta":{"x":${'['.repeat(70)}${']'.repeat(70)}}}\n`,
      /bad\.jsonl:1: nests deeper than 64 levels/,
    ],
    ['\n\n', /bad\.jsonl: holds no tasks/],
  ];
  for (const [text, message] of cases) await t.throwsAsync(readTasksFile(write('bad.jsonl', text)), { message });
  await t.throwsAsync(readTasksFile(join(tmp, 'missing.jsonl')), {
    message: /missing\.jsonl: cannot be read \(ENOENT\)/,
  });
});

test('an agent module: a folder without an index, a module that throws at import, exports that are not functions', async (t) => {
  mkdirSync(join(tmp, 'empty'));
  await t.throwsAsync(loadAgent(join(tmp, 'empty')), {
    message: /empty: the folder has no index\.ts \(or index\.js\)/,
  });
  await t.throwsAsync(loadAgent(write('throws.mjs', "throw new Error('no key set');\n")), {
    message: /throws\.mjs: could not be loaded: no key set/,
  });
  await t.throwsAsync(
    loadAgent(write('demo.mjs', 'export default async () => ({ reward: 1 });\nexport const demonstrator = 3;\n')),
    {
      message: /demo\.mjs: its `demonstrator` export is not a function/,
    },
  );
  const ok = await loadAgent(write('ok.mjs', 'export default async () => ({ reward: 1 });\n'));
  t.is(ok.version.length, 16);
  t.is(ok.demonstrator, undefined);
});

test('a records folder whose file ends in a cut line is refused; a whole one is continued after its records', async (t) => {
  const dir = join(tmp, 'served');
  const first = await RecordFile.open(dir);
  t.is(first.existing, 0);
  const { records } = await rollout({
    scenario: calc,
    policy: await calc.policies.expert!({ scenario: calc, seed: 0 }),
    split: 'train',
    episodes: 2,
    seed: 1,
  });
  for (const r of records) await first.append(r);
  t.is((await RecordFile.open(dir)).existing, 2);
  writeFileSync(first.path, readFileSync(first.path, 'utf8') + '{"cut');
  await t.throwsAsync(RecordFile.open(dir), {
    message: /episodes\.jsonl ends in a partial line \(a write was cut off\)/,
  });
});
