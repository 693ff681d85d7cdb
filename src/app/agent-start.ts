import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { deriveSeed } from '../core/rng.ts';
import type { Task } from '../core/types.ts';
import { makeDir } from '../core/make-dir.ts';
import type { AgentModule } from '../gateway/agent-module.ts';
import { AGENT_MODEL_NAME, AgentSession } from '../gateway/agent-session.ts';
import { policyAnswerer } from '../gateway/gateway.ts';
import { summarizeAgentRecords } from '../gateway/play-agent.ts';
import { tasksOfSplit } from '../gateway/tasks-file.ts';
import type { ServedPolicy } from '../openai/chat-format.ts';
import type { GradientExecutor } from '../policy/tfjs/data-parallel.ts';
import { resolveConfig, type TrainConfig } from '../rl/config.ts';
import { appendJsonl, writeFileAtomic } from '../rl/run-dir.ts';
import { GptTrainable } from '../rl/tfjs-trainable.ts';
import { HfTrainable } from '../rl/hf-trainable.ts';
import type { HfWarmStart } from './paper.ts';
import { hfSft, recordSequences } from './records-sft.ts';
import { train, type EvalMetrics, type StepMetrics } from '../rl/trainer.ts';
import { warmStartOnRecords, type WarmStartResult, type WarmStartTraining } from '../rl/warm-start.ts';
import { FAMILIES } from './families.ts';
import { METHOD_NAMES, scoreRecords, type MethodScore } from './paper.ts';

/**
 * `start --agent DIR`: the task families' job for an agent the user wrote. Its module's demonstrator
 * plays the agent's train tasks through the gateway; a GPT is warm-started on those episodes (the
 * Base row), trained with GRPO through the gateway (the agent's own code runs every episode), and
 * both are evaluated greedily on the held-out `test` tasks, each episode recorded.
 */

/** The splits `start --agent` reads from the tasks file, and what each is for (its help and errors say so). */
export const AGENT_START_SPLITS = {
  train: 'start --agent demonstrates and trains on them',
  test: "start --agent's held-out table scores on them",
} as const;
/** Optional: the GRPO run's dev evals pick its best checkpoint; without it the final one is scored. */
export const AGENT_START_DEV = 'dev';
export interface AgentBudget {
  demonstrations: number;
  warmStart: Omit<WarmStartTraining, 'seed' | 'onStep' | 'replicas'>;
  rl: Partial<Omit<TrainConfig, 'algo' | 'seed'>>;
  testEpisodes: number;
  maxTokensPerTurn: number;
  maxTurns: number;
}

/**
 * The calculator family's budget (src/app/families.ts): the example's tasks are that family's problems,
 * so its warm start, model and GRPO settings carry over; an agent's run gets up to 10 turns.
 */
export function agentBudget(quick: boolean): AgentBudget {
  const family = FAMILIES.calculator!.budget(quick);
  const { demoPolicy: _demo, episodes, ...warmStart } = family.warmStart;
  return {
    demonstrations: episodes,
    warmStart,
    rl: family.rl,
    testEpisodes: family.evalEpisodes.test as number,
    maxTokensPerTurn: family.episode!.maxTokensPerTurn!,
    maxTurns: 10,
  };
}

export interface AgentStartEvent {
  message?: string;
  sft?: { step: number; steps: number; loss: number; tokensPerS: number };
  step?: StepMetrics;
  eval?: EvalMetrics;
}

export interface AgentStartResult {
  scores: MethodScore[];
  /** The test tasks scored (the split's first `budget.testEpisodes`), and the train tasks used. */
  tasks: { train: number; test: number; dev: number };
  rewards: number[];
  warmStart: { demonstrations: number; demoSuccess: number; steps: number; parameters: number; finalLoss: number };
  selected: { step: number; devScore: number | null };
  seconds: { [phase: string]: number };
}

/**
 * The warm start of an agent's model: its module's demonstrator plays the agent's train tasks through
 * the gateway (`demonstrations` episodes, cycling the tasks), and a fresh GPT is trained on them.
 */
