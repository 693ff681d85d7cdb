/**
 * Viewer index at scale: builds an episodes.jsonl of N sealed records (default 100k; cloned from a
 * few hundred real calculator episodes with new ids, seeds and texts) and times the index pass,
 * a filtered page, a text search and reading one episode (wall and CPU time: the machine may be shared).
 *
 *   npx tsx --conditions=source bench/viewer-index.ts [--episodes N] [--json]
 */
import { mkdtempSync, rmSync, statSync, createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calculator } from '../scenarios/calculator/index.ts';
import { builtinScenarios } from '../scenarios/index.ts';
import { rollout } from '../src/rollout/rollout.ts';
import { sealRecord, serializeRecord } from '../src/record/record.ts';
import type { EpisodeRecord } from '../src/core/types.ts';
import { EpisodeIndex } from '../src/view/episode-index.ts';
import { startViewer } from '../src/view/server.ts';

const args = process.argv.slice(2);
const n = Number(args[args.indexOf('--episodes') + 1] ?? 0) || 100_000;
const json = args.includes('--json');
const WORDS = [
  'alpha',
  'bravo',
  'charlie',
  'delta',
  'echo',
  'foxtrot',
  'golf',
  'hotel',
  'india',
  'juliet',
  'kilo',
  'lima',
];

const dir = mkdtempSync(join(tmpdir(), 'viewer-bench-'));
const file = join(dir, 'episodes.jsonl');
const scenario = calculator as never;
const seeds: EpisodeRecord[] = [];
for (const name of ['random', 'expert'] as const) {
  const policy = await (calculator as any).policies[name]({ scenario, seed: 1 });
  seeds.push(...(await rollout({ scenario, policy, split: 'train', episodes: 100, seed: 1, group: 4 })).records);
}
const out = createWriteStream(file);
for (let i = 0; i < n; i++) {
  const base = seeds[i % seeds.length]!;
  const { checksum: _c, ...rest } = base;
  const word = `${WORDS[i % WORDS.length]}${Math.floor(i / WORDS.length) % 1000}`;
  const turns = rest.turns.map((t, k) => (k === 0 ? { ...t, text: `${t.text} ${word}` } : t));
  const record = sealRecord({
    ...rest,
    index: i,
    episodeId: `${rest.task.id}-${i}#${rest.sample}`,
    group: `${rest.group}-${Math.floor(i / 4)}`,
    turns,
  });
  if (!out.write(serializeRecord(record) + '\n')) await new Promise<void>((r) => out.once('drain', () => r()));
}
await new Promise<void>((r) => out.end(() => r()));

const time = <T>(f: () => T): [T, number] => {
  const t = performance.now();
  const v = f();
  return [v, performance.now() - t];
};
async function timeAsync<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t = performance.now();
  const v = await f();
  return [v, performance.now() - t];
}
const mem0 = process.memoryUsage().heapUsed;
const cpu0 = process.cpuUsage();
const [index, indexMs] = time(() => EpisodeIndex.open(file));
const indexCpuMs = (process.cpuUsage(cpu0).user + process.cpuUsage(cpu0).system) / 1000;
const heapMb = (process.memoryUsage().heapUsed - mem0) / 2 ** 20;
const [page, filterMs] = time(() => index.filter({ split: 'train', minReward: 0.5 }).slice(0, 50));
index.filter({ q: 'warm-up' });
const [hits, searchMs] = time(() => index.filter({ q: 'golf7' }));
const [, readMs] = time(() => index.read(Math.floor(n / 2)));
// The same over HTTP, as a browser gets it: the viewer builds its own index at start.
const [viewerStart, viewerStartMs] = await timeAsync(() => startViewer({ dirs: [dir], scenarios: builtinScenarios }));
const viewer = viewerStart;
const fetchMs = async (path: string) =>
  (
    await timeAsync(async () => {
      const res = await fetch(viewer.url + path);
      if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status}`);
      return res.text();
    })
  )[1];
const runPageFirstMs = await fetchMs('/run/0');
const runPageMs = await fetchMs('/run/0?page=1000');
const filteredPageMs = await fetchMs('/run/0?endReason=answered&minReward=0.5&page=3');
const searchPageMs = await fetchMs('/run/0?q=golf7');
const episodePageMs = await fetchMs(`/run/0/episode/${Math.floor(n / 2)}`);
await viewer.close();
const figures = {
  episodes: index.size,
  fileMb: +(statSync(file).size / 2 ** 20).toFixed(1),
  indexMs: Math.round(indexMs),
  indexCpuMs: Math.round(indexCpuMs),
  indexHeapMb: Math.round(heapMb),
  filterPageMs: +filterMs.toFixed(1),
  searchQueryMs: +searchMs.toFixed(1),
  searchHits: hits.length,
  readEpisodeMs: +readMs.toFixed(2),
  pageRows: page.length,
  viewerStartMs: Math.round(viewerStartMs),
  runPageFirstMs: Math.round(runPageFirstMs),
  runPageMs: Math.round(runPageMs),
  filteredPageMs: Math.round(filteredPageMs),
  searchPageMs: Math.round(searchPageMs),
  episodePageMs: Math.round(episodePageMs),
};
if (json) process.stdout.write(JSON.stringify(figures) + '\n');
else for (const [k, v] of Object.entries(figures)) process.stdout.write(`${k.padEnd(16)} ${v}\n`);
rmSync(dir, { recursive: true, force: true });
