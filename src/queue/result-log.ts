import type { Redis } from 'ioredis';
import type { RunKeys } from './keys.ts';

/**
 * A run's results on Redis: one stream, written by workers and read in order by the coordinator.
 * Entries: the run's opening (`t=s`, written by the coordinator: workers write only into an open
 * run), an episode's record (`t=r`: index, worker, job, the record's JSONL line) and a job's end
 * (`t=d`: job, worker, episodes played, tool time). Delivery is at least once: the same episode may
 * appear twice (a job taken over from a worker that seemed dead); the first entry is the one kept.
 */
export type ResultEntry =
  | { type: 'start'; id: string }
  | { type: 'record'; id: string; index: number; worker: string; job: string; line: string }
  | { type: 'end'; id: string; job: string; worker: string; played: number; toolMs: number; threads: number };

// A record is appended only while the run's stream exists (a finished run's straggler writes
// nothing), its index joins the run's done set, and the set expires with the stream.
const APPEND_RECORD = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('XADD', KEYS[1], '*', 't', 'r', 'i', ARGV[1], 'w', ARGV[2], 'j', ARGV[3], 'r', ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1`;

type WithAppend = Redis & {
  agentR1AppendRecord(
    stream: string,
    done: string,
    index: number,
    worker: string,
    job: string,
    line: string,
  ): Promise<number>;
};

function withAppend(redis: Redis): WithAppend {
  const r = redis as WithAppend;
  if (typeof r.agentR1AppendRecord !== 'function') {
    redis.defineCommand('agentR1AppendRecord', { numberOfKeys: 2, lua: APPEND_RECORD });
  }
  return r;
}

/** Appends one record; false when the run is closed (finished, or its stream lost). */
export async function appendRecord(
  redis: Redis,
  keys: RunKeys,
  entry: { index: number; worker: string; job: string; line: string },
): Promise<boolean> {
  const n = await withAppend(redis).agentR1AppendRecord(
    keys.results,
    keys.done,
    entry.index,
    entry.worker,
    entry.job,
    entry.line,
  );
  return n === 1;
}

/** Appends a job's end; false when the run is closed. */
export async function appendEnd(
  redis: Redis,
  keys: RunKeys,
  entry: { job: string; worker: string; played: number; toolMs: number; threads: number },
): Promise<boolean> {
  const id = await redis.xadd(
    keys.results,
    'NOMKSTREAM',
    '*',
    't',
    'd',
    'j',
    entry.job,
    'w',
    entry.worker,
    'n',
    String(entry.played),
    'ms',
    entry.toolMs.toFixed(1),
    'th',
    String(entry.threads),
  );
  return id !== null;
}

/** Opens a run's stream (idempotent) and sets it to expire `ttlS` seconds from now. */
export async function openResults(redis: Redis, keys: RunKeys, ttlS: number): Promise<void> {
  await redis.multi().xadd(keys.results, '*', 't', 's').expire(keys.results, ttlS).exec();
}

/** Parses XREAD/XRANGE entries; entries of an unknown shape are skipped. */
export function parseEntries(raw: [id: string, fields: string[]][]): ResultEntry[] {
  const out: ResultEntry[] = [];
  for (const [id, fields] of raw) {
    const f: { [key: string]: string } = {};
    for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
    if (f.t === 's') out.push({ type: 'start', id });
    else if (f.t === 'r' && f.i !== undefined && f.r !== undefined) {
      out.push({ type: 'record', id, index: Number(f.i), worker: f.w ?? '?', job: f.j ?? '?', line: f.r });
    } else if (f.t === 'd') {
      out.push({
        type: 'end',
        id,
        job: f.j ?? '?',
        worker: f.w ?? '?',
        played: Number(f.n ?? 0),
        toolMs: Number(f.ms ?? 0),
        threads: Number(f.th ?? 1),
      });
    }
  }
  return out;
}

/** Reads entries after `after` ('0' for all); waits up to `blockMs` for the first one (0: no wait). */
export async function readResults(
  redis: Redis,
  keys: RunKeys,
  after: string,
  blockMs: number,
  count = 2000,
): Promise<ResultEntry[]> {
  const reply = (
    blockMs > 0
      ? await redis.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', keys.results, after)
      : await redis.xread('COUNT', count, 'STREAMS', keys.results, after)
  ) as [string, [string, string[]][]][] | null;
  return reply?.[0] ? parseEntries(reply[0][1]) : [];
}
