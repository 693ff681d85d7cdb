import { closeSync, createReadStream, openSync, writeSync, fsyncSync } from 'node:fs';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import type { EpisodeRecord } from '../core/types.ts';
import { CorruptRecordError } from '../core/errors.ts';
import { makeDir } from '../core/make-dir.ts';
import { parseRecordLine, serializeRecord } from './record.ts';

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

/**
 * Appends whole lines with synchronous writes, so that an interrupted run leaves a valid JSONL
 * file holding every record written before the interruption.
 */
export class RecordWriter {
  private readonly fd: number;

  /** `append`: add to an existing file (a server that restarts keeps its earlier records). */
  constructor(
    readonly path: string,
    options: { append?: boolean } = {},
  ) {
    makeDir(dirname(path));
    this.fd = openSync(path, options.append ? 'a' : 'w');
  }

  write(record: EpisodeRecord): void {
    this.withPath(() => writeSync(this.fd, serializeRecord(record) + '\n'));
  }

  close(): void {
    try {
      this.withPath(() => {
        try {
          fsyncSync(this.fd);
        } catch (err) {
          // A device or pipe has nothing to sync (EINVAL); any other failure is the caller's to hear.
          if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
        }
      });
    } finally {
      closeSync(this.fd);
    }
  }

  /** A write error (a full disk) names the file: errors of fd calls carry no path. */
  private withPath(write: () => void): void {
    try {
      write();
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code && e.path === undefined) e.path = this.path;
      throw err;
    }
  }
}
