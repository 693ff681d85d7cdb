import {
  closeSync,
  createReadStream,
  existsSync,
  fstatSync,
  fsync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { createInterface } from 'node:readline';
import type { EpisodeRecord } from '../core/types.ts';
import { CorruptRecordError } from '../core/errors.ts';
import { makeDir } from '../core/make-dir.ts';
import { parseRecordLine, serializeRecord } from './record.ts';

const encoder = new TextEncoder();
const fsyncOffThread = promisify(fsync);

export type RecordLine = { line: number; record: EpisodeRecord } | { line: number; error: CorruptRecordError };

/** Reads an episodes.jsonl file line by line; a corrupt line is reported, and reading goes on. */
export async function* readRecords(path: string): AsyncGenerator<RecordLine> {
  const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity });
  let line = 0;
  try {
    for await (const text of lines) {
      line++;
      if (text.trim() === '') continue;
      try {
        yield { line, record: parseRecordLine(text, line) };
      } catch (err) {
        yield { line, error: err instanceof CorruptRecordError ? err : new CorruptRecordError(String(err), line) };
      }
    }
  } catch (err) {
    // A read error (a directory: EISDIR) carries no path of its own.
    const e = err as NodeJS.ErrnoException;
    if (e.code && e.path === undefined) e.path = path;
    throw err;
  }
}

/** Reads every valid record of a file, in file order, and the corrupt lines apart. */
export async function loadRecords(path: string): Promise<{ records: EpisodeRecord[]; corrupt: CorruptRecordError[] }> {
  const records: EpisodeRecord[] = [];
  const corrupt: CorruptRecordError[] = [];
  for await (const item of readRecords(path)) {
    if ('record' in item) records.push(item.record);
    else corrupt.push(item.error);
  }
  return { records, corrupt };
}

/** A file's torn last line (a write cut short by a crash or a full disk), set aside before appending. */
export interface TornTail {
  /** Bytes after the last newline, now removed from the file. */
  bytes: number;
  /** Where they were saved. */
  savedTo: string;
}

/**
 * Makes a JSONL file end with a whole line before anything is appended to it: the bytes after its
 * last newline (a line whose write was cut short) are saved to `FILE.torn-N` and cut off, so a new
 * record does not start inside a corrupt line. Undefined when the file is absent, empty or whole.
 */
export function repairTornTail(path: string): TornTail | undefined {
  if (!existsSync(path)) return undefined;
  const fd = openSync(path, 'r+');
  try {
    const size = fstatSync(fd).size;
    if (size === 0) return undefined;
    const chunk = Buffer.allocUnsafe(64 * 1024);
    let end = size;
    let lastNewline = -1;
    while (end > 0 && lastNewline < 0) {
      const start = Math.max(0, end - chunk.length);
      const n = readSync(fd, chunk, 0, end - start, start);
      const at = chunk.subarray(0, n).lastIndexOf(0x0a);
      if (at >= 0) lastNewline = start + at;
      end = start;
    }
    const keep = lastNewline + 1;
    if (keep === size) return undefined;
    const torn = Buffer.allocUnsafe(size - keep);
    readSync(fd, torn, 0, torn.length, keep);
    let k = 1;
    while (existsSync(`${path}.torn-${k}`)) k++;
    const savedTo = `${path}.torn-${k}`;
    writeFileSync(savedTo, torn);
    ftruncateSync(fd, keep);
    fsyncSync(fd);
    return { bytes: torn.length, savedTo };
  } finally {
    closeSync(fd);
  }
}

/**
 * Appends whole lines, so that an interrupted run leaves a valid JSONL file. Lines are gathered and
 * written together (a write system call costs more than sealing a short episode): at 64 KiB, at the
 * latest 100 ms after the first waiting line, and on `flush`/`close`. A hard kill can lose the last
 * 100 ms of lines, never half of one. A failed background write is thrown by the next call.
 *
 * A write that fails (a full disk) takes back what it wrote of its lines: the file is cut back to
 * its last whole line and the error thrown, so the lines after it never follow a torn one. Opened to
 * append, a file whose last line is torn is repaired first (`repaired` says what was set aside).
 *
 * A line waits as UTF-8 bytes, not as a string: a waiting string (and the record text it is cut
 * from) would outlive young-generation GCs and be copied by each, and Node 20's Buffer.from encodes
 * a large ASCII string some 30 times slower than TextEncoder.encodeInto.
 */
export class RecordWriter {
  static readonly FLUSH_BYTES = 64 * 1024;
  static readonly FLUSH_MS = 100;

  private readonly fd: number;
  /** The waiting lines' bytes: twice the flush size, or 3× the longest line if more. */
  private bytes = Buffer.allocUnsafe(2 * RecordWriter.FLUSH_BYTES);
  private used = 0;
  private timer: NodeJS.Timeout | undefined;
  private failure: unknown;
  private closed = false;
  /** Bytes of whole lines in the file (undefined where that cannot be known: a pipe, a device). */
  private size: number | undefined;
  /** What was set aside from the end of the file before appending to it, if anything. */
  readonly repaired: TornTail | undefined;

