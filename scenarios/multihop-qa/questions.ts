import { createRng, deepFreeze, deriveSeed, normalizeAnswer, type Rng } from 'agent-r1-ts';
import type { QaTask } from './env.ts';
import type { Book, City, Company, Country, Entity, Film, Person, World } from './world.ts';

export const WORLD_SPLITS = ['train', 'dev', 'test', 'ood'] as const;
export type WorldSplit = (typeof WORLD_SPLITS)[number];

/** Question types, as HotpotQA / 2WikiMultihopQA / MuSiQue name them. The last two only in `ood` (and 3-hop in `train` with `trainHops: 3`). */
export const QUESTION_TYPES = ['bridge', 'comparison', 'compositional', 'inference', '3-hop', '4-hop'] as const;

interface Candidate {
  template: string;
  type: (typeof QUESTION_TYPES)[number];
  /** The entities the question names; they decide the split. */
  heads: string[];
  question: string;
  answer: string;
  /** Other accepted spellings (a person's document title beside the name). */
  aliases?: string[];
  gold: string[];
  distractor: string;
}

/**
 * Splits are decided by the entities a question names (its heads): every head entity belongs to
 * exactly one split, and a question is only asked in its heads' split. So no question and no
 * answer chain (its first document is a head) is shared across splits. Works (films, novels,
 * companies) go 60/10/10/20 to train/dev/test/ood; people 80/10/10 to train/dev/test (no ood
 * template starts at a person). `ood` asks only 3- and 4-hop chains.
 */
function headSplit(world: World, e: Entity): WorldSplit {
  const u = (deriveSeed('split', world.seed, e.id) >>> 0) / 2 ** 32;
  if (e.kind === 'person') return u < 0.8 ? 'train' : u < 0.9 ? 'dev' : 'test';
  return u < 0.6 ? 'train' : u < 0.7 ? 'dev' : u < 0.8 ? 'test' : 'ood';
}

