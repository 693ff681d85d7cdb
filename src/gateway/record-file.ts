import { constants, type Stats } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { AgentR1Error } from '../core/errors.ts';
import { makeDir } from '../core/make-dir.ts';
import type { EpisodeRecord } from '../core/types.ts';
import { serializeRecord } from '../record/record.ts';

export class RecordFileError extends AgentR1Error {}

/**
 * A records path that is not a regular file (a symbolic link, a folder, a FIFO): records would go
 * somewhere else than the records folder, or nowhere. Nothing is written to it.
 */
export class NotARecordFileError extends RecordFileError {
  constructor(
    readonly path: string,
    readonly found: string,
  ) {
    super(
      `${path} is ${found}, not a regular file: records are written only to a regular file inside their folder; move it aside to record here`,
    );
  }
}

// O_NOFOLLOW: a link put in place of the file is refused (ELOOP), never followed out of the folder;
// O_NONBLOCK: a FIFO is refused after opening instead of blocking the open.
const READ = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const APPEND =
  constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;

function kind(st: Stats): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'a device';
}

/** The file at `path` opened with `flags`, checked to be a regular file (not a link, folder, FIFO). */
async function openRegular(path: string, flags: number) {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(path, flags, 0o666);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw new NotARecordFileError(path, 'a symbolic link');
    // A folder opened for writing answers EISDIR.
    if ((err as NodeJS.ErrnoException).code === 'EISDIR') throw new NotARecordFileError(path, 'a folder');
    // A FIFO with no reader, opened for writing without blocking, answers ENXIO.
    if ((err as NodeJS.ErrnoException).code === 'ENXIO') throw new NotARecordFileError(path, 'a FIFO');
    throw err;
  }
  const st = await fh.stat();
  if (!st.isFile()) {
    await fh.close();
    throw new NotARecordFileError(path, kind(st));
  }
  return fh;
}

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
      const fh = await openRegular(path, READ);
      try {
        text = await fh.readFile('utf8');
      } finally {
        await fh.close();
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (text !== '' && !text.endsWith('\n'))
      throw new RecordFileError(
        `${path} ends in a partial line (a write was cut off): move the file aside, or remove its last line, to record here`,
      );
    return new RecordFile(path, text === '' ? 0 : text.split('\n').length - 1);
  }

  /**
   * Appends a record; resolves once it is written (writes queue behind each other). The file is
   * opened for each record, and checked again: what was a file at open may be a link now.
   */
  append(record: EpisodeRecord): Promise<void> {
    const line = `${serializeRecord(record)}\n`;
    const written = this.writing.then(async () => {
      const fh = await openRegular(this.path, APPEND);
      try {
        await fh.appendFile(line);
      } finally {
        await fh.close();
      }
    });
    // A record that failed fails its own caller; the records after it are still written.
    this.writing = written.catch(() => {});
    return written;
  }
}
