import { appendFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AgentR1Error } from '../core/errors.ts';
import { makeDir } from '../core/make-dir.ts';
import type { EpisodeRecord } from '../core/types.ts';
import { serializeRecord } from '../record/record.ts';

export class RecordFileError extends AgentR1Error {}

/**
 * `DIR/episodes.jsonl` as a gateway writes it: one sealed record per line, appended in the order
 * episodes close, one write at a time. Reopened, it goes on after the records already there.
 */
export class RecordFile {
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    readonly path: string,
    /** Records in the file when it was opened: the next record's index. */
    readonly existing: number,
  ) {}

  static async open(dir: string): Promise<RecordFile> {
    makeDir(dir);
    const path = join(dir, 'episodes.jsonl');
    let text = '';
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (text !== '' && !text.endsWith('\n'))
      throw new RecordFileError(
        `${path} ends in a partial line (a write was cut off): move the file aside, or remove its last line, to record here`,
      );
    return new RecordFile(path, text === '' ? 0 : text.split('\n').length - 1);
  }

  /** Appends a record; resolves once it is written (writes queue behind each other). */
  append(record: EpisodeRecord): Promise<void> {
    const line = `${serializeRecord(record)}\n`;
    this.writing = this.writing.then(() => appendFile(this.path, line));
    return this.writing;
  }
}
