import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import test from 'ava';
import { RecordWriter } from '../../src/record/jsonl.ts';
import { loadScenario, withSource } from '../../src/scenario/load.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { ViewerApp } from '../../src/view/server.ts';
import { calculator } from '../../scenarios/calculator/index.ts';
import { cli, repoRoot } from '../helpers/cli.ts';

// A scenario folder of one's own (the world-machine template, which imports 'agent-r1-ts' by name):
// its records name the folder; replay, report, the viewer and export load it when the user names it
// (--scenario DIR), never on a record's word (test/cli/trust.test.ts).
const FOLDER = 'scenarios/templates/world-machine';
const scratch = mkdtempSync(join(tmpdir(), 'agent-r1-folder-'));
const run = join(scratch, 'run');
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));

test.serial(
  'a folder scenario: rolled out, its records name the folder; replay, report and export load it when named',
  (t) => {
    const out = cli([
      'rollout',
      '--scenario',
      FOLDER,
      '--policy',
      'expert',
      '--episodes',
      '3',
      '--workers',
      '0',
      '--out',
      run,
    ]);
    t.is(out.code, 0, out.stderr);
    const lines = readFileSync(join(run, 'episodes.jsonl'), 'utf8').trim().split('\n');
    t.true(lines.every((l) => JSON.parse(l).scenario.source === resolve(repoRoot, FOLDER)));
    const replay = cli(['replay', join(run, 'episodes.jsonl'), '--scenario', FOLDER, '--json']);
    t.is(replay.code, 0, replay.stderr);
    t.like(replay.lastJson(), { episodes: 3, verified: 3 });
    const report = cli(['report', run, '--scenario', FOLDER, '--out', join(scratch, 'report.html')]);
    t.is(report.code, 0, report.stderr);
    const html = readFileSync(join(scratch, 'report.html'), 'utf8');
    t.regex(html, /world machine hvac: states named/, 'the world machine is drawn');
    t.regex(html, /replay verified/);
    t.notRegex(html, /could not be loaded/);
    const exported = cli([
      'export',
      run,
      '--scenario',
      FOLDER,
      '--format',
      'messages',
      '--out',
      join(scratch, 'rows.jsonl'),
    ]);
    t.is(exported.code, 0, exported.stderr);
  },
);

test.serial('the viewer draws a folder scenario world machine and shows its replay verdict', async (t) => {
  const app = new ViewerApp([run], {}, [FOLDER]);
  const page = await app.handle('/run/0/episode/0', new URLSearchParams());
  t.is(page.status, 200);
  t.regex(page.body, /world machine hvac/);
  t.regex(page.body, /replay verified/);
});

test.serial('a moved folder: replay says to pass --scenario DIR (exit 2), and with it verifies', async (t) => {
  const scenario = withSource(await loadScenario(FOLDER, {}), join(scratch, 'gone'));
  const { records } = await rollout({
    scenario,
    policy: await scenario.policies.expert!({ scenario, seed: 0 }),
    split: 'dev',
    episodes: 2,
    seed: 3,
  });
  const moved = join(scratch, 'moved');
  const file = join(moved, 'episodes.jsonl');
  const writer = new RecordWriter(file);
  for (const r of records) writer.write(r);
  writer.close();
  const lost = cli(['replay', file]);
  t.is(lost.code, 2);
  t.regex(
    lost.stderr,
    /scenario thermostat was loaded from .*gone, which is not a folder with an index\.ts any more: pass --scenario DIR/,
  );
  const found = cli(['replay', file, '--scenario', FOLDER, '--json']);
  t.is(found.code, 0, found.stderr);
  t.like(found.lastJson(), { verified: 2, diverged: 0 });
  const lostPage = await new ViewerApp([moved], {}).handle('/run/0/episode/0', new URLSearchParams());
  t.regex(lostPage.body, /pass --scenario DIR/);
  const foundPage = await new ViewerApp([moved], {}, FOLDER).handle('/run/0/episode/0', new URLSearchParams());
  t.regex(foundPage.body, /replay verified/);
  t.regex(foundPage.body, /world machine hvac/);
});

test('built-in records do not name a folder (their bytes are as before); an unknown name says how to pass one', async (t) => {
  const scenario: Scenario = calculator;
  const { records } = await rollout({
    scenario,
    policy: await scenario.policies.expert!({ scenario, seed: 0 }),
    split: 'train',
    episodes: 1,
    seed: 0,
  });
  t.deepEqual(Object.keys(records[0]!.scenario).sort(), ['id', 'options', 'version']);
  await t.throwsAsync(loadScenario('thermostatt', { calculator: async () => ({ default: calculator }) }), {
    message:
      /unknown scenario "thermostatt"; valid: calculator; or a scenario folder of your own: its path, e\.g\. \.\/my-scenario/,
  });
});
