import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { parquetReadObjects } from 'hyparquet';
import { cli } from '../helpers/cli.ts';

test.serial('agent-r1 rollout then export --format parquet / messages', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-export-cli-'));
  const run = join(dir, 'run');
  const r = cli([
    'rollout',
    '--scenario',
    'calculator',
    '--policy',
    'expert',
    '--episodes',
    '4',
    '--group',
    '2',
    '--workers',
    '0',
    '--out',
    run,
    '--json',
  ]);
  t.is(r.code, 0, r.stderr);
  const out = join(dir, 'episodes.parquet');
  const e = cli(['export', run, '--format', 'parquet', '--out', out, '--json']);
  t.is(e.code, 0, e.stderr);
  t.is(e.lastJson().rows, 4);
  const buf = readFileSync(out);
  const rows = (await parquetReadObjects({
    file: buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength),
  })) as any[];
  t.deepEqual(
    rows.map((x) => x.group),
    [rows[0].task_id, rows[0].task_id, rows[2].task_id, rows[2].task_id],
  );
  t.true(rows.every((x) => x.success && x.rewards.total === 1));
  const m = cli(['export', join(run, 'episodes.jsonl'), '--format', 'messages', '--out', join(dir, 'm.jsonl')]);
  t.is(m.code, 0, m.stderr);
  t.regex(m.stdout, /exported 4 episodes to .*m\.jsonl/);
  t.is(readFileSync(join(dir, 'm.jsonl'), 'utf8').trim().split('\n').length, 4);
});

test.serial('agent-r1 export usage errors', (t) => {
  const bad = cli(['export', '/tmp', '--format', 'csv', '--out', '/tmp/x']);
  t.is(bad.code, 2);
  t.regex(bad.stderr, /argument 'csv' is invalid. Allowed choices are messages, parquet/);
  const noOut = cli(['export', '/tmp', '--format', 'parquet']);
  t.is(noOut.code, 2);
  const empty = cli([
    'export',
    mkdtempSync(join(tmpdir(), 'agent-r1-empty-')),
    '--format',
    'parquet',
    '--out',
    '/tmp/x.parquet',
  ]);
  t.is(empty.code, 1);
  t.regex(empty.stderr, /no records at/);
});
