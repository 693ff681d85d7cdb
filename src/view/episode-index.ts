import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { END_REASONS, RECORD_SCHEMA_VERSION, type EndReason, type EpisodeRecord } from '../core/types.ts';
import { CorruptRecordError, RecordSchemaVersionError } from '../core/errors.ts';
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
/** Bytes compared at the start of the file and just before the indexed end, to tell a rewrite from an append. */
const FINGERPRINT = 512;
const END_REASON_SET: ReadonlySet<unknown> = new Set<EndReason>(END_REASONS);

/** The text an episode is searched by: what the agent generated, and its answer. */
function generatedText(record: Pick<EpisodeRecord, 'turns' | 'answer'>): string {
  return record.turns.map((t) => t.text).join('\n') + (record.answer === null ? '' : `\n${record.answer}`);
}

const isObject = (v: unknown): v is { [key: string]: unknown } =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The table's fields of one parsed line, each of the type the pages expect; anything else is not an
 * episode record (the full schema and checksum are checked when an episode is read).
 */
function summaryFields(r: unknown): Omit<EpisodeSummary, 'ordinal' | 'line' | 'offset' | 'length'> {
  const bad = (field: string): never => {
    throw new Error(`not an episode record (${field})`);
  };
  if (!isObject(r)) return bad('not an object');
  if (typeof r.schema === 'number' && r.schema !== RECORD_SCHEMA_VERSION)
    throw new RecordSchemaVersionError(r.schema, RECORD_SCHEMA_VERSION);
  const task = isObject(r.task) ? r.task : bad('task');
  const policy = isObject(r.policy) ? r.policy : bad('policy');
  const outcome = isObject(r.outcome) ? r.outcome : bad('outcome');
  const turns = Array.isArray(r.turns) ? r.turns : bad('turns');
  const str = (v: unknown, field: string) => (typeof v === 'string' ? v : bad(field));
  const int = (v: unknown, field: string) => (Number.isInteger(v) && (v as number) >= 0 ? (v as number) : bad(field));
  if (!turns.every((x) => isObject(x) && typeof x.text === 'string')) bad('turns');
  if (r.answer !== null && typeof r.answer !== 'string') bad('answer');
  if (r.status !== 'ok' && r.status !== 'error') bad('status');
  if (!END_REASON_SET.has(r.endReason)) bad('endReason');
  if (typeof r.totalReward !== 'number' || !Number.isFinite(r.totalReward)) bad('totalReward');
  return {
    episodeId: str(r.episodeId, 'episodeId'),
    index: int(r.index, 'index'),
    taskId: str(task.id, 'task.id'),
    split: str(task.split, 'task.split'),
    type: task.type === undefined ? '' : str(task.type, 'task.type'),
    group: str(r.group, 'group'),
    sample: int(r.sample, 'sample'),
    policyVersion: str(policy.version, 'policy.version'),
    status: r.status as EpisodeSummary['status'],
    endReason: r.endReason as EndReason,
    turns: turns.length,
    totalReward: r.totalReward as number,
    success: outcome.success === true,
  };
}

/** What a file was when it was last indexed: a change of identity or of its indexed bytes means a rewrite. */
interface FileStamp {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
}

/**
 * An index over an episodes.jsonl file: byte offsets of every line and a small summary per
 * episode, built in one streaming pass and extended in place when the file grows (a trainer
 * appending). A file rewritten under it (another inode, shorter, or other bytes where it had
 * indexed) is indexed anew; a deleted one empties it (`gone`). Each byte is searched for line ends
 * once, so an unfinished last line, however long, costs nothing until it grows. Pages of the table
 * and single episodes are read from disk on demand, so a run of 100k episodes costs a few tens of MB
 * in memory. Search is a case-insensitive substring scan over the generated text, kept lowercased in
 * memory: ~10 ms per query at 100k short episodes, no index to build, and it finds literal markup
 * (`<tool_call>`, `</answer>`) that a word index drops.
 */
