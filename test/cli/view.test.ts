import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, cliArgs, repoRoot } from '../helpers/cli.ts';

const runDir = mkdtempSync(join(tmpdir(), 'view-cli-'));

test.before(() => {
  const made = cli([
    'rollout',
    '--scenario',
    'calculator',
    '--policy',
    'expert',
    '--episodes',
    '4',
    '--out',
    runDir,
    '--json',
  ]);
  if (made.code !== 0) throw new Error(made.stderr);
});

test.after.always(() => rmSync(runDir, { recursive: true, force: true }));

test.serial('agent-r1 report writes one HTML file; a missing directory is a clear error', (t) => {
  const out = join(runDir, 'share', 'report.html');
  const ok = cli(['report', runDir, '--out', out, '--no-replay']);
  t.is(ok.code, 0, ok.stderr);
  t.true(existsSync(out));
  t.regex(readFileSync(out, 'utf8'), /<svg[\s\S]*data-example="best"/);
  const bad = cli(['report', join(runDir, 'nope')]);
  t.is(bad.code, 1);
  t.regex(bad.stderr, /error: run directory .* does not exist/);
});

test.serial('agent-r1 view warns on stderr when --host exposes it; a missing directory is an error', async (t) => {
  const child = spawn(process.execPath, cliArgs(['view', runDir, '--port', '0', '--host', '0.0.0.0']), {
    cwd: repoRoot,
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (c) => {
        stdout += c;
        const m = /viewer: (http:\/\/\S+?)\/?\n/.exec(stdout);
        if (m) resolve(m[1]!);
      });
      child.once('exit', (code) => reject(new Error(`view exited ${code}: ${stderr}`)));
    });
    t.regex(stderr, /warning: binding to 0\.0\.0\.0/);
    const port = new URL(url).port;
    const res = await fetch(`http://127.0.0.1:${port}/run/0`);
    t.is(res.status, 200);
    t.regex(await res.text(), /calc-/);
  } finally {
    child.kill('SIGTERM');
  }
  const local = cli(['view', join(runDir, 'nope')]);
  t.is(local.code, 1);
  t.regex(local.stderr, /does not exist/);
});

test.serial('every page docs/viewer.md lists is served at the address it gives', async (t) => {
  const doc = readFileSync(join(repoRoot, 'docs/viewer.md'), 'utf8');
  const pages = [...doc.matchAll(/`(\/(?:api\/)?run\/[^`]*)`/g)].map((m) => m[1]!);
  t.true(pages.length >= 5, pages.join(' '));
  const record = JSON.parse(readFileSync(join(runDir, 'episodes.jsonl'), 'utf8').split('\n')[0]!);
  // Two runs, so that the second's address (/run/1) is served too.
  const child = spawn(process.execPath, cliArgs(['view', runDir, runDir, '--port', '0']), { cwd: repoRoot });
  let stdout = '';
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (c) => {
        stdout += c;
        const m = /viewer: (http:\/\/\S+?)\/?\n/.exec(stdout);
        if (m) resolve(m[1]!);
      });
      child.once('exit', (code) => reject(new Error(`view exited ${code}`)));
    });
    for (const page of pages) {
      // The placeholders: an episode number, a group key and a policy version of the run.
      const path = page
        .replace('?…', '')
        .replace(/\/N$/, '/0')
        .replace('key=G', `key=${encodeURIComponent(record.group ?? '')}`)
        .replace('policy=V', `policy=${encodeURIComponent(record.policy.version)}`);
      const res = await fetch(`${url}${path}`);
      t.is(res.status, 200, `${page} (${path})`);
    }
  } finally {
    child.kill('SIGTERM');
  }
});