  /** `append`: add to an existing file (a server that restarts keeps its earlier records). */
  constructor(
    readonly path: string,
    options: { append?: boolean } = {},
  ) {
    makeDir(dirname(path));
    if (options.append) this.repaired = this.withPath(() => repairTornTail(path));
    this.fd = openSync(path, options.append ? 'a' : 'w');
    const stat = fstatSync(this.fd);
    this.size = stat.isFile() ? stat.size : undefined;
  }

  write(record: EpisodeRecord): void {
    this.writeLine(serializeRecord(record));
  }

  /**
   * Appends a sealed record's line, given without its newline: as text, or as its UTF-8 bytes (as a
   * worker thread sent them: see FinishedEpisode, whose `line` this takes). Nothing is checked but
   * that it is one line.
   */
  writeLine(line: string | Uint8Array): void {
    this.throwFailure();
    if (this.closed) throw new Error(`RecordWriter: ${this.path} is closed`);
    if (typeof line === 'string') {
      if (line.includes('\n')) throw this.newlineError();
      this.append(line);
    } else this.appendBytes(line);
    if (this.used >= RecordWriter.FLUSH_BYTES) this.flush();
    // Not unref'd: a script that never closes its writer still gets its last lines, 100 ms late.
    else this.timer ??= setTimeout(() => this.flushInBackground(), RecordWriter.FLUSH_MS);
  }

  /** Writes every waiting line now. */
  flush(): void {
    this.throwFailure();
    clearTimeout(this.timer);
    this.timer = undefined;
    const used = this.used;
    if (used === 0) return;
    this.used = 0;
    this.withPath(() => {
      try {
        // A pipe may take part of a large write; a file takes it whole, or fails part way (full).
        for (let at = 0; at < used; ) at += writeSync(this.fd, this.bytes, at, used - at);
      } catch (err) {
        this.takeBack();
        throw err;
      }
    });
    if (this.size !== undefined) this.size += used;
  }

  /** Cuts the file back to its last whole line after a failed write (best effort: the write's error is the one thrown). */
  private takeBack(): void {
    if (this.size === undefined) return;
    try {
      ftruncateSync(this.fd, this.size);
    } catch {
      // nothing more to do: the next open in append mode repairs the tail
    }
  }

  /** Encodes a line and its newline after the waiting ones: flushed first if it does not fit. */
  private append(line: string): void {
    let room = new Uint8Array(this.bytes.buffer, this.bytes.byteOffset + this.used, this.bytes.length - this.used);
    let { read, written } = encoder.encodeInto(line, room);
    if (read < line.length || written === room.length) {
      this.flush();
      // Each UTF-16 unit takes at most 3 bytes.
      if (this.bytes.length < line.length * 3 + 1) this.bytes = Buffer.allocUnsafe(line.length * 3 + 1);
      room = this.bytes;
      ({ written } = encoder.encodeInto(line, room));
    }
    room[written] = 0x0a;
    this.used += written + 1;
  }

  /** Copies a line's bytes and its newline after the waiting ones: flushed first if they do not fit. */
  private appendBytes(line: Uint8Array): void {
    if (this.used + line.length + 1 > this.bytes.length) {
      this.flush();
      if (this.bytes.length < line.length + 1) this.bytes = Buffer.allocUnsafe(line.length + 1);
    }
    this.bytes.set(line, this.used);
    this.bytes[this.used + line.length] = 0x0a;
    // Its first newline must be the one just put after it (Buffer's indexOf is a memchr; a
    // Uint8Array's includes took 5 µs for a 7 KB line).
    if (this.bytes.indexOf(0x0a, this.used) !== this.used + line.length) throw this.newlineError();
    this.used += line.length + 1;
  }

  private newlineError(): RangeError {
    return new RangeError(`RecordWriter: ${this.path}: a record's line cannot hold a newline`);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.flush();
      try {
        fsyncSync(this.fd);
      } catch (err) {
        this.syncFailed(err);
      }
    } finally {
      clearTimeout(this.timer);
      closeSync(this.fd);
    }
  }

  /**
   * As close, but the fsync runs on libuv's thread pool, so this thread's event loop stays free
   * while the disk catches up (for a run's records, milliseconds per megabyte).
   */
  async end(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      this.flush();
      try {
        await fsyncOffThread(this.fd);
      } catch (err) {
        this.syncFailed(err);
      }
    } finally {
      clearTimeout(this.timer);
      closeSync(this.fd);
    }
  }

  /** A device or pipe has nothing to sync (EINVAL); any other failure is the caller's to hear, naming the file. */
  private syncFailed(err: unknown): void {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EINVAL') return;
    if (e.code && e.path === undefined) e.path = this.path;
    throw err;
  }

  private flushInBackground(): void {
    try {
      this.flush();
    } catch (err) {
      this.failure = err;
    }
  }

  private throwFailure(): void {
    if (this.failure === undefined) return;
    const failure = this.failure;
    this.failure = undefined;
    throw failure;
  }

  /** A write error (a full disk) names the file: errors of fd calls carry no path. */
  private withPath<T>(write: () => T): T {
    try {
      return write();
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code && e.path === undefined) e.path = this.path;
      throw err;
    }
  }
}
