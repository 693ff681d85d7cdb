import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { EnvServer } from '../../src/env-server/server.ts';
import { loadRecords } from '../../src/record/jsonl.ts';
import { serializeRecord } from '../../src/record/record.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { calc } from './fixtures.ts';

// The environment server acknowledges only what it has recorded: an episode is answered as ended
// only once its record line is in the file; a write that fails answers that client with an error and
// stops new episodes until a write can succeed; a torn last line is set aside before appending.

const json = { 'content-type': 'application/json' };
type Answer = { status: number; body: { observation?: { episode_id: string }; detail?: string; code?: string } };

async function step(url: string, seed: number): Promise<Answer> {
  const res = await fetch(`${url}/step`, {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ action: { answer: '4' }, seed }),
  });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

/** Mounts a tmpfs of `size` at a new folder; undefined (and why) where mounting is not permitted. */
function mountTmpfs(size: string): { dir: string; unmount(): void } | { why: string } {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    return { why: stderr || (err as Error).message };
  }
  return {
    dir,
    unmount: () => {
      execFileSync('umount', [dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Fills the file system at `dir` with one file, to the last byte it takes. */
function fill(file: string): void {
  const fd = openSync(file, 'w');
  const block = Buffer.alloc(4096, 0x2e);
  try {
    for (;;) writeSync(fd, block);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
}

test.serial(
  'on a full disk (a real tmpfs): acknowledged episodes are all in the file, whole; failures are errors; after space returns, every acknowledged one replays',
  async (t) => {
    const mounted = mountTmpfs('256k');
    if ('why' in mounted) {
      t.log(`skipped: mounting a tmpfs is not permitted here (${mounted.why}); it needs root, as CI has`);
      t.pass();
      return;
    }
    t.teardown(() => mounted.unmount());
    const logs: string[] = [];
    const server = new EnvServer({ scenario: calc, recordDir: mounted.dir, onLog: (l) => logs.push(l) });
    const url = await server.listen(0);
    const filler = join(mounted.dir, 'filler');
    const acknowledged: string[] = [];
    try {
      // Room for a few records (a calculator record is ~1.5 KiB), then none.
      fill(filler);
      writeFileSync(filler, Buffer.alloc(readFileSync(filler).length - 8 * 1024));
      let failure: Answer | undefined;
      for (let seed = 0; seed < 40 && !failure; seed++) {
        const answer = await step(url, seed);
        if (answer.status === 200) acknowledged.push(answer.body.observation!.episode_id);
        else failure = answer;
      }
      t.true(acknowledged.length >= 2, `${acknowledged.length} acknowledged before the disk was full`);
      t.truthy(failure, 'the disk never filled up');
      t.is(failure!.status, 503);
      t.like(failure!.body, { code: 'EXECUTION_ERROR' });
      t.regex(failure!.body.detail!, /ended, but its record could not be written \(ENOSPC: no space left on device/);
      // No new episode while it cannot write, and the file holds exactly what was acknowledged, whole.
      const refused = await step(url, 100);
      t.is(refused.status, 503);
      t.like(refused.body, { code: 'SESSION_ERROR' });
      t.regex(refused.body.detail!, /cannot write its records \(ENOSPC.*takes no new episodes until it can/);
      const file = join(mounted.dir, 'episodes.jsonl');
      t.true(readFileSync(file, 'utf8').endsWith('\n'), 'a torn line was left in the file');
      t.deepEqual(
        (await loadRecords(file)).records.map((r) => r.episodeId),
        acknowledged,
      );
      // Space comes back: episodes are taken again (within the server's next probe).
      rmSync(filler);
      await new Promise((r) => setTimeout(r, 300));
      for (let seed = 200; seed < 203; seed++) {
        const answer = await step(url, seed);
        t.is(answer.status, 200, answer.body.detail);
        acknowledged.push(answer.body.observation!.episode_id);
      }
      t.true(logs.some((l) => /records can be written again/.test(l)));
      await server.close();
      const { records, corrupt } = await loadRecords(file);
      t.deepEqual(corrupt, []);
      t.deepEqual(
        records.map((r) => r.episodeId),
        acknowledged,
      );
      for (const record of records) t.true((await replayRecord(record, calc)).verified, record.episodeId);
    } finally {
      await server.close();
    }
  },
);

test('a torn last line is set aside before the server appends; the next records follow whole lines', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-torn-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const first = new EnvServer({ scenario: calc, recordDir: dir });
  const url = await first.listen(0);
  t.is((await step(url, 1)).status, 200);
  t.is((await step(url, 2)).status, 200);
  await first.close();
  const file = join(dir, 'episodes.jsonl');
  const whole = readFileSync(file, 'utf8');
  // As a write cut short by a crash leaves it: half of a third line.
  const torn = whole.split('\n')[1]!.slice(0, 700);
  writeFileSync(file, whole + torn);
  const logs: string[] = [];
  const second = new EnvServer({ scenario: calc, recordDir: dir, onLog: (l) => logs.push(l) });
  t.is(readFileSync(file, 'utf8'), whole, 'the torn line is still in the file');
  t.is(readFileSync(`${file}.torn-1`, 'utf8'), torn);
  t.true(
    logs.some((l) => l.includes(`ended in a torn line (700 bytes, never acknowledged): set aside in ${file}.torn-1`)),
  );
  const url2 = await second.listen(0);
  const answer = await step(url2, 3);
  t.is(answer.status, 200);
  await second.close();
  const { records, corrupt } = await loadRecords(file);
  t.deepEqual(corrupt, []);
  t.is(records.length, 3);
  t.is(serializeRecord(records[2]!).length + 1, readFileSync(file, 'utf8').length - whole.length);
});
