import { closeSync, fsyncSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
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

/**
 * Whether `bytes` bytes can be written to a new file in `dir` now (a disk that was full may have
 * room again): a probe file is written, synced and removed. False on any error.
 */
export function canWrite(dir: string, bytes: number): boolean {
  const probe = join(dir, `.agent-r1-write-probe-${process.pid}`);
  let fd: number | undefined;
  try {
    fd = openSync(probe, 'w');
    const block = Buffer.alloc(Math.min(bytes, 64 * 1024), 0x20);
    for (let left = bytes; left > 0; left -= block.length) writeSync(fd, block, 0, Math.min(left, block.length));
    fsyncSync(fd);
    return true;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
    rmSync(probe, { force: true });
  }
}