export class EpisodeIndex {
  readonly episodes: EpisodeSummary[] = [];
  /** Lines that are not valid JSON or lack the fields the table needs. */
  readonly corrupt: { line: number; error: string }[] = [];
  /** Lowercased generated text per episode, for search (small next to the records). */
  private readonly texts: string[] = [];
  /** End of the last indexed line (its newline included). */
  private scanned = 0;
  /** How far past `scanned` the file has been searched for a newline (an unfinished last line). */
  private searched = 0;
  private lines = 0;
  private stamp: FileStamp | undefined;
  private head: Buffer = Buffer.alloc(0);
  private tail: Buffer = Buffer.alloc(0);
  private facetCache: Facets | undefined;
  /** The file was deleted (or moved away) since it was indexed. */
  gone = false;

  private constructor(readonly path: string) {}

  static open(path: string): EpisodeIndex {
    if (!existsSync(path)) throw new RunDirError(`no episodes file at ${path}`);
    const index = new EpisodeIndex(path);
    index.refresh();
    return index;
  }

  /** Indexes lines appended since the last call; a rewritten file is indexed anew. */
  refresh(): void {
    let fd: number;
    try {
      fd = openSync(this.path, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      this.reset();
      this.gone = true;
      return;
    }
    this.gone = false;
    try {
      const st = fstatSync(fd);
      if (this.stamp && st.size === this.stamp.size && st.mtimeMs === this.stamp.mtimeMs && st.ino === this.stamp.ino)
        return;
      if (this.stamp && !this.sameFile(fd, st)) this.reset();
      this.scan(fd, st.size);
      this.stamp = { dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs };
      this.head = readAt(fd, 0, Math.min(FINGERPRINT, this.scanned));
      this.tail = readAt(fd, Math.max(0, this.scanned - FINGERPRINT), Math.min(FINGERPRINT, this.scanned));
    } finally {
      closeSync(fd);
    }
    this.facetCache = undefined;
  }

  /** Whether the open file is the one indexed, grown or not: same identity, and the same bytes where it was read. */
  private sameFile(fd: number, st: { dev: number; ino: number; size: number }): boolean {
    const was = this.stamp!;
    if (st.dev !== was.dev || st.ino !== was.ino || st.size < this.scanned) return false;
    const start = Math.max(0, this.scanned - this.tail.length);
    return readAt(fd, 0, this.head.length).equals(this.head) && readAt(fd, start, this.tail.length).equals(this.tail);
  }

  /** Indexes every complete line between the last indexed one and `size`, reading each byte about once. */
  private scan(fd: number, size: number): void {
    let position = Math.max(this.searched, this.scanned);
    const buf = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(1, size - position)));
    while (position < size) {
      const n = readSync(fd, buf, 0, Math.min(buf.length, size - position), position);
      if (n === 0) break;
      const data = buf.subarray(0, n);
      for (let nl = data.indexOf(10); nl !== -1; nl = data.indexOf(10, nl + 1)) {
        const end = position + nl;
        if (this.scanned >= position) this.addLine(data, this.scanned - position, nl, this.scanned);
        else {
          // The line began in an earlier chunk (or an earlier refresh): read it whole, once.
          const line = readAt(fd, this.scanned, end - this.scanned);
          this.addLine(line, 0, line.length, this.scanned);
        }
        this.scanned = end + 1;
      }
      position += n;
    }
    this.searched = position;
  }

  private reset(): void {
    this.episodes.length = 0;
    this.texts.length = 0;
    this.corrupt.length = 0;
    this.scanned = 0;
    this.searched = 0;
    this.lines = 0;
    this.stamp = undefined;
    this.head = Buffer.alloc(0);
    this.tail = Buffer.alloc(0);
    this.facetCache = undefined;
  }

  private addLine(data: Buffer, start: number, end: number, offset: number): void {
    const line = ++this.lines;
    const text = data.toString('utf8', start, end);
    if (text.trim() === '') return;
    try {
      const r = JSON.parse(text) as EpisodeRecord;
      const fields = summaryFields(r);
      this.texts.push(generatedText(r).toLowerCase());
      this.episodes.push({ ordinal: this.episodes.length, line, offset, length: end - start, ...fields });
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
      return parseRecordLine(readAt(fd, e.offset, e.length).toString('utf8'), e.line);
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

/** `length` bytes at `position` (fewer if the file ends first). */
function readAt(fd: number, position: number, length: number): Buffer {
  const buf = Buffer.allocUnsafe(length);
  let got = 0;
  while (got < length) {
    const n = readSync(fd, buf, got, length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got);
}
