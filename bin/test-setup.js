// The first step of `npm test` (and, with --slow, of `npm run test:slow` and .ci/run): the Debian
// packages the tests run beside the npm ones. redis-server (the job queue's tests start their own),
// python3-websockets (the Python example client's test runs on Debian's interpreter), python3-numpy and
// python3-jinja2 (test/oracles: a reference forward written from Transformers' equations, and
// apply_chat_template as Transformers renders it); for the slow suite also Mesa's EGL with its software
// driver (libegl1, libegl-mesa0, libgl1-mesa-dri: the webgpu backend's slow test runs Dawn's OpenGL ES
// backend on llvmpipe). Those missing are installed with apt-get when this user may (root, or
// passwordless sudo); otherwise it stops at once with the one line to run, rather than leave a test
// to fail deep inside. AGENT_R1_TEST_SETUP=check-only: never install, only stop with that line.
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Python modules the tests import from /usr/bin/python3, with the Debian package of each. */
const PYTHON_MODULES = { websockets: 'python3-websockets', numpy: 'python3-numpy', jinja2: 'python3-jinja2' };
/** The slow suite's shared libraries, as Debian packages (checked with dpkg-query). */
const SLOW_PACKAGES = ['libegl1', 'libegl-mesa0', 'libgl1-mesa-dri'];

/** Where `command` is found on `path` (a PATH value), or null; a name with a slash is checked as it is. */
export function findCommand(command, path = process.env.PATH ?? '') {
  const candidates = command.includes('/') ? [command] : path.split(delimiter).map((dir) => join(dir || '.', command));
  for (const file of candidates) {
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {}
  }
  return null;
}

/** The Debian packages the tests need that this machine lacks (`slow`: the slow suite's too). */
export function missingPackages({ slow = false, path = process.env.PATH ?? '' } = {}) {
  const missing = [];
  // The redis helper (test/helpers/redis.ts) starts AGENT_R1_REDIS_SERVER when it is set.
  if (!findCommand(process.env.AGENT_R1_REDIS_SERVER ?? 'redis-server', path)) missing.push('redis-server');
  // One interpreter for the three imports (numpy alone takes a tenth of a second to start).
  const script = 'import sys\nfor m in sys.argv[1:]:\n  try: __import__(m)\n  except Exception: print(m)';
  const modules = Object.keys(PYTHON_MODULES);
  const python = spawnSync('/usr/bin/python3', ['-c', script, ...modules], { encoding: 'utf8' });
  const failed = python.status === 0 ? python.stdout.split('\n').filter(Boolean) : modules;
  for (const m of failed) missing.push(PYTHON_MODULES[m]);
  if (slow) {
    const dpkg = findCommand('dpkg-query', path);
    for (const pkg of SLOW_PACKAGES) {
      const status = dpkg ? spawnSync(dpkg, ['-W', `-f=\${Status}`, pkg], { encoding: 'utf8' }).stdout : '';
      if (!/ok installed/.test(status ?? '')) missing.push(pkg);
    }
  }
  return missing;
}

/**
 * What to do about `missing`: nothing; install, with `prefix` before apt-get (none as root, `sudo -n`
 * with passwordless sudo); or stop with `message`, which holds the one line to run.
 */
export function decide({ missing, root, sudo, aptGet, checkOnly }) {
  if (missing.length === 0) return { action: 'ready' };
  const asRoot = root || !aptGet ? '' : 'sudo ';
  const line = `${asRoot}apt-get update && ${asRoot}apt-get install -y --no-install-recommends ${missing.join(' ')}`;
  const why = !aptGet
    ? 'there is no apt-get here (the names are Debian packages: install their equivalents)'
    : checkOnly
      ? 'AGENT_R1_TEST_SETUP=check-only'
      : !root && !sudo
        ? 'this user is not root and has no passwordless sudo'
        : null;
  if (why === null) return { action: 'install', prefix: root ? [] : ['sudo', '-n'] };
  return {
    action: 'stop',
    message: `the tests need ${missing.join(', ')}, missing here; not installed (${why}). Run:\n  ${line}\n`,
  };
}

/** Runs apt-get update and install with `prefix`; false when either fails. */
function install(prefix, missing) {
  const run = (args) => {
    const [command, ...rest] = [...prefix, ...args];
    return spawnSync(command, rest, { stdio: 'inherit' }).status === 0;
  };
  return (
    run(['apt-get', 'update', '-qq']) &&
    run([
      'env',
      'DEBIAN_FRONTEND=noninteractive',
      'apt-get',
      'install',
      '-y',
      '-qq',
      '--no-install-recommends',
      ...missing,
    ])
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const slow = process.argv.includes('--slow');
  const missing = missingPackages({ slow });
  const root = process.getuid?.() === 0;
  const decision = decide({
    missing,
    root,
    sudo: !root && findCommand('sudo') !== null && spawnSync('sudo', ['-n', 'true']).status === 0,
    aptGet: findCommand('apt-get') !== null,
    checkOnly: process.env.AGENT_R1_TEST_SETUP === 'check-only',
  });
  if (decision.action === 'stop') {
    process.stderr.write(`test set-up: ${decision.message}`);
    process.exit(1);
  }
  if (decision.action === 'install') {
    process.stderr.write(`test set-up: installing ${missing.join(', ')}\n`);
    const left = install(decision.prefix, missing) ? missingPackages({ slow }) : missing;
    if (left.length > 0) {
      const line = `${root ? '' : 'sudo '}apt-get install -y --no-install-recommends ${left.join(' ')}`;
      process.stderr.write(`test set-up: ${left.join(', ')} still missing after apt-get. Run:\n  ${line}\n`);
      process.exit(1);
    }
  }
}
