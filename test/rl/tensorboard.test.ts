import { crc32c } from '@aws-crypto/crc32c';
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../../src/rl/config.ts';
import { EventMessage, histogramOf, maskedCrc32c, numericFields } from '../../src/rl/tensorboard.ts';
import { train } from '../../src/rl/trainer.ts';
import { BigramPolicy, toyScenario } from './toy.ts';

interface DecodedEvent {
  wall_time: number;
  step: number;
  file_version?: string;
  summary?: { value: Array<{ tag: string; simple_value?: number; histo?: { num: number; bucket: number[] } }> };
}

/** Reads a TFRecord file as TensorBoard does, checking the framing and both CRCs of every record. */
function readEvents(path: string): DecodedEvent[] {
  const bytes = readFileSync(path);
  // The mask, written out here from TensorFlow's definition (crc rotated right by 15, plus a constant).
  const mask = (data: Uint8Array) => {
    const crc = crc32c(data);
    return (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0;
  };
  const events: DecodedEvent[] = [];
  for (let at = 0; at < bytes.length; ) {
    const length = Number(bytes.readBigUInt64LE(at));
    if (bytes.readUInt32LE(at + 8) !== mask(bytes.subarray(at, at + 8))) throw new Error(`bad length CRC at ${at}`);
    const data = bytes.subarray(at + 12, at + 12 + length);
    if (bytes.readUInt32LE(at + 12 + length) !== mask(data)) throw new Error(`bad data CRC at ${at}`);
    const event = EventMessage.toObject(EventMessage.decode(data), { longs: Number, defaults: true, oneofs: true });
    events.push(event as DecodedEvent);
    at += 12 + length + 4;
  }
  return events;
}

test('CRC32C is the Castagnoli CRC, masked as TFRecord masks it', (t) => {
  t.is(crc32c(Buffer.from('123456789')), 0xe3069283); // the standard check value
  const data = Buffer.from('agent-r1');
  const crc = crc32c(data);
  t.is(maskedCrc32c(data), (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0);
});

test('histograms count every finite value once; nested metrics become slash-separated tags', (t) => {
  const h = histogramOf([0, 1, 1, 2, 3, Number.NaN, 10], 5)!;
  t.is(h.num, 6);
  t.is(
    h.bucket.reduce((a, b) => a + b, 0),
    6,
  );
  t.deepEqual([h.min, h.max, h.sum], [0, 10, 17]);
  t.is(h.bucket_limit.at(-1), 10);
  t.deepEqual(histogramOf([2, 2])!.bucket, [2]);
  t.is(histogramOf([Number.NaN]), null);
  t.deepEqual(numericFields({ a: 1, b: { c: 2, d: 'x' }, e: true, f: [1] }), [
    ['a', 1],
    ['b/c', 2],
    ['e', 1],
  ]);
});

test('a training run writes TensorBoard events that read back to its metrics, with reward and advantage histograms', async (t) => {
  const out = await mkdtemp(join(tmpdir(), 'agent-r1-tb-'));
  const config = resolveConfig({
    algo: 'grpo',
    seed: 7,
    steps: 3,
    tasksPerStep: 4,
    group: 4,
    minibatch: 16,
    epochs: 1,
    lr: 1,
    evalEvery: 3,
    evalEpisodes: 8,
    checkpointEvery: 3,
    taskPool: 16,
  });
  await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: out });
  const files = readdirSync(join(out, 'tb'));
  t.is(files.length, 1);
  t.regex(files[0]!, /^events\.out\.tfevents\.\d+\./);
  const events = readEvents(join(out, 'tb', files[0]!));
  t.is(events[0]!.file_version, 'brain.Event:2');

  const metrics = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const scalars = new Map<string, number>();
  const histograms = new Map<string, number>();
  for (const e of events.slice(1))
    for (const v of e.summary!.value) {
      if (v.histo) histograms.set(`${e.step}:${v.tag}`, v.histo.num);
      else scalars.set(`${e.step}:${v.tag}`, v.simple_value!);
    }
  for (const row of metrics) {
    const { kind, step, ...rest } = row;
    const prefix = kind === 'eval' ? `eval/${row.split}/` : '';
    const fields = numericFields(rest, prefix);
    t.true(fields.length > 5);
    // simple_value is a float: the metric rounded to single precision
    for (const [tag, value] of fields) t.is(scalars.get(`${step}:${tag}`), Math.fround(value), `${step}:${tag}`);
  }
  for (const step of [1, 2, 3]) {
    t.is(histograms.get(`${step}:reward`), 16, 'one reward per episode');
    t.true(histograms.get(`${step}:advantage`)! > 0, 'advantages of the action tokens');
  }
});
