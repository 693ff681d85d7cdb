import { writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { makeDir } from './make-dir.ts';

/**
 * Writes a command's output file, making its folder. A failed write (a full disk: ENOSPC) names the
 * file: Node's write errors carry no path, and "no space left" alone does not say where.
 */
export function writeOutput(path: string, data: string | Uint8Array): void {
  makeDir(dirname(path));
  try {
    writeFileSync(path, data);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code && e.path === undefined) e.path = path;
    throw err;
  }
}
