import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * `mkdir -p` that always ends. Node's `mkdir(path, {recursive: true})` loops forever where the parent
 * exists but mkdir answers ENOENT (anything under /proc); this walks up at most once per path
 * component and throws the system error (code, path, syscall) for the caller to report.
 */
export function makeDir(path: string): void {
  const target = resolve(path);
  try {
    mkdirSync(target);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') {
      if (!statSync(target).isDirectory()) throw systemError('ENOTDIR', 'not a directory', 'mkdir', target);
      return;
    }
    const parent = dirname(target);
    if (code !== 'ENOENT' || parent === target) throw err;
    makeDir(parent);
    // A second ENOENT (the parent exists now) is final: /proc and the like refuse new entries so.
    mkdirSync(target);
  }
}

/** An Error shaped like Node's own system errors, so callers report it the same way. */
export function systemError(code: string, reason: string, syscall: string, path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${reason}, ${syscall} '${path}'`), { code, syscall, path });
}
