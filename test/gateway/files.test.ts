import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { loadAgent } from '../../src/gateway/agent-module.ts';
import { NotARecordFileError, RecordFile } from '../../src/gateway/record-file.ts';
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

test('a records file that is a link (at open, or put in place after) is refused, and the file it points to is unchanged', async (t) => {
  const { records } = await rollout({
    scenario: calc,
    policy: await calc.policies.expert!({ scenario: calc, seed: 0 }),
    split: 'train',
    episodes: 2,
    seed: 2,
  });
  const outside = write('outside.jsonl', 'not yours\n');
  const linked = join(tmp, 'linked');
  mkdirSync(linked);
  symlinkSync(outside, join(linked, 'episodes.jsonl'));
  await t.throwsAsync(RecordFile.open(linked), {
    instanceOf: NotARecordFileError,
    message:
      /linked\/episodes\.jsonl is a symbolic link, not a regular file: records are written only to a regular file/,
  });
  // Opened as a file, then swapped for a link: the next record is refused, not written through it.
  const swapped = join(tmp, 'swapped');
  const file = await RecordFile.open(swapped);
  await file.append(records[0]!);
  rmSync(file.path);
  symlinkSync(outside, file.path);
  await t.throwsAsync(file.append(records[1]!), { instanceOf: NotARecordFileError, message: /is a symbolic link/ });
  t.is(readFileSync(outside, 'utf8'), 'not yours\n');
  // Put back as a file, the records go on being written (a failed one does not stop the queue).
  rmSync(file.path);
  await file.append(records[1]!);
  t.is(readFileSync(file.path, 'utf8').split('\n').length, 2);
  const fifo = join(tmp, 'fifo');
  mkdirSync(fifo);
  execFileSync('mkfifo', [join(fifo, 'episodes.jsonl')]);
  await t.throwsAsync(RecordFile.open(fifo), { message: /episodes\.jsonl is a FIFO, not a regular file/ });
});
