import { existsSync } from 'node:fs';
import { cp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { checkpointName, replaceDir } from './run-dir.ts';
import type { TrainablePolicy } from './trainable.ts';

/**
 * The best dev checkpoint of a training run: DIR/best holds the policy of the best dev eval after
 * step 0 (ties to the later step), with its record best.json {step, devScore, split} inside it, so
 * one rename swaps the weights and the record together.
 */
export interface BestCheckpoint {
  step: number;
  /** The dev split's EM where the scenario reports it, else its success rate. */
  devScore: number;
  dir: string;
}

/** What the selection reads of a dev eval (the trainer's EvalMetrics). */
export interface DevEval {
  step: number;
  split: string;
  success: number;
  outcome: { [key: string]: number };
}

/** What "best" means for a dev eval: EM where the scenario reports it, else success. */
export const devScore = (e: Pick<DevEval, 'outcome' | 'success'>): number => e.outcome.em ?? e.success;

/** Whether eval `e` becomes the best: a trained step (> 0) at least as good as the best so far (ties: the later). */
const improves = (e: DevEval, bestScore: number | null) =>
  e.step > 0 && (bestScore === null || devScore(e) >= bestScore);

/** The best trained eval among `evals`, as the trainer keeps it. */
function bestOf<E extends DevEval>(evals: readonly E[]): E | null {
  let best: E | null = null;
  for (const e of evals) if (improves(e, best && devScore(best))) best = e;
  return best;
}

const BEST_RECORD = 'best.json';
const bestRecord = (e: DevEval) => JSON.stringify({ step: e.step, devScore: devScore(e), split: e.split }) + '\n';
const bestCheckpoint = (e: DevEval, outDir: string): BestCheckpoint => ({
  step: e.step,
  devScore: devScore(e),
  dir: join(outDir, 'best'),
});

async function saveBest(model: Pick<TrainablePolicy, 'save'>, outDir: string, e: DevEval): Promise<BestCheckpoint> {
  const best = bestCheckpoint(e, outDir);
  await replaceDir(best.dir, async (tmp) => {
    await model.save(tmp);
    await writeFile(join(tmp, BEST_RECORD), bestRecord(e));
  });
  return best;
}

/**
 * On resume, the best of the evals kept up to the checkpoint. best/ may hold a later step (written
 * before a crash, rewritten when that step is redone) or nothing (a run from before best/ existed):
 * then that step's checkpoint is copied in while it is still kept; otherwise no best is claimed
 * until an eval at least as good as the lost one.
 */
async function restoreBest(
  outDir: string,
  evals: readonly DevEval[],
): Promise<{ best: BestCheckpoint | null; score: number | null }> {
  const top = bestOf(evals);
  const dir = join(outDir, 'best');
  if (top === null) {
    await rm(dir, { recursive: true, force: true });
    return { best: null, score: null };
  }
  const onDisk = await readFile(join(dir, BEST_RECORD), 'utf8').catch(() => null);
  if (onDisk !== bestRecord(top)) {
    const kept = join(outDir, 'checkpoints', checkpointName(top.step), 'policy');
    if (!existsSync(kept)) {
      await rm(dir, { recursive: true, force: true });
      return { best: null, score: devScore(top) };
    }
    await replaceDir(dir, async (tmp) => {
      await cp(kept, tmp, { recursive: true });
      await writeFile(join(tmp, BEST_RECORD), bestRecord(top));
    });
  }
  return { best: bestCheckpoint(top, outDir), score: devScore(top) };
}

/** The run's best dev checkpoint as training goes: `consider` each dev eval, read `best`. */
export class BestDevCheckpoint {
  private constructor(
    private readonly outDir: string,
    private current: BestCheckpoint | null,
    /** The score to beat (it can outlive a best/ lost on resume). Null before any trained eval. */
    private score: number | null,
  ) {}

  /** A new run: step 0 is the initial policy, not a trained one, so it is never "best". */
  static fresh(outDir: string): BestDevCheckpoint {
    return new BestDevCheckpoint(outDir, null, null);
  }

  /** A resumed run, from the dev evals kept up to its checkpoint (see restoreBest). */
  static async restore(outDir: string, kept: readonly DevEval[]): Promise<BestDevCheckpoint> {
    const { best, score } = await restoreBest(outDir, kept);
    return new BestDevCheckpoint(outDir, best, score);
  }

  get best(): BestCheckpoint | null {
    return this.current;
  }

  /** Saves the model as the best when eval `e` of it is (ties go to the later step). */
  async consider(model: Pick<TrainablePolicy, 'save'>, e: DevEval): Promise<void> {
    if (!improves(e, this.score)) return;
    this.current = await saveBest(model, this.outDir, e);
    this.score = this.current.devScore;
  }
}
