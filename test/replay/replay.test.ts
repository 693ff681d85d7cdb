import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { calculator } from '../../scenarios/calculator/index.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadRecords, RecordWriter } from '../../src/record/jsonl.ts';
import { parseRecordLine, sealRecord, serializeRecord } from '../../src/record/record.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { CorruptRecordError } from '../../src/core/errors.ts';
import { cli } from '../helpers/cli.ts';
import { builtinScenarios } from '../../scenarios/index.ts';
import { loadScenario } from '../../src/scenario/load.ts';

const scenario = calculator as unknown as Scenario;

async function randomRun(episodes: number, seed = 7) {
  const policy = await scenario.policies.random!({ scenario, seed });
  return rollout({ scenario, policy, split: 'train', episodes, seed });
}

function writeRun(records: EpisodeRecord[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-replay-'));
  const writer = new RecordWriter(join(dir, 'episodes.jsonl'));
  for (const r of records) writer.write(r);
  writer.close();
  return join(dir, 'episodes.jsonl');
}

test('200 random-policy calculator episodes round-trip through records and replay, all verified', async (t) => {
  const { records } = await randomRun(200);
  const file = writeRun(records);
  const { records: read, corrupt } = await loadRecords(file);
  t.is(corrupt.length, 0);
  t.is(read.length, 200);
  // The random policy really exercises the error paths.
  t.true(read.some((r) => r.turns.some((x) => x.action.kind === 'invalid')));
  t.true(read.some((r) => r.turns.some((x) => x.results.some((y) => !y.ok))));
  for (const record of read) {
    const result = await replayRecord(record, scenario);
    t.true(result.verified, `${record.episodeId}: ${JSON.stringify(result.divergence)}`);
  }
});

test('a record with one observation changed fails replay at that turn and field', async (t) => {
  const { records } = await randomRun(20);
  const victim = records.find((r) => r.turns.length >= 2 && r.turns[1]!.observation !== null)!;
  const { checksum: _c, ...rest } = structuredClone(victim);
  rest.turns[1]!.observation = 'something else';
  const tampered = sealRecord(rest);
  const result = await replayRecord(tampered, scenario);
  t.false(result.verified);
  t.is(result.divergence!.turn, 1);
  t.is(result.divergence!.field, 'observation');
  t.is(result.divergence!.expected, 'something else');
});

test('a record of another scenario version diverges at the scenario, naming both versions, before anything it caused', async (t) => {
  const { records } = await randomRun(3);
  const { checksum: _c, ...rest } = structuredClone(records[0]!);
  rest.scenario = { ...rest.scenario, version: '9.9.9' };
  const result = await replayRecord(sealRecord(rest), scenario);
  t.false(result.verified);
  t.like(result.divergence, { turn: null, field: 'scenario' });
  t.is((result.divergence!.expected as { version: string }).version, '9.9.9');
  t.is((result.divergence!.actual as { version: string }).version, records[0]!.scenario.version);
});

test('a record whose options were changed and resealed diverges at its task (gridworld: a small map claimed as large)', async (t) => {
  const small = (await loadScenario('gridworld', builtinScenarios, {})) as Scenario;
  const large = (await loadScenario('gridworld', builtinScenarios, { size: 'large' })) as Scenario;
  const expert = await small.policies.expert!({ scenario: small, seed: 0 });
  const { records } = await rollout({ scenario: small, policy: expert, split: 'train', episodes: 2, seed: 3 });
  t.true((await replayRecord(records[0]!, small)).verified);
  const { checksum: _c, ...rest } = structuredClone(records[0]!);
  rest.scenario = { ...rest.scenario, options: { size: 'large' } };
  const result = await replayRecord(sealRecord(rest), large);
  t.false(result.verified);
  t.like(result.divergence, { turn: null, field: 'task' });
  t.regex(
    String(result.divergence!.actual),
    /scenario gridworld with options \{"size":"large"\} makes no task grid-train-s3-/,
  );
  // A task edited within its scenario's ids is caught the same way.
  const { checksum: _d, ...edited } = structuredClone(records[1]!);
  edited.task = { ...edited.task, question: 'another question' };
  t.like((await replayRecord(sealRecord(edited), small)).divergence, { field: 'task' });
});

test('a line edited without updating its checksum is reported as corrupt', async (t) => {
  const { records } = await randomRun(3);
  const line = serializeRecord(records[0]!).replace('"totalReward":', '"totalReward":1e9,"x":');
  t.throws(() => parseRecordLine(line, 4), { instanceOf: CorruptRecordError, message: /line 4: / });
  const edited = serializeRecord(records[0]!).replace(/"question":"[^"]*"/, '"question":"edited"');
  t.throws(() => parseRecordLine(edited, 1), { message: /checksum mismatch/ });
});

test.serial(
  'replay CLI: all verified exits 0; a truncated last line is reported with its line number and the rest still verify',
  async (t) => {
    const { records } = await randomRun(10);
    const file = writeRun(records);
    const ok = cli(['replay', file, '--json']);
    t.is(ok.code, 0, ok.stderr);
    t.like(ok.lastJson(), { episodes: 10, verified: 10, diverged: 0, corrupt: 0 });

    const text = readFileSync(file, 'utf8');
    writeFileSync(file, text.slice(0, text.length - 200));
    const cut = cli(['replay', file, '--json']);
    t.is(cut.code, 1);
    const summary = cut.lastJson();
    t.like(summary, { episodes: 9, verified: 9, diverged: 0, corrupt: 1 });
    t.is(summary.problems[0].line, 10);
    t.regex(summary.problems[0].error, /^line 10: not valid JSON/);
  },
);

test.serial('replay CLI names the episode, turn and field of a divergence and exits 1', async (t) => {
  const { records } = await randomRun(5);
  const victim = records.findIndex((r) => r.turns.length > 1);
  const { checksum: _c, ...rest } = structuredClone(records[victim]!);
  rest.turns[0]!.reward = 123;
  records[victim] = sealRecord(rest);
  const file = writeRun(records);
  const run = cli(['replay', file, '--quiet']);
  t.is(run.code, 1);
  t.regex(
    run.stdout,
    new RegExp(`DIVERGED ${rest.episodeId.replace('#', '#')} at turn 1, field reward\\n    expected: 123\\n`),
  );
  t.regex(run.stdout, /5 episodes: 4 verified, 1 diverged, 0 corrupt lines/);
  // --quiet prints the divergence and the summary only; without it, each episode and its verdict.
  t.true(run.stdout.startsWith('DIVERGED '), run.stdout);
  t.notRegex(run.stdout, /^verified /m);
  const full = cli(['replay', file]);
  t.is(full.stdout.match(/^verified /gm)?.length, 4);
});
