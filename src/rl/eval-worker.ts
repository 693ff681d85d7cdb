import { Piscina } from 'piscina';
import type { EpisodeConfig } from '../core/types.ts';
import { WORKER_URL } from '../rollout/parallel-rollout.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { TrainingError } from './errors.ts';
import type { MethodScore } from './paper.ts';

/** One greedy evaluation of a saved checkpoint (see evaluateMethod). */
export interface EvaluateJob {
  checkpoint: string;
  /** The policy's id in the records (default: the method). */
  policyId?: string;
  method: string;
  split: string;
  episodes: number;
  seed: number;
  episode?: Partial<EpisodeConfig>;
}

/** What the main thread sends the evaluation worker (workers/evaluate.ts); no job = load and wait. */
export interface EvaluateTask {
  scenario: { source: string; options: { [key: string]: string } };
  backend: string;
  job?: EvaluateJob;
}

export interface EvaluateTaskResult {
  score?: MethodScore;
  /** The worker's time on the task. */
  seconds: number;
}

/**
 * Whether evaluations can run in a worker thread on this backend. tfjs wasm uses one core per
 * thread in Node, so a worker puts the second core to work; the tfjs-node bindings cannot load in a
 * worker thread (and a GPU evaluates fast enough in-process).
 */
export function canEvaluateInWorker(backend: string): boolean {
  return backend === 'wasm' || backend === 'cpu';
}

/**
 * A worker thread that evaluates checkpoints while the main thread goes on training. Jobs run one
 * at a time in the order given. It loads the backend and builds the scenario as soon as it is made,
 * so the first job does not wait for that.
 */
export class EvalWorker {
  private readonly pool: Piscina;
  private readonly scenario: EvaluateTask['scenario'];

  constructor(
    scenario: Scenario,
    private readonly backend: string,
    source: string = scenario.id,
  ) {
    this.scenario = { source, options: scenario.options };
    this.pool = new Piscina({ filename: WORKER_URL, name: 'evaluate', minThreads: 1, maxThreads: 1, execArgv: [] });
    // A failed warm-up fails the first job the same way, which reports it.
    this.run(undefined).catch(() => {});
  }

  async evaluate(job: EvaluateJob): Promise<{ score: MethodScore; seconds: number }> {
    let result: EvaluateTaskResult;
    try {
      result = await this.run(job);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new TrainingError(`evaluating ${job.checkpoint} on ${job.split} in the evaluation worker failed: ${message}`, { cause: err });
    }
    return { score: result.score!, seconds: result.seconds };
  }

  close(): Promise<void> {
    return this.pool.destroy();
  }

  private run(job: EvaluateJob | undefined): Promise<EvaluateTaskResult> {
    const task: EvaluateTask = { scenario: this.scenario, backend: this.backend, ...(job ? { job } : {}) };
    return this.pool.run(task);
  }
}
