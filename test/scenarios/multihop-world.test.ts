import test from 'ava';
import { normalizeAnswer } from '../../src/env/qa-metrics.ts';
import { createMultihopQaScenario, loadWorld } from '../../scenarios/multihop-qa/index.ts';
import { QUESTION_TYPES, WORLD_SPLITS } from '../../scenarios/multihop-qa/questions.ts';
import { createCorpus } from '../../scenarios/multihop-qa/search.ts';
import { generateWorld } from '../../scenarios/multihop-qa/world.ts';
import { qaSummarizer } from '../../scenarios/multihop-qa/summarizer.ts';
import { builtinScenarios } from '../../scenarios/index.ts';
import { loadScenario } from '../../src/scenario/load.ts';

test('same seed, same world: byte-identical documents and hash; another seed, another world', (t) => {
  const a = generateWorld(7, 'tiny');
  const b = generateWorld(7, 'tiny');
  t.is(a.hash, b.hash);
  t.deepEqual(a.documents, b.documents);
  t.regex(a.hash, /^[0-9a-f]{16}$/);
  t.not(generateWorld(8, 'tiny').hash, a.hash);
  t.not(generateWorld(7, 'small').hash, a.hash);
});

test('the world hash is in the scenario version and description', (t) => {
  const s = createMultihopQaScenario({ size: 'tiny', seed: '7' });
  const { world } = loadWorld(7, 'tiny');
  t.true(s.version.endsWith(`+world.${world.hash}`));
  t.true(s.description.includes(world.hash));
});

