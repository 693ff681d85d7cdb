import { closeSync, openSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { systemError } from './make-dir.ts';

/**
 * Proves that files can be made at `dir` (which may not exist yet) before a long job whose output
 * would otherwise be lost at its end: a read-only mount, a path through a file, /proc. Creates
 * nothing that stays: a probe file is made and removed in the deepest folder that exists. Throws
 * the system error (code, path, syscall). A disk that fills up later can still fail the job.
 */
export function assertWritableDir(dir: string): void {
  const target = resolve(dir);
  // The error names the directory asked for, not the probe.
  const fail = (err: unknown): never => {
    const code = (err as NodeJS.ErrnoException).code ?? 'EIO';
    throw systemError(code, 'cannot make files here', 'write', target);
  };
  let at = target;
  for (;;) {
    let isDir: boolean;
    try {
      isDir = statSync(at).isDirectory();
    } catch (err) {
      const parent = dirname(at);
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || parent === at) fail(err);
      at = parent;
      continue;
    }
    if (!isDir) fail(systemError('ENOTDIR', 'not a directory', 'mkdir', at));
    break;
  }
  const probe = join(at, `.agent-r1-write-probe-${process.pid}`);
  try {
    closeSync(openSync(probe, 'w'));
  } catch (err) {
    fail(err);
  }
  rmSync(probe, { force: true });
}
