import { createHash } from 'node:crypto';
import { canonicalJson, createRng, type Rng } from 'agent-r1-ts';
import {
  CITY_NAMES,
  COMPANY_SUFFIXES,
  COUNTRY_NAMES,
  FEMALE_FIRST,
  LAST_NAMES,
  MALE_FIRST,
  OCCUPATION_PHRASE,
  OTHER_OCCUPATIONS,
  TITLE_ADJECTIVES,
  TITLE_NOUNS,
} from './names.ts';
import type { QaDocument } from './search.ts';

export interface Country {
  kind: 'country';
  id: string;
  name: string;
  title: string;
  capital: string;
}
export interface City {
  kind: 'city';
  id: string;
  name: string;
  title: string;
  country: string;
  founded: number;
  population: number;
}
export interface Person {
  kind: 'person';
  id: string;
  name: string;
  title: string;
  gender: 'f' | 'm';
  occupation: string;
  birthYear: number;
  birthplace: string;
  /** Country of the birthplace. */
  nationality: string;
  father?: string;
  mother?: string;
}
export interface Film {
  kind: 'film';
  id: string;
  name: string;
  title: string;
  year: number;
  director: string;
}
export interface Book {
  kind: 'book';
  id: string;
  name: string;
  title: string;
  year: number;
  author: string;
}
export interface Company {
  kind: 'company';
  id: string;
  name: string;
  title: string;
  founded: number;
  founder: string;
  headquarters: string;
}
export type Entity = Country | City | Person | Film | Book | Company;

/** How big a world to make. Every count is of entities of that kind. */
export interface WorldSize {
  countries: number;
  cities: number;
  /** People per generation: grandparents (no parents known), parents, makers. */
  grandparents: number;
  parents: number;
  directors: number;
  writers: number;
  entrepreneurs: number;
  films: number;
  books: number;
  companies: number;
}

export const WORLD_SIZES: { [name: string]: WorldSize } = {
  tiny: {
    countries: 4,
    cities: 12,
    grandparents: 30,
    parents: 40,
    directors: 12,
    writers: 12,
    entrepreneurs: 12,
    films: 30,
    books: 30,
    companies: 16,
  },
  small: {
    countries: 6,
    cities: 24,
    grandparents: 80,
    parents: 110,
    directors: 40,
    writers: 40,
    entrepreneurs: 40,
    films: 110,
    books: 110,
    companies: 60,
  },
  medium: {
    countries: 8,
    cities: 36,
    grandparents: 240,
    parents: 330,
    directors: 120,
    writers: 120,
    entrepreneurs: 120,
    films: 330,
    books: 330,
    companies: 180,
  },
  large: {
    countries: 12,
    cities: 48,
    grandparents: 700,
    parents: 900,
    directors: 300,
    writers: 300,
    entrepreneurs: 300,
    films: 900,
    books: 900,
    companies: 300,
  },
};

export interface World {
  seed: number;
  sizeName: string;
  entities: Entity[];
  byId: Map<string, Entity>;
  documents: QaDocument[];
  /** sha256 (first 16 hex digits) over the canonical JSON of the entities and documents. */
  hash: string;
}

class Namer {
  private readonly used = new Set<string>();
  take(_rng: Rng, make: () => string, tries = 200): string {
    for (let i = 0; i < tries; i++) {
      const name = make();
      if (!this.used.has(name)) {
        this.used.add(name);
        return name;
      }
    }
    throw new Error('world generator: name inventory exhausted; use a smaller size');
  }
}