test('documents: unique titles, short texts, name collisions resolved Wikipedia-style', (t) => {
  const world = generateWorld(1, 'small');
  const titles = world.documents.map((d) => d.title);
  t.is(new Set(titles).size, titles.length);
  t.true(world.documents.every((d) => d.text.length > 20 && d.text.length < 300));
  // distractors exist: people sharing a name, a film sharing a title with a novel or a city
  const names = world.entities.filter((e) => e.kind === 'person').map((e) => e.name);
  t.true(names.length - new Set(names).size > 10, 'several people share a name');
  t.true(
    titles.some((x) => x.endsWith('(film)')),
    'a film shares its name',
  );
  t.true(
    titles.some((x) => /\((director|writer|entrepreneur)/.test(x)),
    'a maker is disambiguated',
  );
});

test('sizes scale from a few hundred to a few thousand documents', (t) => {
  t.true(generateWorld(1, 'tiny').documents.length < 300);
  const small = generateWorld(1, 'small').documents.length;
  t.true(small > 400 && small < 1000);
  t.true(generateWorld(1, 'medium').documents.length > 1500);
});

test('splits share no question, no answer chain, no head entity; ood holds only 3-4 hop chains', (t) => {
  const { tasks } = loadWorld(1, 'small');
  const seen = new Map<string, string>();
  const chains = new Map<string, string>();
  const heads = new Map<string, string>();
  const ids = new Set<string>();
  for (const split of WORLD_SPLITS) {
    t.true(tasks[split].length > 50, `${split} has tasks`);
    for (const task of tasks[split]) {
      t.is(task.split, split);
      t.false(ids.has(task.id), `task id ${task.id} is unique`);
      ids.add(task.id);
      const q = normalizeAnswer(task.question);
      t.false(seen.has(q) && seen.get(q) !== split, `question shared: ${task.question}`);
      seen.set(q, split);
      const chain = task.meta.gold.join('>');
      t.false(chains.has(chain) && chains.get(chain) !== split, `chain shared: ${chain}`);
      chains.set(chain, split);
      for (const head of task.type === 'comparison' ? task.meta.gold : task.meta.gold.slice(0, 1)) {
        t.false(heads.has(head) && heads.get(head) !== split, `head entity shared: ${head}`);
        heads.set(head, split);
      }
      t.is(task.meta.hops, task.meta.gold.length);
      t.is(task.meta.queries.length, task.meta.gold.length);
      if (split === 'ood')
        t.true(task.meta.hops >= 3 && task.meta.hops <= 4 && (task.type === '3-hop' || task.type === '4-hop'));
      else t.true(task.meta.hops === 2 && task.type !== '3-hop' && task.type !== '4-hop');
      t.true((QUESTION_TYPES as readonly string[]).includes(task.type!));
    }
  }
  for (const split of ['train', 'dev', 'test'] as const) {
    t.deepEqual([...new Set(tasks[split].map((x) => x.type))].sort(), [
      'bridge',
      'comparison',
      'compositional',
      'inference',
    ]);
  }
});

test('trainHops 3 adds 3-hop questions on train entities to train only; dev, test and ood are unchanged', (t) => {
  const two = loadWorld(1, 'small').tasks;
  const three = loadWorld(1, 'small', 3).tasks;
  for (const split of ['dev', 'test', 'ood'] as const) t.deepEqual(three[split], two[split], `${split} unchanged`);
  const added = three.train.filter((x) => x.type === '3-hop');
  t.true(added.length > 100, 'a few hundred 3-hop train questions');
  t.deepEqual(
    three.train.filter((x) => x.type !== '3-hop'),
    two.train,
    'the 2-hop train questions stay as they were',
  );
  t.false(
    three.train.some((x) => x.type === '4-hop'),
    '4-hop stays out of domain',
  );
  // their chains start at train entities: no head or question of dev, test or ood reappears
  const held = [...two.dev, ...two.test, ...two.ood];
  const heldHeads = new Set(held.flatMap((x) => (x.type === 'comparison' ? x.meta.gold : x.meta.gold.slice(0, 1))));
  const heldQuestions = new Set(held.map((x) => normalizeAnswer(x.question)));
  for (const x of added) {
    t.is(x.meta.hops, 3);
    t.false(heldHeads.has(x.meta.gold[0]!), `${x.id} starts at a held-out entity`);
    t.false(heldQuestions.has(normalizeAnswer(x.question)), `${x.id} is asked in another split`);
  }
  // the scenario option: recorded, sampled round-robin with the other types, bad values refused
  const s = createMultihopQaScenario({ trainHops: '3' });
  t.is(s.options.trainHops, '3');
  t.true(s.description.includes(`train ${three.train.length}`));
  t.false('trainHops' in createMultihopQaScenario({}).options);
  t.deepEqual(
    createMultihopQaScenario({ trainHops: '2' }).options,
    createMultihopQaScenario({}).options,
    'the default, recorded as absent',
  );
  t.throws(() => createMultihopQaScenario({ trainHops: '4' }), { message: /trainHops/ });
});

test('every answer is written in the last gold document (or is a yes/no or one of the compared names)', (t) => {
  const { tasks, world } = loadWorld(1, 'small');
  for (const split of WORLD_SPLITS) {
    for (const task of tasks[split]) {
      const last = world.documents.find((d) => d.id === task.meta.gold.at(-1))!;
      const ok =
        task.type === 'comparison'
          ? task.answer === 'yes' || task.answer === 'no' || task.question.includes(task.answer)
          : last.text.includes(task.answer);
      t.true(ok, `${task.id}: ${task.answer} not in "${last.text}"`);
      t.not(normalizeAnswer(task.meta.distractor!), normalizeAnswer(task.answer), `${task.id}: the distractor differs`);
    }
  }
});

test('tasks(): a seeded, type-balanced sample; unknown split rejected', async (t) => {
  const s = createMultihopQaScenario({});
  const a = await s.tasks({ split: 'test', seed: 3, count: 40 });
  const b = await s.tasks({ split: 'test', seed: 3, count: 40 });
  t.deepEqual(a, b);
  t.notDeepEqual(
    a.map((x) => x.id),
    (await s.tasks({ split: 'test', seed: 4, count: 40 })).map((x) => x.id),
  );
  const counts: { [k: string]: number } = {};
  for (const task of a) counts[task.type!] = (counts[task.type!] ?? 0) + 1;
  t.deepEqual(counts, { bridge: 10, comparison: 10, compositional: 10, inference: 10 });
  t.is((await s.tasks({ split: 'ood', seed: 0, count: 100_000 })).length, loadWorld(1, 'small').tasks.ood.length);
  t.throws(() => s.tasks({ split: 'validation', seed: 0, count: 1 }), {
    message: /unknown split "validation"; valid: train, dev, test, ood/,
  });
});

test('bad scenario options fail with a clear message', (t) => {
  t.throws(() => createMultihopQaScenario({ size: 'huge' }), { message: /size/ });
  t.throws(() => createMultihopQaScenario({ seed: 'abc' }), { message: /seed must be an integer/ });
  t.throws(() => createMultihopQaScenario({ colour: 'red' }), { message: /colour/ });
  t.throws(() => createMultihopQaScenario({ noisyEarly: '1.5' }), { message: /probability/ });
  t.throws(() => createMultihopQaScenario({ rewards: '{"goldDocument": "a lot"}' }), { message: /goldDocument/ });
  t.throws(() => createMultihopQaScenario({ rewards: 'not json' }), { message: /rewards must be a JSON object/ });
});

test('search: BM25 over titles and text, top-k, results cached per (corpus, query, k)', (t) => {
  const docs = [
    { id: 'a', title: 'Kessel', text: 'Kessel is a city in Norvia.' },
    { id: 'b', title: 'Kessel (film)', text: 'Kessel is a 1950 film directed by Anna Berg.' },
    { id: 'c', title: 'Anna Berg', text: 'Anna Berg is a film director from Norvia.' },
  ];
  const one = createCorpus('one', docs);
  t.deepEqual(
    one.search('Kessel (film)', 1).map((h) => h.id),
    ['b'],
  );
  t.deepEqual(one.search('Anna Berg', 3)[0]!.id, 'c');
  t.is(one.search('Kessel', 2).length, 2);
  t.deepEqual(one.search('zebra', 3), []);
  // a second corpus with other content under the same query must not see the first one's results
  const two = createCorpus('two', [{ id: 'z', title: 'Kessel', text: 'Another Kessel.' }]);
  t.deepEqual(
    two.search('Kessel (film)', 1).map((h) => h.id),
    ['z'],
  );
  t.is(one.search('Kessel (film)', 1), one.search('Kessel (film)', 1), 'cached (same array)');
  t.throws(() => createCorpus('dup', [docs[0]!, docs[0]!]), { message: /duplicate document id "a"/ });
});

test('loads by name through the registry with its options, which the records carry', async (t) => {
  const s = await loadScenario('multihop-qa', builtinScenarios, { size: 'tiny', seed: '2' });
  t.is(s.id, 'multihop-qa');
  t.deepEqual(s.options, { seed: '2', size: 'tiny' });
  t.deepEqual(s.splits, ['train', 'dev', 'test', 'ood']);
  t.deepEqual(Object.keys(s.policies).sort(), ['expert', 'naive-rag', 'noisy-expert']);
  t.deepEqual(qaSummarizer().result(), { em: 0, f1: 0, recall: 0, byType: {} });
});
