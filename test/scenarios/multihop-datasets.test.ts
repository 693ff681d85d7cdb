import test from 'ava';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { builtinScenarios } from '../../scenarios/index.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { resolvePolicy } from '../../src/app/resolve-policy.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { createRng } from '../../src/core/rng.ts';
import { ToolRunner } from '../../src/tools/runner.ts';
import { createDatasetScenario } from '../../scenarios/qa-datasets/scenario.ts';
import { hotpotqaItems, musiqueItems, parseJsonOrJsonl, twoWikiItems } from '../../scenarios/qa-datasets/loaders.ts';

// The real samples live beside the project (../shared/data/multihop); they are read, never copied in.
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DATA = resolve(repoRoot, '../shared/data/multihop');
const FILES = {
  hotpotqa: join(DATA, 'hotpotqa/hotpotqa_train.json'),
  '2wiki': join(DATA, '2wikimultihopqa/qa_sub.json'),
  musique: join(DATA, 'musique/musique_qa_100.json'),
  musiqueTrain: join(DATA, 'musique/musique_train.json'),
};
const present = Object.values(FILES).every((f) => existsSync(f));
const withData = present ? test : test.skip;
if (!present) console.warn(`multihop dataset samples not found under ${DATA}: the real-data tests are skipped`);

const cases = [
  { dataset: 'hotpotqa', file: FILES.hotpotqa, n: 100, types: { bridge: 78, comparison: 22 } },
  { dataset: '2wiki', file: FILES['2wiki'], n: 2, types: { comparison: 1, compositional: 1 } },
  { dataset: 'musique', file: FILES.musique, n: 100, types: { '2-hop': 53, '3-hop': 34, '4-hop': 13 } },
  { dataset: 'musique', file: FILES.musiqueTrain, n: 100, types: { '2-hop': 68, '3-hop': 27, '4-hop': 5 } },
] as const;

for (const c of cases) {
  withData(
    `${c.dataset} (${c.file.split('/').at(-1)}): loads every item; expert EM 1.0, naive-rag lower`,
    async (t) => {
      const scenario = await loadScenario(c.dataset, builtinScenarios, { data: c.file });
      t.deepEqual(scenario.splits, ['test']);
      const tasks = await scenario.tasks({ split: 'test', seed: 0, count: 1000 });
      t.is(tasks.length, c.n);
      t.is(scenario.taskCount?.('test'), c.n, 'the scenario says how many tasks its split has');
      const types: { [k: string]: number } = {};
      for (const task of tasks) types[task.type!] = (types[task.type!] ?? 0) + 1;
      t.deepEqual(types, { ...c.types });
      for (const task of tasks) {
        const gold = task.meta!.gold as string[];
        t.true(gold.length >= 2, `${task.id} has a multi-hop chain`);
        t.true(gold.every((g) => /^p\d+$/.test(g)));
      }
      const expert = await rollout({
        scenario,
        policy: await resolvePolicy('expert', scenario, 0),
        split: 'test',
        episodes: c.n,
        seed: 0,
      });
      t.is(expert.summary.em, 1);
      t.is(expert.summary.f1, 1);
      const found = expert.records.reduce(
        (a, r) => a + r.turns.reduce((b, x) => b + ((x.info?.goldFound as string[]) ?? []).length, 0),
        0,
      );
      const total = expert.records.reduce((a, r) => a + (r.task.meta!.gold as string[]).length, 0);
      t.true(found / total >= 0.98, `expert retrieves ${found}/${total} gold paragraphs`);
      const naive = await rollout({
        scenario,
        policy: await resolvePolicy('naive-rag', scenario, 0),
        split: 'test',
        episodes: c.n,
        seed: 0,
      });
      t.true((naive.summary.em as number) < 1, `naive-rag EM ${naive.summary.em}`);
      if (c.n >= 100) t.true((naive.summary.em as number) <= 0.6);
    },
  );
}

