import test from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decide, findCommand, missingPackages } from '../../bin/test-setup.js';
import { repoRoot } from '../helpers/cli.ts';

// bin/test-setup.js, the first step of npm test: its decisions, and the script run with a PATH that
// hides the commands it looks for. AGENT_R1_TEST_SETUP=check-only keeps it from installing anything
// (this file must never change the machine it runs on).

const MISSING = ['redis-server', 'python3-jinja2'];

test('nothing missing: ready; missing as root: apt-get as it is; with passwordless sudo: sudo -n apt-get', (t) => {
  const base = { root: false, sudo: false, aptGet: true, checkOnly: false };
  t.deepEqual(decide({ ...base, missing: [] }), { action: 'ready' });
  t.deepEqual(decide({ ...base, missing: MISSING, root: true }), { action: 'install', prefix: [] });
  t.deepEqual(decide({ ...base, missing: MISSING, sudo: true }), { action: 'install', prefix: ['sudo', '-n'] });
});

test('missing and not installable: it stops with the one line to run, and says why', (t) => {
  const base = { missing: MISSING, root: false, sudo: false, aptGet: true, checkOnly: false };
  const stop = (over: object) => {
    const d = decide({ ...base, ...over });
    if (d.action !== 'stop') throw new Error(`expected stop, got ${d.action}`);
    return d.message;
  };
  t.is(
    stop({}),
    'the tests need redis-server, python3-jinja2, missing here; not installed (this user is not root and has no passwordless sudo). Run:\n' +
      '  sudo apt-get update && sudo apt-get install -y --no-install-recommends redis-server python3-jinja2\n',
  );
  t.regex(
    stop({ root: true, checkOnly: true }),
    /\(AGENT_R1_TEST_SETUP=check-only\)\. Run:\n {2}apt-get update && apt-get install -y --no-install-recommends redis-server python3-jinja2\n$/,
  );
  t.regex(stop({ root: true, aptGet: false }), /there is no apt-get here/);
});

test('findCommand looks on the PATH given; missingPackages reports what that PATH hides (the slow suite: its libraries too)', (t) => {
  const empty = mkdtempSync(join(tmpdir(), 'test-setup-path-'));
  try {
    t.is(findCommand('node', empty), null);
    t.is(findCommand(process.execPath, empty), process.execPath, 'a path is checked as it is');
    t.truthy(findCommand('sh', '/nonexistent:/bin:/usr/bin'));
    const missing = missingPackages({ slow: true, path: empty });
    for (const pkg of ['redis-server', 'libegl1', 'libegl-mesa0', 'libgl1-mesa-dri'])
      t.true(missing.includes(pkg), pkg);
    t.false(missingPackages({ path: empty }).includes('libegl1'), 'the fast suite does not need them');
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

test('node bin/test-setup.js with redis-server hidden: exit 1 at once, the apt-get line on stderr, nothing on stdout', (t) => {
  const empty = mkdtempSync(join(tmpdir(), 'test-setup-path-'));
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: empty, AGENT_R1_TEST_SETUP: 'check-only' };
    delete env.AGENT_R1_REDIS_SERVER;
    const started = Date.now();
    const r = spawnSync(process.execPath, [join(repoRoot, 'bin/test-setup.js')], { env, encoding: 'utf8' });
    t.is(r.status, 1, r.stderr);
    t.true(Date.now() - started < 10_000);
    t.regex(r.stderr, /^test set-up: the tests need redis-server(, [\w-]+)*, missing here; not installed \(/);
    t.regex(
      r.stderr,
      /\n {2}(sudo )?apt-get update && (sudo )?apt-get install -y --no-install-recommends redis-server/,
    );
    t.is(r.stderr.trim().split('\n').length, 2, 'one reason, one line to run');
    t.is(r.stdout, '');
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});
