import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { cli, repoRoot } from '../helpers/cli.ts';
import { npmInstall, run, userEnv } from '../helpers/user-shell.ts';

// A scenario author's first hour, outside the repository: `scenario init` into a temp folder, npm
// install of the package the ordinary way (an `npm pack` tarball of this checkout), and every
// command on the new scenario. npm installs from its cache first (--prefer-offline): everything
// needed is among this package's own dependencies. (docs/scenarios.md's commands, run by
// test/docs/scenarios-doc.slow.test.ts, take the other route: the checkout as a file: dependency.)

const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'agent-r1-author-')));
let tarball = '';
const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));

/** The project's own agent-r1 (node_modules/.bin), as `npx agent-r1` runs it. */
const agentR1 = (project: string, args: string[]) => run('npx', ['agent-r1', ...args], project, 5 * 60_000);

test.before(() => {
  // What npm pack's `prepare` would do (install scripts are off in userEnv): a fresh dist/ for the
  // tarball. `npm run test:slow` has built it before any test starts; rebuilding here (clean, then
  // tsc) would leave other files' tests without dist/ for a while, so this builds only when stale.
  const built = run('node', ['bin/stale-sources.js', '--build'], repoRoot, 5 * 60_000);
  if (built.code !== 0) throw new Error(`building dist/ failed: ${built.all}`);
  const packed = run('npm', ['pack', '--pack-destination', scratch], repoRoot, 5 * 60_000);
  if (packed.code !== 0) throw new Error(`npm pack failed: ${packed.all}`);
  tarball = join(scratch, readdirSync(scratch).find((f) => f.endsWith('.tgz'))!);
});

test.serial(
  'world-machine template from an npm pack tarball: check, test, rollout 0/2 workers, replay, report, view, moved',
  async (t) => {
    t.timeout(25 * 60_000);
    const project = join(scratch, 'thermostat');
    const init = cli(['scenario', 'init', project, '--package', tarball]);
    t.is(init.code, 0, init.stderr);
    const installed = npmInstall(project);
    t.is(installed.code, 0, installed.all);

    const check = agentR1(project, ['scenario', 'check', '.']);
    t.is(check.code, 0, check.all);
    t.regex(check.stdout, /^\.: no problems\n/);
    t.regex(check.stdout, /played here and in a fresh worker thread: identical bytes; .*: verified; success 6\/6/);
    // The installed package ships its templates: its own scenario init works, on the registry's version.
    const second = agentR1(project, ['scenario', 'init', join(scratch, 'second'), '--template', 'minimal', '--json']);
    t.is(second.code, 0, second.all);
    t.like(JSON.parse(second.stdout.trim().split('\n').at(-1)!), { template: 'minimal', dependency: `^${version}` });
    const tested = run('npm', ['test'], project, 5 * 60_000);
    t.is(tested.code, 0, tested.all);
    const typed = run('npm', ['run', 'typecheck'], project, 5 * 60_000);
    t.is(typed.code, 0, typed.all);

    for (const workers of ['0', '2']) {
      const r = agentR1(project, [
        'rollout',
        '--scenario',
        '.',
        '--policy',
        'expert',
        '--episodes',
        '12',
        '--workers',
        workers,
        '--out',
        `runs/w${workers}`,
      ]);
      t.is(r.code, 0, r.all);
    }
    const w0 = readFileSync(join(project, 'runs/w0/episodes.jsonl'), 'utf8');
    t.is(readFileSync(join(project, 'runs/w2/episodes.jsonl'), 'utf8'), w0, '0 and 2 workers: the same bytes');
    t.true(
      w0
        .trim()
        .split('\n')
        .every((line) => JSON.parse(line).scenario.source === project),
    );

    // The records name this folder; it runs when named (--scenario .), never on a record's word.
    const untrusted = agentR1(project, ['replay', 'runs/w0/episodes.jsonl']);
    t.is(untrusted.code, 2);
    t.regex(untrusted.stderr, /which you have not named: .*\(--scenario .*thermostat, after reading it\)/);
    const replay = agentR1(project, ['replay', 'runs/w0/episodes.jsonl', '--scenario', '.', '--json']);
    t.is(replay.code, 0, replay.all);
    t.like(JSON.parse(replay.stdout.trim().split('\n').at(-1)!), { episodes: 12, verified: 12, diverged: 0 });
    const report = agentR1(project, ['report', 'runs/w0', '--scenario', '.']);
    t.is(report.code, 0, report.all);
    const html = readFileSync(join(project, 'runs/w0/report.html'), 'utf8');
    t.regex(html, /world machine hvac: states named/);
    t.regex(html, /replay verified/);

    // The viewer, as a user starts it; its episode page draws the world machine and the verdict.
    const viewer = spawn(
      process.execPath,
      [join(project, 'node_modules/.bin/agent-r1'), 'view', 'runs/w0', '--scenario', '.', '--port', '0'],
      { cwd: project, env: userEnv },
    );
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        viewer.stdout.on('data', (c) => {
          out += c;
          const m = /viewer: (http:\/\/\S+?)\/?\n/.exec(out);
          if (m) resolve(m[1]!);
        });
        viewer.once('exit', (code) => reject(new Error(`view exited ${code}`)));
      });
      const page = await (await fetch(`${url}/run/0/episode/0`)).text();
      t.regex(page, /world machine hvac/);
      t.regex(page, /replay verified/);
    } finally {
      viewer.kill('SIGTERM');
    }

    // Moved: the records' folder is gone; replay says how to point at the new place.
    const moved = join(scratch, 'thermostat-moved');
    renameSync(project, moved);
    const lost = agentR1(moved, ['replay', 'runs/w0/episodes.jsonl']);
    t.is(lost.code, 2);
    t.regex(
      lost.stderr,
      /was loaded from .*thermostat, which is not a folder with an index\.ts any more: pass --scenario DIR/,
    );
    const found = agentR1(moved, ['replay', 'runs/w0/episodes.jsonl', '--scenario', '.', '--quiet']);
    t.is(found.code, 0, found.all);
    t.regex(found.stdout, /12 episodes: 12 verified, 0 diverged/);
  },
);

test.serial(
  'mcp template from an npm pack tarball: npm install brings the server; check, test, rollout, replay with no server',
  async (t) => {
    t.timeout(25 * 60_000);
    const project = join(scratch, 'facts');
    const init = cli(['scenario', 'init', project, '--template', 'mcp', '--package', tarball]);
    t.is(init.code, 0, init.stderr);
    const installed = npmInstall(project);
    t.is(installed.code, 0, installed.all);
    const check = agentR1(project, ['scenario', 'check', '.']);
    t.is(check.code, 0, check.all);
    t.regex(check.stdout, /^\.: no problems\n/);
    const tested = run('npm', ['test'], project, 10 * 60_000);
    t.is(tested.code, 0, tested.all);
    const typed = run('npm', ['run', 'typecheck'], project, 5 * 60_000);
    t.is(typed.code, 0, typed.all);
    const rolled = agentR1(project, [
      'rollout',
      '--scenario',
      '.',
      '--policy',
      'expert',
      '--episodes',
      '8',
      '--workers',
      '2',
      '--out',
      'runs/expert',
    ]);
    t.is(rolled.code, 0, rolled.all);
    for (const flags of [[], ['--live-tools']]) {
      const replay = agentR1(project, ['replay', 'runs/expert/episodes.jsonl', '--scenario', '.', '--json', ...flags]);
      t.is(replay.code, 0, replay.all);
      t.like(JSON.parse(replay.stdout.trim().split('\n').at(-1)!), { episodes: 8, verified: 8, diverged: 0 });
    }
  },
);