function candidates(world: World): Candidate[] {
  const rng = createRng(deriveSeed('questions', world.seed, world.hash));
  const get = <T extends Entity>(id: string | undefined) => (id === undefined ? undefined : (world.byId.get(id) as T));
  const of = <K extends Entity['kind']>(kind: K) =>
    world.entities.filter((e): e is Extract<Entity, { kind: K }> => e.kind === kind);
  const people = of('person');
  const cities = of('city');
  const countries = of('country');
  const films = of('film');
  const books = of('book');
  const companies = of('company');

  const other = <T>(items: readonly T[], not: (x: T) => boolean): T => {
    const pool = items.filter((x) => !not(x));
    return rng.pick(pool.length > 0 ? pool : items);
  };
  const wrongCity = (c: City) => other(cities, (x) => x.name === c.name).name;
  const wrongCountry = (c: Country) => other(countries, (x) => x.name === c.name).name;
  const wrongYear = (y: number) => String(y + rng.pick([-7, -4, -2, -1, 1, 2, 3, 5, 8]));
  const wrongPerson = (p: Person) => other(people, (x) => x.gender !== p.gender || x.name === p.name).name;
  const wrongPopulation = (c: City) => String(other(cities, (x) => x.population === c.population).population);
  const personAnswer = (p: Person) => ({ answer: p.name, aliases: p.title === p.name ? undefined : [p.title] });

  const out: Candidate[] = [];
  const add = (c: Omit<Candidate, 'heads'> & { heads?: string[] }) => out.push({ heads: [c.gold[0]!], ...c });

  for (const f of films) {
    const d = get<Person>(f.director)!;
    const city = get<City>(d.birthplace)!;
    const mother = get<Person>(d.mother);
    const father = get<Person>(d.father);
    add({
      template: 'film-director-birthplace',
      type: 'bridge',
      question: `In which city was the director of the film ${f.name} born?`,
      answer: city.name,
      gold: [f.id, d.id],
      distractor: wrongCity(city),
    });
    add({
      template: 'film-director-birthyear',
      type: 'bridge',
      question: `In what year was the director of the film ${f.name} born?`,
      answer: String(d.birthYear),
      gold: [f.id, d.id],
      distractor: wrongYear(d.birthYear),
    });
    if (father)
      add({
        template: 'film-director-father',
        type: 'bridge',
        question: `Who is the father of the director of the film ${f.name}?`,
        ...personAnswer(father),
        gold: [f.id, d.id],
        distractor: wrongPerson(father),
      });
    add({
      template: 'film-director-birthplace-population',
      type: '3-hop',
      question: `What is the population of the city where the director of the film ${f.name} was born?`,
      answer: String(city.population),
      gold: [f.id, d.id, city.id],
      distractor: wrongPopulation(city),
    });
    if (mother) {
      const motherCity = get<City>(mother.birthplace)!;
      add({
        template: 'film-director-mother-birthplace',
        type: '3-hop',
        question: `Where was the mother of the director of the film ${f.name} born?`,
        answer: motherCity.name,
        gold: [f.id, d.id, mother.id],
        distractor: wrongCity(motherCity),
      });
      const gf = get<Person>(mother.father);
      if (gf)
        add({
          template: 'film-director-maternal-grandfather-birthyear',
          type: '4-hop',
          question: `When was the maternal grandfather of the director of the film ${f.name} born?`,
          answer: String(gf.birthYear),
          gold: [f.id, d.id, mother.id, gf.id],
          distractor: wrongYear(gf.birthYear),
        });
    }
  }
  for (const b of books) {
    const a = get<Person>(b.author)!;
    const city = get<City>(a.birthplace)!;
    const nation = get<Country>(a.nationality)!;
    const father = get<Person>(a.father);
    add({
      template: 'book-author-birthplace',
      type: 'bridge',
      question: `Where was the author of the novel ${b.name} born?`,
      answer: city.name,
      gold: [b.id, a.id],
      distractor: wrongCity(city),
    });
    add({
      template: 'book-author-nationality',
      type: 'bridge',
      question: `What country is the author of the novel ${b.name} from?`,
      answer: nation.name,
      gold: [b.id, a.id],
      distractor: wrongCountry(nation),
    });
    if (father) {
      add({
        template: 'book-author-father-birthyear',
        type: '3-hop',
        question: `When was the father of the author of the novel ${b.name} born?`,
        answer: String(father.birthYear),
        gold: [b.id, a.id, father.id],
        distractor: wrongYear(father.birthYear),
      });
      const fc = get<City>(father.birthplace)!;
      add({
        template: 'book-author-father-birthplace-population',
        type: '4-hop',
        question: `What is the population of the city where the father of the author of the novel ${b.name} was born?`,
        answer: String(fc.population),
        gold: [b.id, a.id, father.id, fc.id],
        distractor: wrongPopulation(fc),
      });
    }
  }
  for (const c of companies) {
    const founder = get<Person>(c.founder)!;
    const hq = get<City>(c.headquarters)!;
    const hqCountry = get<Country>(hq.country)!;
    const birthCity = get<City>(founder.birthplace)!;
    add({
      template: 'company-founder-birthyear',
      type: 'bridge',
      question: `When was the founder of ${c.name} born?`,
      answer: String(founder.birthYear),
      gold: [c.id, founder.id],
      distractor: wrongYear(founder.birthYear),
    });
    add({
      template: 'company-headquarters-country',
      type: 'bridge',
      question: `In which country is ${c.name} headquartered?`,
      answer: hqCountry.name,
      gold: [c.id, hq.id],
      distractor: wrongCountry(hqCountry),
    });
    add({
      template: 'company-founder-birthplace-founded',
      type: '3-hop',
      question: `In what year was the city where the founder of ${c.name} was born founded?`,
      answer: String(birthCity.founded),
      gold: [c.id, founder.id, birthCity.id],
      distractor: wrongYear(birthCity.founded),
    });
    const capital = get<City>(hqCountry.capital)!;
    add({
      template: 'company-headquarters-country-capital',
      type: '3-hop',
      question: `What is the capital of the country where ${c.name} is headquartered?`,
      answer: capital.name,
      gold: [c.id, hq.id, hqCountry.id],
      distractor: wrongCity(capital),
    });
    const mother = get<Person>(founder.mother);
    const gf = get<Person>(mother?.father);
    if (mother && gf)
      add({
        template: 'company-founder-maternal-grandfather',
        type: '3-hop',
        question: `Who is the maternal grandfather of the founder of ${c.name}?`,
        ...personAnswer(gf),
        gold: [c.id, founder.id, mother.id],
        distractor: wrongPerson(gf),
      });
    const father = get<Person>(founder.father);
    if (father) {
      const fc = get<City>(father.birthplace)!;
      add({
        template: 'company-founder-father-birthplace-founded',
        type: '4-hop',
        question: `In what year was the city where the father of the founder of ${c.name} was born founded?`,
        answer: String(fc.founded),
        gold: [c.id, founder.id, father.id, fc.id],
        distractor: wrongYear(fc.founded),
      });
    }
  }
  for (const p of people) {
    const mother = get<Person>(p.mother);
    const father = get<Person>(p.father);
    if (!mother || !father) continue;
    const mc = get<City>(mother.birthplace)!;
    add({
      template: 'person-mother-birthplace',
      type: 'compositional',
      question: `Where was the mother of ${p.title} born?`,
      answer: mc.name,
      gold: [p.id, mother.id],
      distractor: wrongCity(mc),
    });
    add({
      template: 'person-father-birthyear',
      type: 'compositional',
      question: `When was the father of ${p.title} born?`,
      answer: String(father.birthYear),
      gold: [p.id, father.id],
      distractor: wrongYear(father.birthYear),
    });
    const fn = get<Country>(father.nationality)!;
    add({
      template: 'person-father-nationality',
      type: 'compositional',
      question: `What is the nationality of the father of ${p.title}?`,
      answer: fn.name,
      gold: [p.id, father.id],
      distractor: wrongCountry(fn),
    });
    for (const [side, parent] of [
      ['maternal', mother],
      ['paternal', father],
    ] as const) {
      for (const [rel, gp] of [
        ['grandfather', get<Person>(parent.father)],
        ['grandmother', get<Person>(parent.mother)],
      ] as const) {
        if (!gp) continue;
        add({
          template: `${side}-${rel}`,
          type: 'inference',
          question: `Who is the ${side} ${rel} of ${p.title}?`,
          ...personAnswer(gp),
          gold: [p.id, parent.id],
          distractor: wrongPerson(gp),
        });
      }
    }
  }

  // Comparisons: pairs within one split (both heads in it), two partners per entity.
  const bySplit = <T extends Entity>(items: readonly T[]) => {
    const groups = new Map<WorldSplit, T[]>();
    for (const e of items) {
      const s = headSplit(world, e);
      if (!groups.has(s)) groups.set(s, []);
      groups.get(s)!.push(e);
    }
    return [...groups.values()];
  };
  const compare = <T extends Film | Book | Company | Person>(
    items: readonly T[],
    template: string,
    ask: (a: string, b: string) => string,
    label: (e: T) => string,
    value: (e: T) => number,
  ) => {
    for (const group of bySplit(items)) {
      if (headSplit(world, group[0]!) === 'ood') continue;
      for (const a of group) {
        for (let n = 0; n < 2; n++) {
          const b = rng.pick(group);
          if (b === a || value(a) === value(b)) continue;
          const [x, y]: [T, T] = rng.chance(0.5) ? [a, b] : [b, a];
          const first = value(x) < value(y) ? x : y;
          const second = first === x ? y : x;
          const aliases = first.title !== label(first) ? [first.title] : undefined;
          add({
            template,
            type: 'comparison',
            heads: [x.id, y.id],
            question: ask(label(x), label(y)),
            answer: label(first),
            aliases,
            gold: [x.id, y.id],
            distractor: label(second),
          });
        }
      }
    }
  };
  compare(
    films,
    'film-earlier',
    (a, b) => `Which film came out first, ${a} or ${b}?`,
    (e) => e.name,
    (e) => e.year,
  );
  compare(
    books,
    'book-earlier',
    (a, b) => `Which novel was published first, ${a} or ${b}?`,
    (e) => e.name,
    (e) => e.year,
  );
  compare(
    companies,
    'company-earlier',
    (a, b) => `Which company was founded first, ${a} or ${b}?`,
    (e) => e.name,
    (e) => e.founded,
  );
  const makers = people.filter(
    (p) => p.occupation === 'director' || p.occupation === 'writer' || p.occupation === 'entrepreneur',
  );
  compare(
    makers,
    'person-older',
    (a, b) => `Who was born first, ${a} or ${b}?`,
    (e) => e.title,
    (e) => e.birthYear,
  );
  for (const group of bySplit(makers)) {
    for (const a of group) {
      // one partner of the same nationality and one of another, so yes and no are balanced
      for (const same of [true, false]) {
        const pool = group.filter((b) => b !== a && (b.nationality === a.nationality) === same);
        if (pool.length === 0) continue;
        const b = rng.pick(pool);
        const answer = same ? 'yes' : 'no';
        add({
          template: 'same-nationality',
          type: 'comparison',
          heads: [a.id, b.id],
          question: `Are ${a.title} and ${b.title} of the same nationality?`,
          answer,
          gold: [a.id, b.id],
          distractor: same ? 'no' : 'yes',
        });
      }
    }
  }
  return out;
}

