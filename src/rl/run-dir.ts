import { readFile, readdir, rename, rm, writeFile, appendFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJson } from '../core/canonical-json.ts';
import { makeDir } from '../core/make-dir.ts';
import { TrainingError } from './errors.ts';

/**
 * The training run directory:
 *   config.json            what determines the run (resume refuses a different one)
 *   metrics.jsonl          one line per step ({kind: 'step'}) and per eval ({kind: 'eval'})
 *   episodes.jsonl         every training episode's record, in episode order
 *   checkpoints/step-N/    policy/ (a policy checkpoint), adamw.{json,bin}, trainer.json
 *   latest.json            {step, dir}: the newest complete checkpoint
 *   final/                 the last policy checkpoint (`--policy ckpt:DIR/final`)
 *   best/                  the policy of the best dev eval after step 0 (dev EM, else success; ties
 *                          to the later step), with best.json {step, devScore, split} inside it
 * Every file that a crash could leave half-written is written to a temporary name and renamed.
 */

export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}

export function checkpointName(step: number): string {
  return `step-${String(step).padStart(6, '0')}`;
}

export interface LatestPointer {
  step: number;
  dir: string;
}

export async function readLatest(outDir: string): Promise<LatestPointer | null> {
  const path = join(outDir, 'latest.json');
  if (!existsSync(path)) return null;
  const parsed = JSON.parse(await readFile(path, 'utf8')) as LatestPointer;
  if (!Number.isInteger(parsed.step) || typeof parsed.dir !== 'string') {
    throw new TrainingError(`${path} is not a checkpoint pointer`);
  }
  return parsed;
}

/** Temporary checkpoint folders (`checkpoints/.tmp-step-…`) a failed or killed save left behind. */
async function removeStaleTemps(root: string): Promise<void> {
  if (!existsSync(root)) return;
  for (const n of await readdir(root))
    if (n.startsWith('.tmp-')) await rm(join(root, n), { recursive: true, force: true });
}

/**
 * Writes a checkpoint atomically: `fill` writes into a temporary directory, which is then renamed
 * into place, and only then does latest.json move to it. Keeps the newest `keep` checkpoints. A
 * save that fails removes its temporary folder; one killed part way leaves it, and the next save
 * (or a resume) removes it.
 */
export async function writeCheckpoint(
  outDir: string,
  step: number,
  fill: (dir: string) => Promise<void>,
  keep = 2,
): Promise<string> {
  const root = join(outDir, 'checkpoints');
  makeDir(root);
  const name = checkpointName(step);
  const tmp = join(root, `.tmp-${name}-${process.pid}`);
  await rm(tmp, { recursive: true, force: true });
  makeDir(tmp);
  try {
    await fill(tmp);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true }).catch(() => {});
    throw err;
  }
  const final = join(root, name);
  await rm(final, { recursive: true, force: true });
  await rename(tmp, final);
  await writeFileAtomic(join(outDir, 'latest.json'), JSON.stringify({ step, dir: join('checkpoints', name) }));
  await removeStaleTemps(root);
  const old = (await readdir(root)).filter((n) => /^step-\d+$/.test(n)).sort();
  for (const n of old.slice(0, Math.max(0, old.length - keep)))
    await rm(join(root, n), { recursive: true, force: true });
  return final;
}

/** Checks a run directory against the config, for a fresh start or a resume. */
export async function prepareRunDir(outDir: string, configJson: unknown, resume: boolean): Promise<void> {
  makeDir(outDir);
  const path = join(outDir, 'config.json');
  const wanted = canonicalJson(configJson);
  if (existsSync(path)) {
    const have = canonicalJson(JSON.parse(await readFile(path, 'utf8')));
    if (!resume)
      throw new TrainingError(`${outDir} already holds a run; pass --resume to continue it or choose another --out`);
    if (have !== wanted) {
      throw new TrainingError(
        `${outDir} holds a run with another config; --resume needs the same options (see ${path})`,
      );
    }
    await removeStaleTemps(join(outDir, 'checkpoints'));
    return;
  }
  if (resume && existsSync(join(outDir, 'latest.json')))
    throw new TrainingError(`${outDir} has checkpoints but no config.json`);
  await writeFileAtomic(path, JSON.stringify(configJson, null, 2) + '\n');
}

/**
 * Keeps the JSONL lines that `keep` accepts (used on resume to drop what came after the checkpoint)
 * and returns them.
 */
export async function truncateJsonl(path: string, keep: (row: any) => boolean): Promise<string[]> {
  if (!existsSync(path)) return [];
  const lines = (await readFile(path, 'utf8')).split('\n').filter((l) => l.trim() !== '');
  const kept: string[] = [];
  for (const line of lines) {
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch {
      break; // a torn last line from a crash: everything from here on is redone
    }
    if (keep(row)) kept.push(line);
  }
  await writeFileAtomic(path, kept.map((l) => l + '\n').join(''));
  return kept;
}

/**
 * Writes a folder under a temporary name, then swaps it for the old one (moved aside first, so a
 * crash leaves the old folder or the new one complete, never a half-written one).
 */
export async function replaceDir(dir: string, fill: (tmp: string) => Promise<void>): Promise<void> {
  for (const stale of [`${dir}.tmp`, `${dir}.old`]) await rm(stale, { recursive: true, force: true });
  await fill(`${dir}.tmp`);
  if (existsSync(dir)) await rename(dir, `${dir}.old`);
  await rename(`${dir}.tmp`, dir);
  await rm(`${dir}.old`, { recursive: true, force: true });
}

export async function appendJsonl(path: string, rows: readonly unknown[]): Promise<void> {
  if (rows.length === 0) return;
  await appendFile(path, rows.map((r) => canonicalJson(r) + '\n').join(''));
}
