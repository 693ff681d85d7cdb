import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative as relativePath, resolve } from 'node:path';
import test from 'ava';
import { builtinScenarios } from '../../scenarios/index.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { sealRecord, serializeRecord } from '../../src/record/record.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadRecordScenario, loadScenario } from '../../src/scenario/load.ts';
import { UntrustedScenarioError } from '../../src/scenario/errors.ts';
import { ViewerApp } from '../../src/view/server.ts';
import { FolderPathError } from '../../src/mcp/errors.ts';
import { writeFolder } from '../../src/mcp/scratch.ts';
import { cli, repoRoot } from '../helpers/cli.ts';

// A record never decides what code runs: a run directory whose records name a scenario folder (here
// one whose import writes a marker file) is read by replay, report, export and the viewer without
// importing that folder, and each says which folder the records name and how to trust it.

const scratch = mkdtempSync(join(tmpdir(), 'agent-r1-trust-'));
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));

const evil = join(scratch, 'evil');
const marker = join(scratch, 'marker');
mkdirSync(evil);
writeFileSync(
  join(evil, 'index.ts'),
  `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'ran');\nexport default { id: 'calculator' };\n`,
);

/** A calculator run whose records were edited to name `source` (or `id`) and resealed: a checksum proves integrity, not authorship. */
async function craftedRun(name: string, edit: (s: EpisodeRecord['scenario']) => EpisodeRecord['scenario']) {
  const scenario = await loadScenario('calculator', builtinScenarios);
  const { records } = await rollout({
    scenario,
    policy: await scenario.policies.expert!({ scenario, seed: 0 }),
    split: 'train',
    episodes: 2,
    seed: 0,
  });
  const dir = join(scratch, name);
  mkdirSync(dir);
  const lines = records.map(({ checksum: _c, ...r }) =>
    serializeRecord(sealRecord({ ...r, scenario: edit(r.scenario) })),
  );
  writeFileSync(join(dir, 'episodes.jsonl'), `${lines.join('\n')}\n`);
  return dir;
}

test.serial(
  'records naming a folder: replay, export, report and view do not import it, and say how to trust it',
  async (t) => {
    const run = await craftedRun('named', (s) => ({ ...s, source: evil }));
    const file = join(run, 'episodes.jsonl');
    const trustHow = new RegExp(`comes from the folder ${evil}, which you have not named.*--scenario ${evil}`);

    const replay = cli(['replay', file]);
    t.is(replay.code, 2, replay.stderr);
    t.regex(replay.stderr, /^error: scenario calculator comes from the folder /);
    t.regex(replay.stderr, trustHow);

    const exported = cli(['export', run, '--format', 'messages', '--out', join(scratch, 'rows.jsonl')]);
    t.is(exported.code, 2, exported.stderr);
    t.regex(exported.stderr, trustHow);
    t.false(existsSync(join(scratch, 'rows.jsonl')));

    const report = cli(['report', run, '--out', join(scratch, 'report.html')]);
    t.is(report.code, 0, report.stderr);
    t.regex(report.stderr, /^warning: scenario calculator comes from the folder /m);
    t.regex(readFileSync(join(scratch, 'report.html'), 'utf8'), /which you have not named/);

    const page = await new ViewerApp([run], builtinScenarios).handle('/run/0/episode/0', new URLSearchParams());
    t.is(page.status, 200);
    t.regex(page.body, /which you have not named/);

    t.false(existsSync(marker), 'the folder the records name was imported');
  },
);

test.serial('a relative folder, or an id that is a path, is not loaded either', async (t) => {
  const relative = await craftedRun('relative', (s) => ({ ...s, source: relativePath(repoRoot, evil) }));
  const fromRoot = cli(['replay', join(relative, 'episodes.jsonl')]);
  t.is(fromRoot.code, 2, fromRoot.stderr);
  t.regex(fromRoot.stderr, /which you have not named/);
  const byId = await craftedRun('by-id', (s) => ({ id: evil, version: s.version, options: s.options }));
  const asId = cli(['replay', join(byId, 'episodes.jsonl')]);
  t.is(asId.code, 2, asId.stderr);
  t.regex(asId.stderr, /unknown scenario ".*evil"/);
  t.false(existsSync(marker));
});