export async function warmStartAgent(
  session: AgentSession,
  options: { demonstrations: number; seed: number; training: WarmStartTraining; saveTo?: string },
): Promise<WarmStartResult> {
  const train = session.tasksOf('train');
  if (train.length === 0) throw new RangeError('the agent has no tasks in the train split to demonstrate');
  const tasks = Array.from({ length: options.demonstrations }, (_, i) => train[i % train.length]!);
  const demos = await session.demonstrations(tasks, deriveSeed(options.seed, 'demos'));
  if (options.saveTo) await appendJsonl(options.saveTo, demos);
  return warmStartOnRecords(demos, { id: 'demonstrator', summary: summarizeAgentRecords(demos) }, options.training);
}

export async function runAgentStart(options: {
  agent: AgentModule;
  tasks: readonly Task[];
  /** The tasks file, named when a split it needs is missing. */
  tasksFile: string;
  seed: number;
  outDir: string;
  budget: AgentBudget;
  /** Train this Hugging Face model (warm-started on the demonstrations through its template) instead of a new GPT. */
  hf?: HfWarmStart;
  replicas?: GradientExecutor;
  onEvent?(event: AgentStartEvent): void;
}): Promise<AgentStartResult> {
  const { agent, seed, outDir, budget } = options;
  const emit = (e: AgentStartEvent) => options.onEvent?.(e);
  const seconds: { [phase: string]: number } = {};
  let t = performance.now();
  const lap = (phase: string) => {
    const now = performance.now();
    seconds[phase] = (now - t) / 1000;
    t = now;
  };
  // The splits are checked before anything is written: a missing one is a usage error naming it.
  const trainTasks = tasksOfSplit(options.tasks, 'train', options.tasksFile, AGENT_START_SPLITS.train);
  const test = tasksOfSplit(options.tasks, 'test', options.tasksFile, AGENT_START_SPLITS.test).slice(
    0,
    budget.testEpisodes,
  );
  const dev = options.tasks.filter((t) => t.split === AGENT_START_DEV).length;
  if (dev === 0)
    emit({
      message: `${options.tasksFile} has no "${AGENT_START_DEV}" tasks: no dev evals, the final GRPO checkpoint is scored`,
    });
  const rl = dev === 0 ? { ...budget.rl, evalEvery: 0 } : budget.rl;
  makeDir(outDir);
  const session = await AgentSession.open({
    agent,
    tasks: options.tasks,
    seed,
    maxTurns: budget.maxTurns,
    maxTokensPerTurn: budget.maxTokensPerTurn,
  });
  try {
    const warmDir = join(outDir, 'warm-start');
    const ws = options.hf
      ? await hfWarmStartAgent(session, options.hf, { demonstrations: budget.demonstrations, seed, outDir, emit })
      : await warmStartAgent(session, {
          demonstrations: budget.demonstrations,
          seed,
          training: { ...budget.warmStart, seed, replicas: options.replicas, onStep: (s) => emit({ sft: s }) },
          saveTo: join(outDir, 'demonstrations.jsonl'),
        });
    if (!options.hf) await ws.trainable.save(warmDir);
    // The model each RL run starts from, and each checkpoint evaluated: the job's kind of model.
    const reload = (dir: string, id: string): Promise<GptTrainable | HfTrainable> =>
      options.hf
        ? HfTrainable.load(dir, { id, threads: options.hf.threads })
        : GptTrainable.fromCheckpoint(dir, { id });
    lap('warm-start');
    emit({
      message: `warm start: ${ws.demonstrations} demonstrations through the gateway (${(100 * ws.demoSuccess).toFixed(0)}% correct), ${ws.steps} SFT steps, loss ${ws.finalLoss.toFixed(3)}`,
    });
    const evaluate = async (method: string, model: GptTrainable | HfTrainable, file: string) => {
      const records = await session.play({
        answerer: policyAnswerer(model.policy({ temperature: 0 }) as unknown as ServedPolicy, AGENT_MODEL_NAME),
        tasks: test,
        group: 1,
        seed: deriveSeed(seed, 'test'),
        idPrefix: `${file}.`,
      });
      await appendJsonl(join(outDir, `${file}.jsonl`), records);
      return scoreRecords(method, 'test', records);
    };
    const scores: MethodScore[] = [await evaluate(METHOD_NAMES.base, ws.trainable, 'test-base')];
    lap('eval-base');
    emit({ message: `Base Tool Call evaluated on ${test.length} test tasks` });

    const model = await reload(warmDir, 'rl-grpo');
    const result = await train({
      source: session.source(),
      model,
      config: resolveConfig({ ...rl, algo: 'grpo', seed }),
      outDir: join(outDir, 'grpo'),
      init: `ckpt:${warmDir}`,
      ...(options.hf ? {} : { replicas: options.replicas }),
      onStep: (m) => emit({ step: m }),
      onEval: (e) => emit({ eval: e }),
    });
    lap('train-grpo');
    // The best dev checkpoint (model selection on dev, never on test), as the families select.
    const best = result.best && result.best.step !== result.lastStep ? result.best : null;
    const chosen = best ? await reload(best.dir, 'rl-grpo') : model;
    if (best)
      emit({
        message: `evaluating the best dev checkpoint, step ${best.step} (dev ${(100 * best.devScore).toFixed(1)})`,
      });
    scores.push(await evaluate(METHOD_NAMES.grpo, chosen, 'test-grpo'));
    lap('eval-grpo');
    const finalEval = result.evals.find((e) => e.step === result.lastStep);
    const out: AgentStartResult = {
      scores,
      tasks: { train: trainTasks.length, test: test.length, dev },
      rewards: result.steps.map((s) => s.reward),
      warmStart: {
        demonstrations: ws.demonstrations,
        demoSuccess: ws.demoSuccess,
        steps: ws.steps,
        parameters: ws.parameters,
        finalLoss: ws.finalLoss,
      },
      selected: best
        ? { step: best.step, devScore: best.devScore }
        : { step: result.lastStep, devScore: finalEval?.success ?? null },
      seconds,
    };
    await writeFileAtomic(join(outDir, 'agent-start.json'), JSON.stringify(out, null, 2) + '\n');
    return out;
  } finally {
    await session.close();
  }
}

