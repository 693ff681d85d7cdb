import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { repoRoot } from '../helpers/cli.ts';
import { run, userEnv } from '../helpers/user-shell.ts';

// docs/scenarios.md cannot go stale: every ```sh block in it runs here, in order, in one shell, in a
// temp folder outside the repository, with `agent-r1` on the PATH as `npm link` would put it (this
// checkout's CLI). The project `scenario init` makes depends on the checkout (a file: dependency).

/** The page's sh blocks, in order. */
function shBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'agent-r1-doc-')));
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));

test.serial("every command in docs/scenarios.md's sh blocks runs and succeeds", (t) => {
  t.timeout(20 * 60_000);
  const blocks = shBlocks(readFileSync(join(repoRoot, 'docs/scenarios.md'), 'utf8'));
  t.true(blocks.length >= 2, 'the page has its commands in sh blocks');
  // The checkout as npm install leaves it: dist/ built (the project links to it). Only when stale:
  // other slow tests use dist/ meanwhile, and a rebuild starts by removing it.
  const built = run('node', ['bin/stale-sources.js', '--build'], repoRoot, 5 * 60_000);
  t.is(built.code, 0, built.all);
  const bin = join(scratch, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'agent-r1'), `#!/bin/sh\nexec "${process.execPath}" "${repoRoot}bin/agent-r1.js" "$@"\n`);
  chmodSync(join(bin, 'agent-r1'), 0o755);
  const work = join(scratch, 'work');
  mkdirSync(work);
  const script = ['set -eu', ...blocks.map((b) => `set -x\n${b}`)].join('\n');
  const env = { ...userEnv, PATH: `${bin}:${process.env.PATH}` };
  const r = spawnSync('bash', ['-c', script], { cwd: work, env, encoding: 'utf8', timeout: 18 * 60_000 });
  t.is(r.status, 0, `${r.stdout}\n${r.stderr}`);
  t.regex(r.stdout, /^\.: no problems$/m);
  t.regex(r.stdout, /20 episodes: 20 verified, 0 diverged, 0 corrupt lines/);
  t.regex(r.stdout, /^report: runs\/expert\/report\.html/m);
  t.regex(r.stdout, /^exported 20 episodes/m);
  t.regex(r.stdout, /^stateDiagram-v2$/m);
});