test.serial('the folder the user names is loaded: by its path, or by its id when it moved', async (t) => {
  const template = resolve(repoRoot, 'scenarios/templates/minimal');
  const scenario = await loadRecordScenario({ id: 'crates', options: {} }, builtinScenarios, template);
  const { records } = await rollout({
    scenario,
    policy: await scenario.policies.expert!({ scenario, seed: 0 }),
    split: 'dev',
    episodes: 2,
    seed: 0,
  });
  const dir = join(scratch, 'template-run');
  mkdirSync(dir);
  writeFileSync(join(dir, 'episodes.jsonl'), `${records.map(serializeRecord).join('\n')}\n`);
  const file = join(dir, 'episodes.jsonl');
  const untrusted = cli(['replay', file]);
  t.is(untrusted.code, 2);
  t.regex(untrusted.stderr, /--scenario .*scenarios\/templates\/minimal/);
  const named = cli(['replay', file, '--scenario', 'scenarios/templates/minimal', '--json']);
  t.is(named.code, 0, named.stderr);
  t.like(named.lastJson(), { verified: 2, diverged: 0 });
  // Records that name another path (the folder moved): the named folder with the records' id.
  const moved = records.map(({ checksum: _c, ...r }) =>
    sealRecord({ ...r, scenario: { ...r.scenario, source: '/gone' } }),
  );
  await t.throwsAsync(loadRecordScenario(moved[0]!.scenario, builtinScenarios), {
    message: /was loaded from \/gone, which is not a folder with an index\.ts any more: pass --scenario DIR/,
  });
  t.is((await loadRecordScenario(moved[0]!.scenario, builtinScenarios, template)).source, template);
  const elsewhere = { ...moved[0]!.scenario, source: evil };
  await t.throwsAsync(loadRecordScenario(elsewhere, builtinScenarios, 'calculator'), {
    instanceOf: UntrustedScenarioError,
    message: /; calculator is scenario calculator$/,
  });
});

test.serial("a record's options go to the scenario it names, never to a folder named for other records", async (t) => {
  // The minimal template takes no options; a built-in gridworld record has some.
  const template = resolve(repoRoot, 'scenarios/templates/minimal');
  const grid = await loadRecordScenario({ id: 'gridworld', options: { size: 'large' } }, builtinScenarios, template);
  t.is(grid.id, 'gridworld');
  const moved = await loadRecordScenario({ id: 'crates', options: {}, source: '/gone' }, builtinScenarios, [
    'gridworld',
    template,
  ]);
  t.is(moved.source, template);
});

test.serial("a record's task cannot make replay write outside the episode's folder (the files scenario)", async (t) => {
  const scenario = await loadScenario('files', builtinScenarios);
  const { records } = await rollout({
    scenario,
    policy: await scenario.policies.expert!({ scenario, seed: 0 }),
    split: 'train',
    episodes: 1,
    seed: 0,
  });
  const escaped = join(scratch, 'escaped.txt');
  const { checksum: _c, ...r } = records[0]!;
  const meta = r.task.meta as { initial: { [path: string]: string } };
  const initial = { ...meta.initial, [`../../../../../../..${escaped}`]: 'written by a record\n' };
  const dir = join(scratch, 'files-run');
  mkdirSync(dir);
  // Each crafted line gets its own verdict (a path out of the folder; a NUL in a file name), and the
  // good line after them is still replayed.
  const crafted = (files: { [path: string]: string }) =>
    serializeRecord(sealRecord({ ...r, task: { ...r.task, meta: { ...meta, initial: files } } }));
  const nul = { ...meta.initial, 'a\u0000b.txt': 'x' };
  writeFileSync(
    join(dir, 'episodes.jsonl'),
    `${[crafted(initial), crafted(nul), serializeRecord(records[0]!)].join('\n')}\n`,
  );
  const replay = cli(['replay', join(dir, 'episodes.jsonl'), '--quiet']);
  t.is(replay.code, 1, replay.stderr);
  t.regex(
    replay.stdout,
    /^CORRUPT line 1: episode \S+ cannot be replayed: the path ".*escaped\.txt" leaves the episode's folder: refused$/m,
  );
  t.regex(replay.stdout, /^CORRUPT line 2: episode \S+ cannot be replayed: .*null bytes/m);
  t.regex(replay.stdout, /\n\n1 episodes: 1 verified, 0 diverged, 2 corrupt lines/);
  t.notRegex(replay.stdout, /^verified/m, '--quiet: no line per verified episode');
  t.false(existsSync(escaped));
  await t.throwsAsync(writeFolder(join(scratch, 'w'), { '/etc/x': '' }), { instanceOf: FolderPathError });
  await t.throwsAsync(writeFolder(join(scratch, 'w'), { 'a/../../x': '' }), { instanceOf: FolderPathError });
  await writeFolder(join(scratch, 'w'), { 'a/b.txt': 'ok', 'c/': '' });
  t.is(readFileSync(join(scratch, 'w', 'a', 'b.txt'), 'utf8'), 'ok');
});