withData('musique JSONL reads the same as the JSON array', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'mhqa-'));
  try {
    const items = JSON.parse(readFileSync(FILES.musique, 'utf8')) as unknown[];
    const jsonl = join(dir, 'sample.jsonl');
    writeFileSync(
      jsonl,
      items
        .slice(0, 5)
        .map((x) => JSON.stringify(x))
        .join('\n') + '\n',
    );
    const byId = (xs: Array<{ id: string }>) => [...xs].sort((x, y) => x.id.localeCompare(y.id));
    const fromJsonl = createDatasetScenario('musique', { data: jsonl }).tasks({
      split: 'test',
      seed: 0,
      count: 5,
    }) as Array<{ id: string }>;
    const b = musiqueItems(items.slice(0, 5)).map((x) => x.task);
    t.deepEqual(byId(fromJsonl), byId(b));
    t.is(b.length, 5);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

withData("HotpotQA paragraphs keep their text; gold ids are the supporting titles' paragraphs", (t) => {
  const raw = JSON.parse(readFileSync(FILES.hotpotqa, 'utf8')) as Array<{
    context: [string, string[]][];
    supporting_facts: [string, number][];
  }>;
  const [item] = hotpotqaItems(raw.slice(0, 1));
  const first = raw[0]!;
  t.is(item!.documents.length, first.context.length);
  t.is(item!.documents[0]!.text, first.context[0]![1].join('').trim());
  const titles = [...new Set(first.supporting_facts.map(([title]) => title))];
  t.deepEqual(
    item!.task.meta.gold.map((g) => item!.documents.find((d) => d.id === g)!.title),
    titles,
  );
});

test('malformed dataset files fail with a message naming the problem', (t) => {
  t.throws(() => parseJsonOrJsonl('[{"a": 1}', 'x.json'), { message: /x\.json: not valid JSON/ });
  t.throws(() => parseJsonOrJsonl('{"a": 1}\n{oops}\n', 'x.jsonl'), { message: /x\.jsonl: line 2 is not valid JSON/ });
  t.throws(() => parseJsonOrJsonl('\n\n', 'x.jsonl'), { message: /no items/ });
  t.throws(() => hotpotqaItems([{ _id: '1', question: 'q', answer: 'a', supporting_facts: [] }]), {
    message: /hotpotqa item 0: not a hotpotqa item.*context/s,
  });
  const context = [
    ['A', ['a.']],
    ['B', ['b.']],
  ];
  t.throws(() => twoWikiItems([{ _id: '1', question: 'q', answer: 'a', supporting_facts: [['C', 0]], context }]), {
    message: /supporting fact title "C" is not in its context/,
  });
  const para = (idx: number) => ({ idx, title: `T${idx}`, paragraph_text: 'text' });
  t.throws(
    () =>
      musiqueItems([
        {
          id: 'm',
          question: 'q',
          answer: 'a',
          paragraphs: [para(0)],
          question_decomposition: [{ question: 'q', answer: 'a', paragraph_support_idx: 3 }],
        },
      ]),
    { message: /paragraph_support_idx 3 is not a paragraph/ },
  );
  // unanswerable MuSiQue items have no chain: skipped
  t.deepEqual(
    musiqueItems([
      {
        id: 'm',
        question: 'q',
        answer: '',
        answerable: false,
        paragraphs: [para(0)],
        question_decomposition: [{ question: 'q', answer: 'a', paragraph_support_idx: null }],
      },
    ]),
    [],
  );
});

test('dataset scenario options: data is required, the file must exist, split names the file', async (t) => {
  t.throws(() => createDatasetScenario('hotpotqa', {}), {
    message: /option data \(the dataset file, --data PATH\) is required/,
  });
  t.throws(() => createDatasetScenario('hotpotqa', { data: '/nonexistent/file.json' }), {
    message: /cannot read \/nonexistent\/file\.json/,
  });
  const dir = mkdtempSync(join(tmpdir(), 'mhqa-'));
  try {
    const file = join(dir, 'tiny.json');
    const item = {
      _id: 'x1',
      question: 'Who?',
      answer: 'Ann',
      supporting_facts: [
        ['A', 0],
        ['B', 0],
      ],
      context: [
        ['A', ['A knows B.']],
        ['B', ['B is Ann.']],
      ],
    };
    writeFileSync(file, JSON.stringify([item]));
    const s = createDatasetScenario('2wiki', { data: file, split: 'dev' });
    t.deepEqual(s.splits, ['dev']);
    t.is((await s.tasks({ split: 'dev', seed: 0, count: 3 }))[0]!.split, 'dev');
    t.throws(() => s.tasks({ split: 'test', seed: 0, count: 1 }), { message: /unknown split "test"; valid: dev/ });
    t.is(s.taskCount?.('dev'), 1);
    t.throws(() => s.taskCount?.('test'), { message: /unknown split "test"; valid: dev/ });
    t.true(s.version.startsWith('1.0.0+data.'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

withData('dataset episodes replay exactly; a dataset search returns at most 5 paragraphs', async (t) => {
  const scenario = createDatasetScenario('musique', { data: FILES.musique });
  const { records } = await rollout({
    scenario,
    policy: await resolvePolicy('expert', scenario, 0),
    split: 'test',
    episodes: 3,
    seed: 2,
  });
  for (const r of records) t.true((await replayRecord(r, scenario)).verified, r.episodeId);
  const [task] = await scenario.tasks({ split: 'test', seed: 0, count: 1 });
  const state = await scenario.env.init!(task!, { rng: createRng(0), tools: 'live' });
  const runner = new ToolRunner(scenario.tools, { timeoutMs: 1000, maxOutputChars: 100_000 });
  const ctx = { task: task!, rng: createRng(0), state };
  t.is(
    ((await runner.run({ name: 'search', arguments: { query: 'the', k: 5 } }, ctx)).data as { results: unknown[] })
      .results.length,
    5,
  );
  t.is((await runner.run({ name: 'search', arguments: { query: 'the', k: 6 } }, ctx)).error?.kind, 'bad_arguments');
});
