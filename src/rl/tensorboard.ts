import { crc32c } from '@aws-crypto/crc32c';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import protobuf from 'protobufjs';

/**
 * TensorBoard event files, so `tensorboard --logdir runs/` shows a run's curves. An event file is a
 * sequence of TFRecords (length, masked CRC32C of the length, the bytes, masked CRC32C of the bytes),
 * each holding one `Event` protobuf; the messages below are the fields of TensorFlow's event.proto,
 * summary.proto and histogram.proto that scalars and histograms use.
 */
const SCHEMA = `
syntax = "proto3";
message HistogramProto {
  double min = 1;
  double max = 2;
  double num = 3;
  double sum = 4;
  double sum_squares = 5;
  repeated double bucket_limit = 6 [packed = true];
  repeated double bucket = 7 [packed = true];
}
message Summary {
  message Value {
    string tag = 1;
    oneof value {
      float simple_value = 2;
      HistogramProto histo = 5;
    }
  }
  repeated Value value = 1;
}
message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what {
    string file_version = 3;
    Summary summary = 5;
  }
}
`;

const root = protobuf.parse(SCHEMA, { keepCase: true }).root;
/** The Event message type (exported for tests that read event files back). */
export const EventMessage = root.lookupType('Event');

/** CRC32C rotated and offset, as TFRecord stores it (a CRC of data that holds CRCs is weak otherwise). */
export function maskedCrc32c(data: Uint8Array): number {
  const crc = crc32c(data);
  return (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0;
}

/** One TFRecord: the framing around an encoded Event. */
export function tfRecord(data: Uint8Array): Buffer {
  const header = Buffer.alloc(12);
  header.writeBigUInt64LE(BigInt(data.length), 0);
  header.writeUInt32LE(maskedCrc32c(header.subarray(0, 8)), 8);
  const footer = Buffer.alloc(4);
  footer.writeUInt32LE(maskedCrc32c(data), 0);
  return Buffer.concat([header, data, footer]);
}

export interface Histogram {
  min: number;
  max: number;
  num: number;
  sum: number;
  sum_squares: number;
  bucket_limit: number[];
  bucket: number[];
}

/** Equal-width buckets over [min, max] (one bucket when every value is the same). */
export function histogramOf(values: readonly number[], buckets = 30): Histogram | null {
  const finite = values.filter(Number.isFinite);
  if (finite.length === 0) return null;
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let sumSquares = 0;
  for (const v of finite) {
    min = Math.min(min, v);
    max = Math.max(max, v);
    sum += v;
    sumSquares += v * v;
  }
  const n = max > min ? buckets : 1;
  const width = (max - min) / n;
  const bucket = new Array<number>(n).fill(0);
  for (const v of finite) bucket[Math.min(n - 1, width > 0 ? Math.floor((v - min) / width) : 0)]!++;
  const bucketLimit = bucket.map((_, i) => (i === n - 1 ? max : min + width * (i + 1)));
  return { min, max, num: finite.length, sum, sum_squares: sumSquares, bucket_limit: bucketLimit, bucket };
}

/** Every finite number in a metrics row, with nested fields joined by '/' (TensorBoard groups by prefix). */
export function numericFields(row: object, prefix = ''): Array<[tag: string, value: number]> {
  const out: Array<[string, number]> = [];
  for (const [key, value] of Object.entries(row)) {
    const tag = prefix + key;
    if (typeof value === 'number' && Number.isFinite(value)) out.push([tag, value]);
    else if (typeof value === 'boolean') out.push([tag, value ? 1 : 0]);
    else if (value && typeof value === 'object' && !Array.isArray(value)) out.push(...numericFields(value, `${tag}/`));
  }
  return out;
}

/**
 * Appends events to one event file in `dir` (a new file per writer, as TensorBoard expects of a
 * resumed run). Writes are synchronous and whole records, so a crash leaves a readable file.
 */
export class TensorBoardWriter {
  readonly path: string;

  constructor(dir: string, now: () => number = Date.now) {
    this.now = now;
    mkdirSync(dir, { recursive: true });
    const seconds = Math.floor(now() / 1000);
    this.path = join(dir, `events.out.tfevents.${seconds}.${hostname()}.${process.pid}`);
    writeFileSync(this.path, this.encode({ step: 0, file_version: 'brain.Event:2' }));
  }

  private readonly now: () => number;

  /** One scalar per numeric field of `row` (nested fields as `a/b`), at `step`. */
  scalars(step: number, row: object, prefix = ''): void {
    const value = numericFields(row, prefix).map(([tag, simple_value]) => ({ tag, simple_value }));
    if (value.length > 0) this.append({ step, summary: { value } });
  }

  /** A histogram of `values` under `tag`, at `step` (nothing when none is finite). */
  histogram(step: number, tag: string, values: readonly number[]): void {
    const histo = histogramOf(values);
    if (histo) this.append({ step, summary: { value: [{ tag, histo }] } });
  }

  private append(event: object): void {
    appendFileSync(this.path, this.encode(event));
  }

  private encode(event: object): Buffer {
    const message = EventMessage.fromObject({ wall_time: this.now() / 1000, ...event });
    return tfRecord(EventMessage.encode(message).finish());
  }
}