export type WorldTasks = Record<WorldSplit, QaTask[]>;

/**
 * Every task of the world, by split. A question whose text is asked of more than one chain (or
 * twice) is dropped, so every question has one answer; questions whose heads sit in different
 * splits are dropped too. `trainHops` is the longest chain `train` asks: 2 (default: dev and test
 * alike) or 3, which adds the 3-hop templates on train entities, so that a policy can learn to
 * follow a chain past two searches. dev and test stay 2-hop and ood 3-4 hop either way; the
 * 4-hop templates are only ever asked in ood.
 */
export function worldTasks(world: World, options: { trainHops?: 2 | 3 } = {}): WorldTasks {
  const trainHops = options.trainHops ?? 2;
  const all = candidates(world);
  const byText = new Map<string, number>();
  for (const c of all) byText.set(normalizeAnswer(c.question), (byText.get(normalizeAnswer(c.question)) ?? 0) + 1);
  const splits: WorldTasks = { train: [], dev: [], test: [], ood: [] };
  const ids = new Set<string>();
  for (const c of all) {
    if (byText.get(normalizeAnswer(c.question))! > 1) continue;
    const headSplits = new Set(c.heads.map((h) => headSplit(world, world.byId.get(h)!)));
    if (headSplits.size !== 1) continue;
    const split = [...headSplits][0]!;
    const long = c.type === '3-hop' || c.type === '4-hop';
    const asked = split === 'ood' ? long : !long || (split === 'train' && c.type === '3-hop' && trainHops === 3);
    if (!asked) continue;
    const id = `${c.template}:${c.heads.join('+')}`;
    if (ids.has(id)) continue;
    ids.add(id);
    const chain = c.gold.map((g) => world.byId.get(g)!.title);
    // Fields in canonical (sorted) order, as records write them (see inCanonicalOrder).
    splits[split].push({
      answer: c.answer,
      id,
      meta: {
        answers: [c.answer, ...(c.aliases ?? [])],
        chain,
        distractor: c.distractor,
        gold: c.gold,
        hops: c.gold.length,
        queries: chain,
        template: c.template,
      },
      question: c.question,
      split,
      type: c.type,
    });
  }
  return splits;
}

/**
 * `count` tasks of a split for a seed: each type's tasks shuffled by the seed, then taken round-robin
 * over the types, so any prefix is balanced across question types.
 */
export function sampleTasks(pool: readonly QaTask[], seed: number, count: number, rngName: string): QaTask[] {
  const rng: Rng = createRng(deriveSeed('tasks', rngName, seed));
  const byType = new Map<string, QaTask[]>();
  for (const t of pool) {
    const type = t.type ?? 'other';
    if (!byType.has(type)) byType.set(type, []);
    byType.get(type)!.push(t);
  }
  const queues = [...byType.keys()].sort().map((k) => rng.shuffle(byType.get(k)!));
  const out: QaTask[] = [];
  for (let i = 0; out.length < count && queues.some((q) => i < q.length); i++) {
    for (const q of queues) if (i < q.length && out.length < count) out.push(q[i]!);
  }
  // The pool's own objects, frozen (once) so that no episode can change another's task: a copy per
  // draw cost the coordinator more than the rest of the draw.
  return out.map(deepFreeze);
}
