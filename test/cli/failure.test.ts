import test from 'ava';
import { CorruptRecordError, OutputExistsError, UnknownNameError, UsageError } from '../../src/core/errors.ts';
import { systemError } from '../../src/core/make-dir.ts';
import { describeFailure } from '../../src/cli/failure.ts';
import { terminalLine, terminalText } from '../../src/cli/terminal-text.ts';

// In process: the mapping the CLI's one catch applies to every error (test/cli/bad-input spawns the CLI).
test('every error becomes one line and a documented exit code', (t) => {
  const cases: Array<[unknown, number, RegExp]> = [
    [new UsageError('bad flags'), 2, /^bad flags$/],
    [new UnknownNameError('scenario', 'x', ['a', 'b']), 2, /^unknown scenario "x"; valid: a, b$/],
    [new OutputExistsError('runs/a', 'episodes.jsonl'), 2, /^runs\/a already holds a run/],
    [new CorruptRecordError('bad\n  ✖ field\n  → at x', 3), 1, /^line 3: bad; ✖ field; → at x$/],
    [
      systemError('ENOENT', 'x', 'open', '/a/b.jsonl'),
      1,
      /^cannot open \/a\/b\.jsonl: no such file or directory \(ENOENT\)$/,
    ],
    [systemError('EACCES', 'x', 'open', '/root/x'), 1, /^cannot open \/root\/x: permission denied \(EACCES\)$/],
    [systemError('EROFS', 'x', 'write', '/mnt/ro'), 1, /^cannot write to \/mnt\/ro: read-only file system \(EROFS\)$/],
    [
      Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', syscall: 'write' }),
      1,
      /^cannot write: no space left on device \(ENOSPC\)$/,
    ],
    [
      Object.assign(new Error('listen EADDRINUSE'), {
        code: 'EADDRINUSE',
        syscall: 'listen',
        address: '::1',
        port: 80,
      }),
      1,
      /^cannot listen on ::1:80: the port is in use/,
    ],
    [Object.assign(new Error('x'), { code: 'EWEIRD', syscall: 'read', path: 'f' }), 1, /^cannot read f: x \(EWEIRD\)$/],
    [
      new TypeError("Cannot read properties of undefined (reading 'x')"),
      1,
      /^internal error: TypeError: Cannot read .* \(AGENT_R1_DEBUG=1 shows where\)$/,
    ],
    [Object.assign(new Error('stop'), { name: 'AbortError' }), 130, /^interrupted$/],
    ['a string', 1, /^internal error: a string/],
  ];
  for (const [err, exitCode, message] of cases) {
    const f = describeFailure(err);
    t.is(f.exitCode, exitCode, String(err));
    t.regex(f.message, message);
    t.false(f.message.includes('\n'));
  }
  // A huge message (a minified wasm dump in a stack) is cut.
  t.true(describeFailure(new RangeError('x'.repeat(40_000))).message.length < 700);
});

test('terminal text: escape sequences, C1 codes and bidi overrides are shown, not obeyed', (t) => {
  t.is(terminalText('a\x1b[31mb\tc\nd\x07\u009b\u202e'), 'a\\x1b[31mb\tc\nd\\x07\\x9b\\u202e');
  t.is(terminalLine('  one\r\n   two\x1b '), 'one; two\\x1b');
  t.is(terminalText('plain ünïcödé → ok'), 'plain ünïcödé → ok');
});
