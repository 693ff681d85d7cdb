import test from 'ava';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeDir } from '../../src/core/make-dir.ts';
import { assertWritableDir } from '../../src/core/writable-dir.ts';
import { writeOutput } from '../../src/core/write-output.ts';

const dir = mkdtempSync(join(tmpdir(), 'agent-r1-make-dir-'));
test.after.always(() => rmSync(dir, { recursive: true, force: true }));

test('makeDir makes parents, accepts what exists, and ends with an error where mkdir -p hangs', (t) => {
  makeDir(join(dir, 'a', 'b', 'c'));
  makeDir(join(dir, 'a', 'b'));
  t.true(existsSync(join(dir, 'a', 'b', 'c')));
  writeFileSync(join(dir, 'file'), 'x');
  t.throws(() => makeDir(join(dir, 'file')), { message: /ENOTDIR/ });
  t.throws(() => makeDir(join(dir, 'file', 'x')), { message: /ENOTDIR/ });
  // Node's own recursive mkdir loops forever on /proc; this returns at once.
  const error = t.throws(() => makeDir('/proc/agent-r1-test/x')) as NodeJS.ErrnoException;
  t.is(error.code, 'ENOENT');
});

test('assertWritableDir leaves nothing behind and names the directory asked for', (t) => {
  assertWritableDir(join(dir, 'not', 'yet'));
  t.false(existsSync(join(dir, 'not')));
  t.deepEqual(
    readdirSync(dir).filter((f) => f.includes('probe')),
    [],
  );
  const under = t.throws(() => assertWritableDir(join(dir, 'file', 'ckpt'))) as NodeJS.ErrnoException;
  t.like(under, { code: 'ENOTDIR', syscall: 'write', path: join(dir, 'file', 'ckpt') });
  const proc = t.throws(() => assertWritableDir('/proc/agent-r1-test')) as NodeJS.ErrnoException;
  t.like(proc, { syscall: 'write', path: '/proc/agent-r1-test' });
  const full = t.throws(() => writeOutput('/dev/full', 'x')) as NodeJS.ErrnoException;
  t.like(full, { code: 'ENOSPC', path: '/dev/full' });
});
