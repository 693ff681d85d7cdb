import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import test from 'ava';
import { builtinScenarios } from '../../scenarios/index.ts';
import { loadRecords } from '../../src/record/jsonl.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { cliArgs, repoRoot } from '../helpers/cli.ts';

// Debian's interpreter: python3-websockets is a Debian package (bin/test-setup.js installs it); a pyenv
// python3 earlier on PATH would not see it.
const PYTHON = '/usr/bin/python3';
const hasWebsockets = spawnSync(PYTHON, ['-c', 'import websockets'], { encoding: 'utf8' }).status === 0;

test.serial(
  '`env serve --scenario multihop-qa` answers the Python example client over /ws; SIGTERM stops it; the records replay',
  async (t) => {
    if (!hasWebsockets) {
      t.log(`skipped: ${PYTHON} with the websockets module is not available (apt-get install python3-websockets)`);
      t.pass();
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'agent-r1-env-py-'));
    const server = spawn(
      process.execPath,
      cliArgs(['env', 'serve', '--scenario', 'multihop-qa', '--port', '0', '--record', dir, '--json']),
      { cwd: repoRoot },
    );
    let stderr = '';
    server.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: server.stdout }).once('line', resolve);
        server.once('exit', () => reject(new Error(`env serve exited: ${stderr}`)));
      });
      const { url, ws, scenario, records } = JSON.parse(line);
      t.is(scenario, 'multihop-qa');
      t.regex(ws, /^ws:\/\/127\.0\.0\.1:\d+\/ws$/);
      t.is(records, join(dir, 'episodes.jsonl'));
      const played = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const py = spawn(
          PYTHON,
          ['examples/python/play.py', '--url', url, '--episodes', '3', '--seed', '7', '--json'],
          {
            cwd: repoRoot,
          },
        );
        let out = '';
        let err = '';
        py.stdout.on('data', (d) => (out += d));
        py.stderr.on('data', (d) => (err += d));
        py.on('exit', (code) => resolve({ code, stdout: out, stderr: err }));
      });
      t.is(played.code, 0, played.stderr);
      const summary = JSON.parse(played.stdout.trim().split('\n').at(-1)!);
      t.is(summary.episodes, 3);
      t.is(summary.done, 3);
      for (const r of summary.results) {
        t.like(r, { turns: 2, end_reason: 'answered', steps: 2 });
        // The last observation carries the outcome with the scenario's metrics (EM/F1 for QA).
        t.deepEqual(
          Object.keys(r.metrics).filter((k) => k === 'em' || k === 'f1'),
          ['em', 'f1'],
        );
      }
      server.kill('SIGTERM');
      t.is(await exited, 0);
      t.regex(stderr, /serving scenario multihop-qa .* at http:\/\/127\.0\.0\.1:\d+ \(WebSocket ws:/);
      t.regex(stderr, /session closed: the client closed the session/);

      const { records: written, corrupt } = await loadRecords(join(dir, 'episodes.jsonl'));
      t.is(corrupt.length, 0);
      t.deepEqual(
        written.map((r) => r.episodeId),
        summary.results.map((r: { episode_id: string }) => r.episode_id),
      );
      const qa = await loadScenario('multihop-qa', builtinScenarios, {});
      for (const record of written) {
        t.like(record, { policy: { id: 'remote:python-scripted', version: '1' }, status: 'ok' });
        t.true((await replayRecord(record, qa)).verified, record.episodeId);
      }
    } finally {
      server.kill('SIGKILL');
    }
  },
);
