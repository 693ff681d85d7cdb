import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { cli } from '../helpers/cli.ts';
import { freePort } from '../helpers/redis.ts';

const tmp = () => mkdtempSync(join(tmpdir(), 'agent-r1-queue-cli-'));

test.serial(
  'Redis unreachable at start: rollout and worker exit 1 with one line, and no file is written',
  async (t) => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    const out = join(tmp(), 'run');
    const r = cli(['rollout', '--scenario', 'calculator', '--episodes', '4', '--queue', url, '--out', out]);
    t.is(r.code, 1, r.stderr);
    t.regex(r.stderr, new RegExp(`^error: cannot reach the queue at ${url}: connect ECONNREFUSED [\\d.:]+\\n$`));
    t.false(existsSync(out));
    const w = cli(['worker', '--queue', url]);
    t.is(w.code, 1, w.stderr);
    t.regex(
      w.stderr.trim().split('\n').at(-1)!,
      /^error: cannot reach the queue at redis:\/\/127\.0\.0\.1:\d+: connect/,
    );
    const bad = cli(['rollout', '--scenario', 'calculator', '--queue', 'http://host:1', '--out', out]);
    t.is(bad.code, 2, bad.stderr);
    t.regex(bad.stderr, /--queue expects redis:\/\/HOST:PORT/);
    const resume = cli(['rollout', '--scenario', 'calculator', '--resume', '--out', out]);
    t.is(resume.code, 2, resume.stderr);
    t.regex(resume.stderr, /--resume continues a run on the queue: it needs --queue/);
  },
);
