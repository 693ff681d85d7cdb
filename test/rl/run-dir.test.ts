import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { prepareRunDir, writeCheckpoint } from '../../src/rl/run-dir.ts';

// A checkpoint's temporary folder never stays: a save that fails removes its own, and one killed
// part way (its process gone) is removed by the next successful save or by a resume.

const runDir = (t: { teardown(fn: () => void): void }) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-run-dir-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
};
const fill = async (dir: string) => writeFileSync(join(dir, 'model.json'), '{}');

test('a failed save leaves no temporary folder; a killed one is removed by the next save', async (t) => {
  const out = runDir(t);
  const full = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
  await t.throwsAsync(
    writeCheckpoint(out, 1, async (dir) => {
      await fill(dir);
      throw full;
    }),
    { is: full },
  );
  t.deepEqual(readdirSync(join(out, 'checkpoints')), []);
  // As a process killed mid-save leaves it.
  mkdirSync(join(out, 'checkpoints', '.tmp-step-000002-99999'));
  writeFileSync(join(out, 'checkpoints', '.tmp-step-000002-99999', 'weights.bin'), 'x');
  const saved = await writeCheckpoint(out, 3, fill);
  t.true(existsSync(join(saved, 'model.json')));
  t.deepEqual(readdirSync(join(out, 'checkpoints')), ['step-000003']);
});

test('a resume removes a temporary folder a killed save left', async (t) => {
  const out = runDir(t);
  await prepareRunDir(out, { lr: 1 }, false);
  await writeCheckpoint(out, 1, fill);
  mkdirSync(join(out, 'checkpoints', '.tmp-step-000002-99999'));
  await prepareRunDir(out, { lr: 1 }, true);
  t.deepEqual(readdirSync(join(out, 'checkpoints')), ['step-000001']);
});