function generateEntities(rng: Rng, size: WorldSize): Entity[] {
  if (size.countries > COUNTRY_NAMES.length || size.cities > CITY_NAMES.length) {
    throw new Error(
      `world size asks for more countries/cities than the inventory has (${COUNTRY_NAMES.length}/${CITY_NAMES.length})`,
    );
  }
  const countryNames = rng.shuffle(COUNTRY_NAMES).slice(0, size.countries);
  const cityNames = rng.shuffle(CITY_NAMES).slice(0, size.cities);
  const cities: City[] = cityNames.map((name, i) => ({
    kind: 'city',
    id: `city${i}`,
    name,
    title: name,
    // every country gets at least one city: the first cities go round-robin
    country: `country${i < size.countries ? i : rng.int(0, size.countries - 1)}`,
    founded: rng.int(900, 1750),
    population: rng.int(5, 900) * 1000,
  }));
  const countries: Country[] = countryNames.map((name, i) => ({
    kind: 'country',
    id: `country${i}`,
    name,
    title: name,
    capital: cities.find((c) => c.country === `country${i}`)!.id,
  }));
  const cityCountry = new Map(cities.map((c) => [c.id, c.country]));

  // People: (name, occupation, birth year) is unique; names alone collide on purpose.
  const personKeys = new Set<string>();
  const people: Person[] = [];
  const makePerson = (
    gender: 'f' | 'm',
    occupation: string,
    years: [number, number],
    last?: string,
    parents?: { father: string; mother: string },
  ): Person => {
    for (let tries = 0; tries < 500; tries++) {
      const first = rng.pick(gender === 'f' ? FEMALE_FIRST : MALE_FIRST);
      const name = `${first} ${last ?? rng.pick(LAST_NAMES)}`;
      const birthYear = rng.int(years[0], years[1]);
      const key = `${name}|${occupation}|${birthYear}`;
      if (personKeys.has(key)) continue;
      personKeys.add(key);
      const birthplace = rng.pick(cities).id;
      const p: Person = {
        kind: 'person',
        id: `person${people.length}`,
        name,
        title: name,
        gender,
        occupation,
        birthYear,
        birthplace,
        nationality: cityCountry.get(birthplace)!,
        ...parents,
      };
      people.push(p);
      return p;
    }
    throw new Error('world generator: person names exhausted; use a smaller size');
  };
  const generation = (
    count: number,
    years: [number, number],
    occupations: readonly string[],
    parentsFrom: Person[],
  ) => {
    const fathers = parentsFrom.filter((p) => p.gender === 'm');
    const mothers = parentsFrom.filter((p) => p.gender === 'f');
    const out: Person[] = [];
    for (let i = 0; i < count; i++) {
      const gender = rng.chance(0.5) ? 'f' : 'm';
      const occupation = occupations[i % occupations.length]!;
      if (fathers.length === 0 || mothers.length === 0) {
        out.push(makePerson(gender, occupation, years));
      } else {
        const father = rng.pick(fathers);
        const mother = rng.pick(mothers);
        const lo = Math.max(years[0], Math.max(father.birthYear, mother.birthYear) + 18);
        const hi = Math.max(lo, Math.min(years[1], Math.min(father.birthYear, mother.birthYear) + 45));
        out.push(
          makePerson(gender, occupation, [lo, hi], father.name.split(' ')[1], { father: father.id, mother: mother.id }),
        );
      }
    }
    return out;
  };
  const grandparents = generation(size.grandparents, [1810, 1850], OTHER_OCCUPATIONS, []);
  const parents = generation(size.parents, [1850, 1890], OTHER_OCCUPATIONS, grandparents);
  const directors = generation(size.directors, [1880, 1930], ['director'], parents);
  const writers = generation(size.writers, [1880, 1930], ['writer'], parents);
  const entrepreneurs = generation(size.entrepreneurs, [1880, 1930], ['entrepreneur'], parents);

  // Works: film and novel titles share one inventory, so a film and a novel may share a title, and
  // some films are named after a city.
  const filmNames = new Namer();
  const bookNames = new Namer();
  const title = () =>
    rng.chance(0.2)
      ? `The ${rng.pick(TITLE_NOUNS)} of ${rng.pick(cities).name}`
      : `${rng.chance(0.6) ? 'The ' : ''}${rng.pick(TITLE_ADJECTIVES)} ${rng.pick(TITLE_NOUNS)}`;
  const films: Film[] = [];
  for (let i = 0; i < size.films; i++) {
    const director = rng.pick(directors);
    const name = filmNames.take(rng, () => (rng.chance(0.1) ? rng.pick(cities).name : title()));
    films.push({
      kind: 'film',
      id: `film${i}`,
      name,
      title: name,
      year: rng.int(director.birthYear + 20, director.birthYear + 60),
      director: director.id,
    });
  }
  const books: Book[] = [];
  for (let i = 0; i < size.books; i++) {
    const author = rng.pick(writers);
    const name = bookNames.take(rng, title);
    books.push({
      kind: 'book',
      id: `book${i}`,
      name,
      title: name,
      year: rng.int(author.birthYear + 20, author.birthYear + 60),
      author: author.id,
    });
  }
  const companyNames = new Namer();
  const companies: Company[] = [];
  for (let i = 0; i < size.companies; i++) {
    const founder = rng.pick(entrepreneurs);
    const name = companyNames.take(
      rng,
      () => `${rng.chance(0.5) ? founder.name.split(' ')[1] : rng.pick(cities).name} ${rng.pick(COMPANY_SUFFIXES)}`,
    );
    companies.push({
      kind: 'company',
      id: `company${i}`,
      name,
      title: name,
      founded: rng.int(founder.birthYear + 20, founder.birthYear + 50),
      founder: founder.id,
      headquarters: rng.pick(cities).id,
    });
  }

  const entities: Entity[] = [
    ...countries,
    ...cities,
    ...grandparents,
    ...parents,
    ...directors,
    ...writers,
    ...entrepreneurs,
    ...films,
    ...books,
    ...companies,
  ];
  assignTitles(entities);
  return entities;
}

