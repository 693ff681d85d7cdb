import { appendFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { builtinScenarios } from '../../scenarios/index.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { recordMessages } from '../../src/export/episode-row.ts';
import { ExportError, exportRun, readRun } from '../../src/export/export-run.ts';
import { assistantToAction, joinToolResults } from '../../src/openai/messages.ts';
import { parseAction } from '../../src/parse/parse-action.ts';
import { RecordWriter } from '../../src/record/jsonl.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { calc } from '../openai/fixtures.ts';

const load = (id: string, options: { [key: string]: string }) => loadScenario(id, builtinScenarios, options);

/** A run directory with expert and random calculator episodes (random: bad calls, format errors, wrong answers). */
async function runDir(): Promise<{ dir: string; records: EpisodeRecord[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-export-'));
  const writer = new RecordWriter(join(dir, 'episodes.jsonl'));
  const records: EpisodeRecord[] = [];
  for (const name of ['expert', 'random']) {
    const policy = await calc.policies[name]!({ scenario: calc, seed: 0 });
    const { records: rs } = await rollout({
      scenario: calc,
      policy,
      split: 'train',
      episodes: 6,
      seed: 5,
      group: 2,
      indexOffset: records.length,
    } as never);
    for (const r of rs) {
      writer.write(r);
      records.push(r);
    }
  }
  writer.close();
  return { dir, records };
}

/** The row's messages say what the record says: same actions, same observations, prompt first. */
function assertMessagesMatch(t: import('ava').ExecutionContext, messages: any[], record: EpisodeRecord): void {
  t.deepEqual(
    messages.slice(0, record.prompt.length).map((m) => ({ role: m.role, content: m.content })),
    record.prompt,
  );
  let at = record.prompt.length;
  for (const turn of record.turns) {
    const a = messages[at++];
    t.is(a.role, 'assistant');
    t.deepEqual(
      parseAction(assistantToAction({ content: a.content, tool_calls: a.tool_calls ?? undefined })),
      turn.action,
    );
    if (turn.observation === null) continue;
    const after: any[] = [];
    while (at < messages.length && messages[at].role !== 'assistant') after.push(messages[at++]);
    if (a.tool_calls) {
      t.true(after.every((m) => m.role === 'tool'));
      t.deepEqual(
        after.map((m) => m.tool_call_id),
        a.tool_calls.map((c: any) => c.id),
      );
      t.is(
        joinToolResults(after.map((m, i) => ({ name: a.tool_calls[i].function.name, content: m.content }))),
        turn.observation,
      );
    } else {
      t.deepEqual(after, [{ role: 'user', content: turn.observation, tool_calls: null, tool_call_id: null }]);
    }
  }
  t.is(at, messages.length);
}

test('parquet export: read back with a parquet reader, one row per record, equal to the records', async (t) => {
  const { dir } = await runDir();
  // The records as the run holds them (JSON has no -0, so a process reward of -0 reads back as 0).
  const records = await readRun(dir);
  const out = join(dir, 'export', 'episodes.parquet');
  const result = await exportRun({ runDir: dir, format: 'parquet', out, loadScenario: load });
  t.is(result.rows, records.length);
  const buf = readFileSync(out);
  const file = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  t.is(Number(parquetMetadata(file).num_rows), records.length);
  const rows = (await parquetReadObjects({ file })) as any[];
  t.is(rows.length, records.length);
  const tools = openAITools(calc);
  rows.forEach((row, i) => {
    const r = records[i]!;
    t.is(row.episode_id, r.episodeId);
    t.is(row.run_id, r.runId);
    t.is(row.task_id, r.task.id);
    t.is(row.split, r.task.split);
    t.is(row.group, r.group);
    t.is(row.sample, r.sample);
    t.is(row.seed, r.seed);
    t.is(row.index, r.index);
    t.is(row.scenario, 'calculator');
    t.is(row.policy, r.policy.id);
    t.deepEqual(row.rewards, { outcome: r.outcome.reward, process: r.processReward, total: r.totalReward });
    t.deepEqual(
      row.turn_rewards,
      r.turns.map((x) => x.reward),
    );
    t.is(row.success, r.outcome.success);
    t.is(row.end_reason, r.endReason);
    t.is(row.answer, r.answer);
    const rowTools = typeof row.tools === 'string' ? JSON.parse(row.tools) : row.tools;
    t.deepEqual(rowTools, tools);
    // The nested messages column equals the conversion of the record, and says what the record says.
    t.deepEqual(row.messages, recordMessages(r));
    assertMessagesMatch(t, row.messages, r);
  });
  t.true(
    records.some((r) => r.turns.some((x) => x.action.kind === 'invalid')),
    'the run has format errors',
  );
  t.true(records.some((r) => r.outcome.success));
});

test('messages export: one JSON row per line with OpenAI tool calls and tool results', async (t) => {
  const { dir, records } = await runDir();
  const out = join(dir, 'episodes.messages.jsonl');
  await exportRun({ runDir: join(dir, 'episodes.jsonl'), format: 'messages', out, loadScenario: load });
  const rows = readFileSync(out, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  t.is(rows.length, records.length);
  const expert = rows[0];
  t.deepEqual(
    expert.messages.map((m: any) => m.role),
    ['system', 'user', 'assistant', 'tool', 'assistant'],
  );
  t.is(expert.messages[2].content, null);
  t.is(expert.messages[2].tool_calls[0].type, 'function');
  t.deepEqual(JSON.parse(expert.messages[2].tool_calls[0].function.arguments), {
    expression: records[0]!.task.meta!.expression,
  });
  t.is(expert.messages[3].tool_call_id, expert.messages[2].tool_calls[0].id);
  t.is(expert.tools[0].function.name, 'calculate');
  rows.forEach((row, i) => assertMessagesMatch(t, row.messages, records[i]!));
});

test('export errors: no records, corrupt lines, unknown format, a scenario that cannot be loaded', async (t) => {
  const empty = mkdtempSync(join(tmpdir(), 'agent-r1-export-empty-'));
  await t.throwsAsync(readRun(empty), { instanceOf: ExportError, message: /no records at .*episodes\.jsonl/ });
  const { dir } = await runDir();
  await t.throwsAsync(exportRun({ runDir: dir, format: 'csv' as never, out: join(dir, 'x'), loadScenario: load }), {
    instanceOf: ExportError,
    message: /unknown format "csv"; valid: messages, parquet/,
  });
  await t.throwsAsync(
    exportRun({
      runDir: dir,
      format: 'parquet',
      out: join(dir, 'x'),
      loadScenario: () => Promise.reject(new Error('gone')),
    }),
    {
      instanceOf: ExportError,
      message: /cannot load scenario "calculator" for its tools: gone/,
    },
  );
  appendFileSync(join(dir, 'episodes.jsonl'), '{"not": "a record"}\n');
  await t.throwsAsync(exportRun({ runDir: dir, format: 'parquet', out: join(dir, 'x'), loadScenario: load }), {
    instanceOf: ExportError,
    message: /1 corrupt record line/,
  });
});

test('a step-level run exports one row per step: what the step was shown, then its action', async (t) => {
  const grid = await load('gridworld', {});
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-export-steps-'));
  const policy = await grid.policies.expert!({ scenario: grid, seed: 0 });
  const { records } = await rollout({
    scenario: grid,
    policy,
    split: 'train',
    episodes: 3,
    seed: 2,
    config: { context: 'window:1' },
  });
  const writer = new RecordWriter(join(dir, 'episodes.jsonl'));
  for (const r of records) writer.write(r);
  writer.close();
  const steps = records.reduce((n, r) => n + r.turns.length, 0);
  for (const format of ['messages', 'parquet'] as const) {
    const out = join(dir, `export.${format === 'parquet' ? 'parquet' : 'jsonl'}`);
    const result = await exportRun({ runDir: dir, format, out, loadScenario: load });
    t.is(result.rows, steps);
    const rows: any[] =
      format === 'parquet'
        ? await parquetReadObjects({ file: new Uint8Array(readFileSync(out)).buffer })
        : readFileSync(out, 'utf8')
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l));
    const first = records[0]!;
    const mine = rows.filter((r) => r.episode_id === first.episodeId);
    t.deepEqual(
      mine.map((r) => Number(r.step)),
      first.turns.map((_, i) => i),
    );
    // Step 3 of a window of one: the prompt, the previous action and its result, then its own action.
    const row = mine[3]!;
    t.deepEqual(
      row.messages.map((m: { role: string }) => m.role),
      ['system', 'user', 'assistant', 'tool', 'assistant'],
    );
    t.is(row.messages.at(-1).tool_calls[0].function.name, JSON.parse(/\{.*\}/.exec(first.turns[3]!.text)![0]).name);
    t.deepEqual(row.turn_rewards.map(Number), [first.turns[3]!.reward]);
  }
});
