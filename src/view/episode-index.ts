import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import type { EndReason, EpisodeRecord } from '../core/types.ts';
import { CorruptRecordError } from '../core/errors.ts';
import { parseRecordLine } from '../record/record.ts';
import { RunDirError } from './errors.ts';

/** The few fields of one episode the table shows and filters on; the record itself stays on disk. */
export interface EpisodeSummary {
  /** Position in the file among valid records (0-based): the viewer's handle for the episode. */
  ordinal: number;
  /** 1-based line number in the file. */
  line: number;
  offset: number;
  length: number;
  episodeId: string;
  index: number;
  taskId: string;
  split: string;
  type: string;
  group: string;
  sample: number;
  policyVersion: string;
  status: 'ok' | 'error';
  endReason: EndReason;
  turns: number;
  totalReward: number;
  success: boolean;
}

export interface EpisodeFilter {
  split?: string;
  type?: string;
  status?: string;
  endReason?: string;
  policy?: string;
  success?: boolean;
  minReward?: number;
  maxReward?: number;
  /** Text the generated text must contain (case-insensitive substring, so tags like `<answer>` work). */
  q?: string;
}

export interface Facets {
  split: string[];
  type: string[];
  status: string[];
  endReason: string[];
  policy: string[];
}

const CHUNK = 1 << 20;

/** The text an episode is searched by: what the agent generated, and its answer. */
function generatedText(record: Pick<EpisodeRecord, 'turns' | 'answer'>): string {
  return record.turns.map((t) => t.text).join('\n') + (record.answer === null ? '' : `\n${record.answer}`);
}

/**
 * An index over an episodes.jsonl file: byte offsets of every line and a small summary per
 * episode, built in one streaming pass and extended in place when the file grows (a trainer
 * appending). Pages of the table and single episodes are read from disk on demand, so a run of
 * 100k episodes costs a few tens of MB in memory. Search is a case-insensitive substring scan over
 * the generated text, kept lowercased in memory: ~10 ms per query at 100k short episodes, no index
 * to build, and it finds literal markup (`<tool_call>`, `</answer>`) that a word index drops.
 */
export class EpisodeIndex {
  readonly episodes: EpisodeSummary[] = [];
  /** Lines that are not valid JSON or lack the fields the table needs. */
  readonly corrupt: { line: number; error: string }[] = [];
  /** Lowercased generated text per episode, for search (small next to the records). */
  private readonly texts: string[] = [];
  private scanned = 0;
  private lines = 0;
  private facetCache: Facets | undefined;

  private constructor(readonly path: string) {}

  static open(path: string): EpisodeIndex {
    if (!existsSync(path)) throw new RunDirError(`no episodes file at ${path}`);
    const index = new EpisodeIndex(path);
    index.refresh();
    return index;
  }

  /** Indexes lines appended since the last call (a file that shrank is indexed anew). */
  refresh(): void {
    const size = statSync(this.path).size;
    if (size < this.scanned) this.reset();
    if (size === this.scanned) return;
    const fd = openSync(this.path, 'r');
    try {
      let carry: Buffer = Buffer.alloc(0);
      let position = this.scanned;
      const buf = Buffer.allocUnsafe(CHUNK);
      while (position < size) {
        const n = readSync(fd, buf, 0, Math.min(CHUNK, size - position), position);
        if (n === 0) break;
        const data = carry.length ? Buffer.concat([carry, buf.subarray(0, n)]) : buf.subarray(0, n);
        const base = position - carry.length;
        let start = 0;
        for (let nl = data.indexOf(10, start); nl !== -1; nl = data.indexOf(10, start)) {
          this.addLine(data, start, nl, base + start);
          start = nl + 1;
        }
        // An unfinished last line (a writer mid-append) waits for the next refresh.
        carry = Buffer.from(data.subarray(start));
        position += n;
      }
      this.scanned = size - carry.length;
    } finally {
      closeSync(fd);
    }
    this.facetCache = undefined;
  }

  private reset(): void {
    this.episodes.length = 0;
    this.texts.length = 0;
    this.corrupt.length = 0;
    this.scanned = 0;
    this.lines = 0;
  }

