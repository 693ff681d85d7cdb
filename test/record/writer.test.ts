import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { calculator } from '../../scenarios/calculator/index.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadRecords, RecordWriter } from '../../src/record/jsonl.ts';
import { serializeRecord } from '../../src/record/record.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { repoRoot, SOURCE_ARGS } from '../helpers/cli.ts';

const scenario = calculator as Scenario;
let records: EpisodeRecord[];
test.before(async () => {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  records = (await rollout({ scenario, policy, split: 'train', episodes: 60, seed: 3 })).records;
});

const file = () => join(mkdtempSync(join(tmpdir(), 'writer-')), 'episodes.jsonl');
const lines = (path: string) => readFileSync(path, 'utf8').split('\n').filter(Boolean);

test('every record is in the file, in order, once the writer is closed', async (t) => {
  const path = file();
  const writer = new RecordWriter(path);
  for (const r of records) writer.write(r);
  writer.close();
  t.deepEqual(lines(path), records.map(serializeRecord));
  const { records: back, corrupt } = await loadRecords(path);
  t.is(corrupt.length, 0);
  t.deepEqual(
    back.map((r) => r.episodeId),
    records.map((r) => r.episodeId),
  );
});

test('a record waits at most about 100 ms before it reaches the file, and flush writes it at once', async (t) => {
  const path = file();
  const writer = new RecordWriter(path);
  writer.write(records[0]!);
  await sleep(RecordWriter.FLUSH_MS + 150);
  t.is(lines(path).length, 1, 'written by the timer, with the writer still open');
  writer.write(records[1]!);
  writer.flush();
  t.is(lines(path).length, 2);
  writer.close();
});

test('64 KiB of waiting lines are written without waiting for the timer', (t) => {
  const path = file();
  const writer = new RecordWriter(path);
  let bytes = 0;
  let i = 0;
  while (bytes < RecordWriter.FLUSH_BYTES) {
    const r = records[i++ % records.length]!;
    writer.write(r);
    bytes += serializeRecord(r).length + 1;
  }
  t.is(lines(path).length, i);
  writer.close();
});

test('text beyond ASCII is written as UTF-8, byte for byte: short lines, many, and one far over 64 KiB', (t) => {
  const path = file();
  const writer = new RecordWriter(path);
  // Latin-1 (é), the rest of the BMP (—, 東), a surrogate pair (🧭), a lone surrogate (JSON escapes it).
  // Then enough of them that lines of many-byte characters meet the edge of the waiting bytes.
  const texts = ['Café', 'a — b 東京', 'north 🧭', 'lone \ud800 half', `${'x'.repeat(70_000)}é`];
  for (let i = 0; i < 300; i++) texts.push('東🧭é'.repeat(i % 97));
  const written = texts.map((text) => ({ ...records[0]!, answer: text }));
  for (const r of written) writer.write(r);
  writer.close();
  const expected = Buffer.from(written.map((r) => `${serializeRecord(r)}\n`).join(''), 'utf8');
  t.true(readFileSync(path).equals(expected));
  const back = lines(path).map((l) => JSON.parse(l).answer as string);
  t.true(back.every((answer, i) => answer === texts[i]));
});

test("a line's UTF-8 bytes (as a worker thread sends them) are written as they are: the same file as from the records", (t) => {
  const texts = ['Café', 'a — b 東京', `${'x'.repeat(70_000)}é`];
  for (let i = 0; i < 300; i++) texts.push('東🧭é'.repeat(i % 97));
  const written = texts.map((text, i) => ({ ...records[i % records.length]!, answer: text }));
  const [fromRecords, fromBytes, mixed] = [file(), file(), file()];
  const writers = [new RecordWriter(fromRecords), new RecordWriter(fromBytes), new RecordWriter(mixed)];
  const encoder = new TextEncoder();
  written.forEach((r, i) => {
    writers[0]!.write(r);
    writers[1]!.writeLine(encoder.encode(serializeRecord(r)));
    writers[2]!.writeLine(i % 2 ? serializeRecord(r) : encoder.encode(serializeRecord(r)));
  });
  for (const w of writers) w.close();
  t.true(readFileSync(fromBytes).equals(readFileSync(fromRecords)));
  t.true(readFileSync(mixed).equals(readFileSync(fromRecords)));
});

test('end() writes the waiting lines and closes, syncing off this thread: the file close() makes', async (t) => {
  const [closed, ended] = [file(), file()];
  const writers = [new RecordWriter(closed), new RecordWriter(ended)];
  for (const r of records) for (const w of writers) w.write(r);
  writers[0]!.close();
  await writers[1]!.end();
  t.true(readFileSync(ended).equals(readFileSync(closed)));
  t.throws(() => writers[1]!.write(records[0]!), { message: /is closed/ });
  await t.notThrowsAsync(writers[1]!.end());
});

test('a line with a newline in it is refused, as text or as bytes, and the file keeps only whole lines', (t) => {
  const path = file();
  const writer = new RecordWriter(path);
  writer.write(records[0]!);
  t.throws(() => writer.writeLine('{"a":1}\n{"b":2}'), { instanceOf: RangeError, message: /cannot hold a newline/ });
  t.throws(() => writer.writeLine(new TextEncoder().encode('{"a":1}\n')), { message: /cannot hold a newline/ });
  writer.close();
  t.deepEqual(lines(path), [serializeRecord(records[0]!)]);
});

test('appending keeps the lines already in the file', (t) => {
  const path = file();
  const first = new RecordWriter(path);
  first.write(records[0]!);
  first.close();
  const second = new RecordWriter(path, { append: true });
  second.write(records[1]!);
  second.close();
  t.deepEqual(lines(path), [serializeRecord(records[0]!), serializeRecord(records[1]!)]);
});

test('a failed write names the file, whether it happened in flush or in the background', async (t) => {
  // /dev/full answers every write with ENOSPC.
  const writer = new RecordWriter('/dev/full');
  writer.write(records[0]!);
  t.throws(() => writer.flush(), { code: 'ENOSPC', message: /ENOSPC/ });
  writer.write(records[1]!);
  await sleep(RecordWriter.FLUSH_MS + 150);
  const err = t.throws(() => writer.write(records[2]!)) as NodeJS.ErrnoException;
  t.is(err.code, 'ENOSPC');
  t.is(err.path, '/dev/full');
  // The record whose write threw was not taken; the next one is, and close writes it (and fails).
  writer.write(records[3]!);
  t.throws(() => writer.close(), { code: 'ENOSPC' });
  t.throws(() => writer.write(records[4]!), { message: /closed/ });
});

test('a script that never closes its writer still finds every line in the file when it exits', (t) => {
  const path = file();
  const child = spawnSync(
    process.execPath,
    [...SOURCE_ARGS, `${repoRoot}/test/fixtures/write-without-close.ts`, path],
    {
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  t.is(child.status, 0, child.stderr);
  t.is(lines(path).length, 5);
});