/**
 * The warm start of a Hugging Face model on an agent: the demonstrator's episodes through the
 * gateway (every one, the imperfect too, as the GPT's warm start takes them), rendered with the
 * model's own template, trained on and saved as OUT/warm-start.
 */
async function hfWarmStartAgent(
  session: AgentSession,
  hf: HfWarmStart,
  options: { demonstrations: number; seed: number; outDir: string; emit: (e: AgentStartEvent) => void },
): Promise<
  Pick<WarmStartResult, 'demonstrations' | 'demoSuccess' | 'steps' | 'finalLoss' | 'parameters'> & {
    trainable: HfTrainable;
  }
> {
  const train = session.tasksOf('train');
  const tasks = Array.from({ length: options.demonstrations }, (_, i) => train[i % train.length]!);
  const demos = await session.demonstrations(tasks, deriveSeed(options.seed, 'demos'));
  await appendJsonl(join(options.outDir, 'demonstrations.jsonl'), demos);
  const used = demos.filter((r) => r.status === 'ok');
  const trained = await hfSft(
    {
      init: hf.init,
      ...(hf.lora ? { lora: hf.lora } : {}),
      seed: options.seed,
      out: join(options.outDir, 'warm-start'),
      steps: hf.steps,
      batchSize: hf.batchSize,
      microbatch: hf.microbatch ?? hf.batchSize,
      lr: hf.lr,
      threads: hf.threads,
      temperature: 0,
      meta: { demonstrations: demos.length },
      onStep: (s) => options.emit({ sft: s }),
    },
    (model) => recordSequences(model, used),
  );
  return {
    trainable: trained.trainable,
    demonstrations: demos.length,
    demoSuccess: summarizeAgentRecords(demos).successRate,
    steps: trained.steps,
    finalLoss: trained.finalLoss,
    parameters: trained.parameters,
  };
}