  private addLine(data: Buffer, start: number, end: number, offset: number): void {
    const line = ++this.lines;
    const text = data.toString('utf8', start, end);
    if (text.trim() === '') return;
    try {
      const r = JSON.parse(text) as EpisodeRecord;
      if (
        typeof r !== 'object' ||
        r === null ||
        typeof r.episodeId !== 'string' ||
        !Array.isArray(r.turns) ||
        typeof r.task !== 'object'
      ) {
        throw new Error('not an episode record');
      }
      this.episodes.push({
        ordinal: this.episodes.length,
        line,
        offset,
        length: end - start,
        episodeId: r.episodeId,
        index: r.index,
        taskId: String(r.task.id),
        split: String(r.task.split),
        type: r.task.type ?? '',
        group: String(r.group),
        sample: r.sample,
        policyVersion: String(r.policy?.version ?? ''),
        status: r.status,
        endReason: r.endReason,
        turns: r.turns.length,
        totalReward: r.totalReward,
        success: r.outcome?.success === true,
      });
      this.texts.push(generatedText(r).toLowerCase());
    } catch (err) {
      this.corrupt.push({ line, error: err instanceof Error ? err.message : String(err) });
    }
  }

  get size(): number {
    return this.episodes.length;
  }

  /** Reads one episode from disk and checks it (schema and checksum): a corrupt line is an error. */
  read(ordinal: number): EpisodeRecord {
    const e = this.episodes[ordinal];
    if (!e) throw new RangeError(`no episode ${ordinal} (the run has ${this.episodes.length})`);
    const fd = openSync(this.path, 'r');
    try {
      const buf = Buffer.allocUnsafe(e.length);
      readSync(fd, buf, 0, e.length, e.offset);
      return parseRecordLine(buf.toString('utf8'), e.line);
    } finally {
      closeSync(fd);
    }
  }

  /** Like read, but a corrupt record comes back as the error instead of throwing. */
  tryRead(ordinal: number): EpisodeRecord | CorruptRecordError {
    try {
      return this.read(ordinal);
    } catch (err) {
      if (err instanceof CorruptRecordError) return err;
      throw err;
    }
  }

  /** The distinct values of each filterable field, sorted. */
  facets(): Facets {
    if (this.facetCache) return this.facetCache;
    const sets = {
      split: new Set<string>(),
      type: new Set<string>(),
      status: new Set<string>(),
      endReason: new Set<string>(),
      policy: new Set<string>(),
    };
    for (const e of this.episodes) {
      sets.split.add(e.split);
      if (e.type) sets.type.add(e.type);
      sets.status.add(e.status);
      sets.endReason.add(e.endReason);
      sets.policy.add(e.policyVersion);
    }
    const sorted = (s: Set<string>) => [...s].sort();
    this.facetCache = {
      split: sorted(sets.split),
      type: sorted(sets.type),
      status: sorted(sets.status),
      endReason: sorted(sets.endReason),
      policy: sorted(sets.policy),
    };
    return this.facetCache;
  }

  /** The episodes that pass the filter, in file order. */
  filter(f: EpisodeFilter): EpisodeSummary[] {
    const needle = f.q && f.q.trim() !== '' ? f.q.trim().toLowerCase() : undefined;
    const out: EpisodeSummary[] = [];
    for (const e of this.episodes) {
      if (f.split !== undefined && e.split !== f.split) continue;
      if (f.type !== undefined && e.type !== f.type) continue;
      if (f.status !== undefined && e.status !== f.status) continue;
      if (f.endReason !== undefined && e.endReason !== f.endReason) continue;
      if (f.policy !== undefined && e.policyVersion !== f.policy) continue;
      if (f.success !== undefined && e.success !== f.success) continue;
      if (f.minReward !== undefined && !(e.totalReward >= f.minReward)) continue;
      if (f.maxReward !== undefined && !(e.totalReward <= f.maxReward)) continue;
      if (needle !== undefined && !this.texts[e.ordinal]!.includes(needle)) continue;
      out.push(e);
    }
    return out;
  }

  /** The episodes of one GRPO group: same group key and policy version. */
  groupMembers(group: string, policyVersion: string): EpisodeSummary[] {
    return this.episodes
      .filter((e) => e.group === group && e.policyVersion === policyVersion)
      .sort((a, b) => a.sample - b.sample || a.ordinal - b.ordinal);
  }
}