/**
 * Document titles are unique, Wikipedia-style: the first meaning keeps the bare name (cities,
 * countries, companies), a film or novel that shares a name gets "(film)" / "(novel)", people who
 * share a name get their occupation, and their birth year where that is shared too.
 */
function assignTitles(entities: Entity[]): void {
  const count = new Map<string, number>();
  const bump = (key: string) => count.set(key, (count.get(key) ?? 0) + 1);
  for (const e of entities) bump(e.name);
  const people = entities.filter((e): e is Person => e.kind === 'person');
  const byNameOcc = new Map<string, number>();
  for (const p of people)
    byNameOcc.set(`${p.name}|${p.occupation}`, (byNameOcc.get(`${p.name}|${p.occupation}`) ?? 0) + 1);
  for (const e of entities) {
    if ((count.get(e.name) ?? 0) < 2) continue;
    if (e.kind === 'film') e.title = `${e.name} (film)`;
    else if (e.kind === 'book') e.title = `${e.name} (novel)`;
    else if (e.kind === 'person') {
      e.title =
        (byNameOcc.get(`${e.name}|${e.occupation}`) ?? 0) > 1
          ? `${e.name} (${e.occupation}, born ${e.birthYear})`
          : `${e.name} (${e.occupation})`;
    }
  }
  const titles = new Set<string>();
  for (const e of entities) {
    if (titles.has(e.title)) throw new Error(`world generator: duplicate title "${e.title}"`);
    titles.add(e.title);
  }
}

function render(e: Entity, byId: Map<string, Entity>, rng: Rng): string {
  const t = (id: string) => byId.get(id)!.title;
  const n = (id: string) => byId.get(id)!.name;
  const pick = (...variants: string[]) => rng.pick(variants);
  switch (e.kind) {
    case 'country':
      return pick(
        `${e.name} is a country. Its capital is ${t(e.capital)}.`,
        `${e.name} is a country whose capital city is ${t(e.capital)}.`,
      );
    case 'city':
      return pick(
        `${e.name} is a city in ${n(e.country)}. It was founded in ${e.founded} and has a population of ${e.population}.`,
        `${e.name} is a city of ${n(e.country)}, founded in ${e.founded}. Its population is ${e.population}.`,
      );
    case 'person': {
      const [he, his] = e.gender === 'f' ? ['She', 'her'] : ['He', 'his'];
      const job = OCCUPATION_PHRASE[e.occupation]!;
      const first = `${e.name} is ${/^[aeiou]/.test(job) ? 'an' : 'a'} ${job} from ${n(e.nationality)}.`;
      const born = pick(
        `${he} was born in ${e.birthYear} in ${t(e.birthplace)}.`,
        `${he} was born in ${t(e.birthplace)} in ${e.birthYear}.`,
      );
      if (!e.father || !e.mother) return `${first} ${born}`;
      const family = pick(
        `${he} is the ${e.gender === 'f' ? 'daughter' : 'son'} of ${t(e.father)} and ${t(e.mother)}.`,
        `${he} is the child of ${t(e.father)} and ${t(e.mother)}.`,
        `${his.charAt(0).toUpperCase()}${his.slice(1)} father is ${t(e.father)} and ${his} mother is ${t(e.mother)}.`,
      );
      return `${first} ${born} ${family}`;
    }
    case 'film':
      return pick(
        `${e.name} is a ${e.year} film directed by ${t(e.director)}.`,
        `${e.name} is a film by director ${t(e.director)}, released in ${e.year}.`,
      );
    case 'book':
      return pick(
        `${e.name} is a novel by ${t(e.author)}, published in ${e.year}.`,
        `${e.name} is a novel written by ${t(e.author)} and first published in ${e.year}.`,
      );
    case 'company':
      return pick(
        `${e.name} is a company founded in ${e.founded} by ${t(e.founder)}. Its headquarters are in ${t(e.headquarters)}.`,
        `${e.name} is a company based in ${t(e.headquarters)}. It was founded by ${t(e.founder)} in ${e.founded}.`,
      );
  }
}

export function resolveWorldSize(name: string): WorldSize {
  const size = WORLD_SIZES[name];
  if (!size) throw new Error(`unknown world size "${name}"; valid: ${Object.keys(WORLD_SIZES).join(', ')}`);
  return size;
}

/** The world of a seed: entities, their documents, and a content hash. Pure: same seed and size ⇒ same bytes. */
export function generateWorld(seed: number, sizeName = 'small'): World {
  const size = resolveWorldSize(sizeName);
  const rng = createRng(seed);
  const entities = generateEntities(rng, size);
  const byId = new Map(entities.map((e) => [e.id, e]));
  const documents: QaDocument[] = entities.map((e) => ({ id: e.id, title: e.title, text: render(e, byId, rng) }));
  const hash = createHash('sha256').update(canonicalJson({ entities, documents })).digest('hex').slice(0, 16);
  return { seed, sizeName, entities, byId, documents, hash };
}
