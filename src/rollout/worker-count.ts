import { availableParallelism } from 'node:os';

/** Above this, `--workers` is a usage error: no machine this runs on has more cores to give. */
export const MAX_WORKERS = 256;

/** Above this, `--train-threads` is a usage error, as `--workers` is (each is a model replica and a thread). */
export const MAX_TRAIN_THREADS = 256;

/**
 * How many worker threads a rollout of `episodes` episodes gets for `requested`: never more than
 * there are episodes to play (an idle thread still costs its isolate, ~10-50 MB) nor cores to run
 * them (threads past the cores only contend). `reason` says why fewer than requested, for the CLI.
 */
export function capWorkers(
  requested: number,
  episodes: number,
  cores: number = availableParallelism(),
): { workers: number; reason?: string } {
  const workers = Math.max(0, Math.min(requested, episodes, Math.max(1, cores)));
  if (workers === requested) return { workers };
  const why = workers === episodes ? `${episodes} episode${episodes === 1 ? '' : 's'}` : `${cores} cores`;
  return { workers, reason: `${requested} workers asked, ${workers} used (${why})` };
}
