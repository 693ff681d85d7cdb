import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import cliProgress from 'cli-progress';
import { assertWritableDir } from '../../core/writable-dir.ts';
import { initBackend, type BackendInfo } from '../../policy/tfjs/backend.ts';
import type { GradientExecutor } from '../../policy/tfjs/data-parallel.ts';
import { trainReplicas } from '../../rl/train-threads.ts';
import { resolvePolicy, resolveUserPolicy } from '../../app/resolve-policy.ts';
import { ALGORITHMS, defaultConfig, resolveConfig, type TrainConfig } from '../../rl/config.ts';
import { TrainingError } from '../../rl/errors.ts';
import { UnknownNameError, UsageError } from '../../core/errors.ts';
import { KL_ESTIMATORS } from '../../rl/kl.ts';
import { readLatest } from '../../rl/run-dir.ts';
import { canUseReplica, Replica } from '../../rollout/replica.ts';
import { GptTrainable } from '../../rl/tfjs-trainable.ts';
import { HfTrainable } from '../../rl/hf-trainable.ts';
import { isHfModel } from '../common.ts';
import { train, type TrainResult } from '../../rl/trainer.ts';
import { defaultDemoPolicy, sequencesWords, sftWarmStart, type WarmStartTraining } from '../../rl/warm-start.ts';
import { contextSetting } from '../../env/context.ts';
import { loadAgent } from '../../gateway/agent-module.ts';
import { AgentSession } from '../../gateway/agent-session.ts';
import { readTasksFile } from '../../gateway/tasks-file.ts';
import { warmStartAgent } from '../../app/agent-start.ts';
import { ROLES, type EpisodeConfig } from '../../core/types.ts';
import {
  CONTEXT_HELP,
  contextMode,
  integer,
  keyValue,
  LORA_HELP,
  loraAlpha,
  loraRequest,
  modelInit,
  positiveInt,
  printJson,
  scenarioFromFlags,
  TRAIN_THREADS_HELP,
  trainThreadCount,
  kernelTrainThreads,
} from '../common.ts';
import { type QueueFlags, queueFlagOptions, queueFromFlags, queueSummary } from '../queue.ts';

interface TrainFlags extends QueueFlags {
  scenario?: string;
  agent?: string;
  tasks?: string;
  agentTimeout: number;
  algo: string;
  out: string;
  init?: string;
  lora?: number;
  loraAlpha?: number;
  resume?: boolean;
  /** false with --no-replica. */
  replica?: boolean;
  seed: number;
  steps?: number;
  tasksPerStep?: number;
  group?: number;
  epochs?: number;
  minibatch?: number;
  lr?: number;
  klMode?: 'none' | 'reward' | 'loss';
  klCoef?: number;
  klEstimator?: 'k1' | 'k2' | 'k3';
  entropyCoef?: number;
  temperature?: number;
  evalEvery?: number;
  evalEpisodes?: number;
  checkpointEvery?: number;
  demoPolicy?: string;
  /** Who plays the scenario's user (a conversation): a scripted user of its, or a model policy. */
  userPolicy?: string;
  roles?: string;
  demoEpisodes: number;
  sftSteps: number;
  dModel: number;
  copyHead: boolean;
  layers: number;
  contextLength: number;
  /** Who owns what each step is shown (--context). */
  context?: string;
  vocab: number;
  backend?: string;
  trainThreads?: number;
  data?: string;
  option?: string[];
  json?: boolean;
}

function number(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n)) throw new InvalidArgumentError('expected a number');
  return n;
}

const f3 = (x: number | null | undefined) => (x === null || x === undefined ? '-' : x.toFixed(3));

/** The warm start's SFT settings from the flags (a scenario's demonstrations or an agent's). */
function warmStartTraining(flags: TrainFlags, replicas: GradientExecutor | undefined): WarmStartTraining {
  return {
    seed: flags.seed,
    steps: flags.sftSteps,
    batchSize: 8,
    lr: 6e-3,
    vocabSize: flags.vocab,
    model: {
      dModel: flags.dModel,
      nLayers: flags.layers,
      contextLength: flags.contextLength,
      copyHead: flags.copyHead,
    },
    replicas,
  };
}

/**
 * The model to train: a checkpoint (`--init ckpt:DIR`), the run's own latest checkpoint or warm
 * start on `--resume`, or a fresh SFT warm start on demonstrations (saved to OUT/warm-start).
 */
async function initialModel(
  flags: TrainFlags,
  scenario: Awaited<ReturnType<typeof scenarioFromFlags>>,
  log: (s: string) => void,
  replicas: GradientExecutor | undefined,
  episode: Partial<EpisodeConfig>,
) {
  if (flags.init) return modelFromInit(flags, flags.init);
  const warm = join(flags.out, 'warm-start');
  // On resume the trainer loads the checkpoint itself; the model handed to it must be the initial
  // policy, which is also the frozen KL reference.
  if (flags.resume && existsSync(join(warm, 'model.json'))) {
    const name = flags.demoPolicy ?? defaultDemoPolicy(scenario);
    return { model: await GptTrainable.fromCheckpoint(warm), init: `warm-start:${name}` };
  }
  const demoName = flags.demoPolicy ?? defaultDemoPolicy(scenario);
  if (demoName === undefined)
    throw new UsageError(
      `scenario ${scenario.id} has neither a noisy-expert nor an expert policy to warm-start from: name one with --demo-policy, or start from a model (--init ckpt:DIR|hf:DIR)`,
    );
  const demoPolicy = await resolvePolicy(demoName, scenario, flags.seed).catch((error: unknown) => {
    if (!(error instanceof UnknownNameError)) throw error;
    throw new UsageError(
      `--demo-policy: scenario ${scenario.id} has no policy "${demoName}" for the warm start's demonstrations; valid: ${error.choices.join(', ')} (or --init ckpt:DIR|hf:DIR to start from a model)`,
    );
  });
  if (flags.demoPolicy === undefined && demoName === 'expert')
    log(
      `warm start: scenario ${scenario.id} has no noisy-expert policy; SFT on its expert, then RL on what that leaves`,
    );
  log(`warm start: SFT on ${flags.demoEpisodes} ${demoName} demonstrations, ${flags.sftSteps} steps`);
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: 'sft {bar} {value}/{total} | loss {loss} | {tps} tok/s | ETA {eta}s',
      hideCursor: false,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(flags.sftSteps, 0, { loss: '-', tps: '-' });
  const ws = await sftWarmStart({
    scenario,
    demoPolicy,
    episodes: flags.demoEpisodes,
    ...warmStartTraining(flags, replicas),
    episode,
    onStep: (s) => {
      bar.update(s.step, { loss: s.loss.toFixed(3), tps: s.tokensPerS.toFixed(0) });
      // Every 10th step, as start prints them.
      if (LINES && (s.step % 10 === 0 || s.step === flags.sftSteps))
        log(`sft step ${s.step}/${flags.sftSteps}: loss ${s.loss.toFixed(3)}, ${s.tokensPerS.toFixed(0)} tok/s`);
    },
  });
  bar.stop();
  await ws.trainable.save(warm);
  log(
    `warm start: ${ws.parameters} parameters, ${ws.demonstrations} demonstrations (${(ws.demoSuccess * 100).toFixed(0)}% successful)${sequencesWords(ws)}, loss ${ws.finalLoss.toFixed(3)}, ${ws.seconds.toFixed(0)} s → ${warm}`,
  );
  return { model: ws.trainable, init: `warm-start:${demoName}` };
}

/** The model `--init` names: a Hugging Face model (with --lora's adapters), or a GPT checkpoint. */
async function modelFromInit(flags: TrainFlags, init: string, id = 'rl') {
  if (await isHfModel(init)) {
    const lora = loraRequest(flags, true);
    const valueHead = flags.algo === 'ppo';
    const model = await HfTrainable.load(initDir(init), {
      id,
      lora,
      seed: flags.seed,
      valueHead,
      ...kernelTrainThreads(flags.trainThreads),
    });
    return { model, init };
  }
  return { model: await GptTrainable.fromCheckpoint(init.slice(5), { id }), init };
}

/** The roles `--roles` trains: `agent` (the default), `user`, or both (`agent,user`). */
export function rolesFlag(value: string | undefined): { agent: boolean; user: boolean } {
  if (value === undefined) return { agent: true, user: false };
  const names = value.split(',').map((s) => s.trim());
  const valid = ['agent', ...ROLES];
  for (const name of names) if (!valid.includes(name)) throw new UnknownNameError('role', name, valid);
  if (new Set(names).size !== names.length) throw new UsageError(`--roles names a role twice: ${value}`);
  return { agent: names.includes('agent'), user: names.includes('user') };
}

const initDir = (spec: string) => spec.replace(/^(hf|ckpt):/, '');

async function runTrainCommand(flags: TrainFlags): Promise<TrainResult> {
  const log = (s: string) => process.stderr.write(s + '\n');
  // The queue first: an unreachable Redis fails before anything is computed or written. Its --resume
  // is the run's: a rollout cut short by the stop is continued from what its workers committed.
  const queue = flags.queue
    ? await queueFromFlags({ ...flags, queue: flags.queue }, (line) => log(`\n${line}`))
    : undefined;
  if ((flags.scenario === undefined) === (flags.agent === undefined))
    throw new UsageError('give --scenario NAME or --agent FILE (one of them): what the policy is trained on');
  if (flags.agent !== undefined) {
    const foreign = (
      [
        ['--queue', flags.queue],
        ['--option', flags.option?.length ? flags.option : undefined],
        ['--data', flags.data],
        ['--context', flags.context],
        ['--demo-policy', flags.demoPolicy],
      ] as const
    ).filter(([, v]) => v !== undefined);
    if (foreign.length > 0)
      throw new UsageError(
        `${foreign.map(([f]) => f).join(', ')}: not with --agent (the agent plays its own episodes; its module's demonstrator warm-starts)`,
      );
  } else if (flags.tasks !== undefined)
    throw new UsageError('--tasks goes with --agent (a scenario has its own tasks)');
  const info = await initBackend(flags.backend);
  log(`backend: ${info.name} (${info.reason})`);
  const scenario =
    flags.scenario === undefined ? undefined : await scenarioFromFlags({ ...flags, scenario: flags.scenario });
  const config: TrainConfig = resolveConfig({
    algo: flags.algo,
    seed: flags.seed,
    steps: flags.steps,
    tasksPerStep: flags.tasksPerStep,
    group: flags.group,
    epochs: flags.epochs,
    minibatch: flags.minibatch,
    lr: flags.lr,
    klMode: flags.klMode,
    klCoef: flags.klCoef,
    klEstimator: flags.klEstimator,
    entropyCoef: flags.entropyCoef,
    temperature: flags.temperature,
    evalEvery: flags.evalEvery,
    evalEpisodes: flags.evalEpisodes,
    checkpointEvery: flags.checkpointEvery,
  });
  // Checkpoints go under --out: one that cannot take files, or that holds another run, must fail
  // now, not after the warm start.
  assertWritableDir(flags.out);
  if (!flags.resume && existsSync(join(flags.out, 'config.json')))
    throw new TrainingError(`${flags.out} already holds a run; pass --resume to continue it or choose another --out`);
  // The training threads hold GPT replicas; a Hugging Face model's split its kernels' products (modelFromInit).
  const hf = flags.init !== undefined && (await isHfModel(flags.init));
  loraRequest(flags, hf);
  const { replicas, note } = hf
    ? { replicas: undefined, note: undefined }
    : trainReplicas(info.name, flags.trainThreads ?? availableParallelism());
  if (note) log(note);
  try {
    if (!scenario && flags.userPolicy !== undefined)
      throw new UsageError('--user-policy is for a scenario with a user (--scenario), not --agent');
    if (!scenario && flags.roles !== undefined && flags.roles !== 'agent')
      throw new UsageError('--roles: an agent module (--agent) has no other role to train');
    if (!scenario) return await trainAgentWith(flags, config, replicas);
    return await trainWith(flags, config, scenario, info, replicas, queue);
  } finally {
    await replicas?.close();
  }
}

/**
 * The progress bars draw only on a terminal: elsewhere (a log file, CI, a pipe) each step is a line
 * on stderr instead, as train --agent and start print them.
 */
const LINES = !process.stderr.isTTY;

async function trainWith(
  flags: TrainFlags,
  config: TrainConfig,
  scenario: Awaited<ReturnType<typeof scenarioFromFlags>>,
  info: BackendInfo,
  replicas: GradientExecutor | undefined,
  queue: Awaited<ReturnType<typeof queueFromFlags>> | undefined,
): Promise<TrainResult> {
  const log = (s: string) => process.stderr.write(s + '\n');
  // The warm start's demonstrations, the rollouts and the evals all see what each step is shown.
  const context = contextSetting(scenario, flags.context);
  const episode: Partial<EpisodeConfig> = context === undefined ? {} : { context };
  // Which roles learn, checked before any warm start.
  const roles = rolesFlag(flags.roles);
  const userSpec = roles.user ? userModelSpec(flags, scenario) : undefined;
  const { model, init } = await initialModel(flags, scenario, log, replicas, episode);
  if (model instanceof HfTrainable && model.lora) {
    const trained = model.variables.reduce((n, v) => n + v.size, 0);
    log(`LoRA: rank ${model.lora.rank}, alpha ${model.lora.alpha}, ${trained} trained parameters; the base frozen`);
  }
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: `${config.algo} {bar} {value}/{total} | reward {reward} | EM {em} | KL {kl} | {tps} tok/s | ETA {eta}s`,
      hideCursor: false,
    },
    cliProgress.Presets.shades_classic,
  );
  const controller = new AbortController();
  const onSigint = () => controller.abort();
  process.once('SIGINT', onSigint);
  const startStep = flags.resume ? ((await readLatest(flags.out))?.step ?? 0) : 0;
  // A trained user starts from the model --user-policy names, and plays the user as it learns.
  const user = userSpec ? (await modelFromInit(flags, userSpec, 'rl-user')).model : undefined;
  if (user) log(`roles: ${roles.agent ? 'the agent and ' : ''}the user (from ${flags.userPolicy}) trained`);
  const userPolicy =
    flags.userPolicy === undefined || user
      ? undefined
      : await resolveUserPolicy(flags.userPolicy, scenario, config.seed);
  if (userPolicy && queue) throw new UsageError('--user-policy plays in this thread: not with --queue');
  // A GPT checkpoint can be replicated into a worker thread that plays half of every rollout.
  const replica =
    !queue &&
    !userPolicy &&
    !user &&
    flags.replica !== false &&
    canUseReplica(info.name) &&
    model instanceof GptTrainable
      ? new Replica({
          backend: info.name,
          scenarioSource: flags.scenario!,
          onFallback: (e) => log(`replica failed, its episodes were played on the main thread: ${e.message}`),
        })
      : undefined;
  bar.start(config.steps, startStep, { reward: '-', em: '-', kl: '-', tps: '-' });
  try {
    const result = await train({
      scenario,
      model,
      config,
      outDir: flags.out,
      resume: flags.resume,
      init,
      episode,
      signal: controller.signal,
      executor: queue ?? replica,
      ...(userPolicy ? { userPolicy } : {}),
      ...(user ? { user, trainAgent: roles.agent } : {}),
      replicas,
      onStep: (m) => {
        bar.update(m.step, {
          reward: f3(m.reward),
          em: f3(m.outcome.em ?? m.success),
          kl: f3(m.kl),
          tps: m.time.tokensPerS.toFixed(0),
        });
        if (LINES)
          log(
            `${config.algo} step ${m.step}/${config.steps}: reward ${f3(m.reward)}, ${m.outcome.em === undefined ? `success ${f3(m.success)}` : `EM ${f3(m.outcome.em)}`}, KL ${f3(m.kl)}, ${m.failed} failed, ${m.skipped} skipped, ${m.time.tokensPerS.toFixed(0)} tok/s`,
          );
      },
      onEval: (e) => {
        bar.update({ em: `${f3(e.outcome.em ?? e.success)} (${e.split})` });
        if (LINES)
          log(
            `eval on ${e.split} at step ${e.step}: ${e.outcome.em === undefined ? `success ${f3(e.success)}` : `EM ${f3(e.outcome.em)}`}, reward ${f3(e.reward)}`,
          );
      },
    });
    return result;
  } finally {
    bar.stop();
    process.off('SIGINT', onSigint);
    await replica?.close();
    if (queue) {
      log(`queue: ${JSON.stringify(queueSummary(queue.stats))}`);
      await queue.close();
    }
  }
}

/** `train --agent FILE`: the agent's own runs through the in-process gateway are the rollouts. */
async function trainAgentWith(
  flags: TrainFlags,
  configured: TrainConfig,
  replicas: GradientExecutor | undefined,
): Promise<TrainResult> {
  const log = (s: string) => process.stderr.write(s + '\n');
  const agent = await loadAgent(flags.agent!);
  const tasksFile = flags.tasks ?? agent.tasksFile;
  if (!tasksFile) throw new UsageError(`--tasks FILE.jsonl: the tasks to train ${agent.file} on`);
  const tasks = await readTasksFile(tasksFile);
  let config = configured;
  if (!tasks.some((t) => t.split === config.trainSplit))
    throw new UsageError(`${tasksFile} has no tasks in the "${config.trainSplit}" split to train on`);
  if (config.evalEvery > 0 && !tasks.some((t) => t.split === config.evalSplit)) {
    log(`${tasksFile} has no "${config.evalSplit}" tasks: no dev evals (--eval-every 0)`);
    config = { ...config, evalEvery: 0 };
  }
  log(`agent: ${agent.file} (version ${agent.version}), ${tasks.length} tasks from ${tasksFile}`);
  const session = await AgentSession.open({ agent, tasks, seed: flags.seed, timeoutMs: flags.agentTimeout * 1000 });
  try {
    const warm = join(flags.out, 'warm-start');
    let start: { model: GptTrainable | HfTrainable; init: string };
    if (flags.init) start = await modelFromInit(flags, flags.init);
    else if (flags.resume && existsSync(join(warm, 'model.json')))
      start = { model: await GptTrainable.fromCheckpoint(warm), init: 'warm-start:demonstrator' };
    else {
      if (!agent.demonstrator)
        throw new UsageError(
          `${agent.file} exports no demonstrator to warm-start from: start from a model (--init ckpt:DIR|hf:DIR)`,
        );
      log(`warm start: SFT on ${flags.demoEpisodes} demonstrations of the agent, ${flags.sftSteps} steps`);
      const ws = await warmStartAgent(session, {
        demonstrations: flags.demoEpisodes,
        seed: flags.seed,
        training: warmStartTraining(flags, replicas),
      });
      await ws.trainable.save(warm);
      log(
        `warm start: ${ws.demonstrations} demonstrations (${(ws.demoSuccess * 100).toFixed(0)}% successful), loss ${ws.finalLoss.toFixed(3)} → ${warm}`,
      );
      start = { model: ws.trainable, init: 'warm-start:demonstrator' };
    }
    const controller = new AbortController();
    const onSigint = () => controller.abort();
    process.once('SIGINT', onSigint);
    try {
      return await train({
        source: session.source(),
        model: start.model,
        config,
        outDir: flags.out,
        resume: flags.resume,
        init: start.init,
        signal: controller.signal,
        replicas,
        onStep: (m) =>
          log(
            `${config.algo} step ${m.step}/${config.steps}: reward ${f3(m.reward)}, success ${f3(m.success)}, ${m.failed} failed, ${m.skipped} skipped`,
          ),
        onEval: (e) => log(`eval on ${e.split} at step ${e.step}: success ${f3(e.success)}, reward ${f3(e.reward)}`),
      });
    } finally {
      process.off('SIGINT', onSigint);
    }
  } finally {
    await session.close();
  }
}

/** The training config's defaults the flags override (the same for every algorithm, but KL's). */
const DEFAULTS = defaultConfig('grpo');

export function register(program: Command): void {
  program
    .command('train')
    .description(
      'RL-train a policy on a scenario (an SFT warm start of the GPT, or --init ckpt:DIR or hf:DIR; then PPO/GRPO/REINFORCE++/RLOO)',
    )
    .option('--scenario <name>', 'scenario name or folder (or --agent)')
    .option(
      '--agent <file>',
      'instead of a scenario: an agent module (its default export `async (task, client) => ({ reward })`), trained through the gateway',
    )
    .option('--tasks <file.jsonl>', "with --agent: the tasks (default: tasks.jsonl in the agent's folder)")
    .option(
      '--agent-timeout <s>',
      'with --agent: an agent run past this many seconds is written as failed',
      positiveInt,
      120,
    )
    .requiredOption('--algo <algo>', `algorithm: ${ALGORITHMS.join(', ')}`)
    .requiredOption('--out <dir>', 'run directory (metrics.jsonl, episodes.jsonl, checkpoints/, final/)')
    .option(
      '--init <ckpt:DIR|hf:DIR>',
      'start from this checkpoint, or this Hugging Face model, instead of an SFT warm start',
      modelInit,
    )
    .option('--lora <R>', LORA_HELP.rank, positiveInt)
    .option('--lora-alpha <A>', LORA_HELP.alpha, loraAlpha)
    .option('--resume', 'continue the run in --out exactly where its last checkpoint left it')
    .option('--seed <n>', 'run seed', integer, 1)
    .option('--steps <n>', `RL steps (rollout batches; default ${DEFAULTS.steps})`, positiveInt)
    .option('--tasks-per-step <n>', `tasks per rollout batch (default ${DEFAULTS.tasksPerStep})`, positiveInt)
    .option('--group <g>', `samples per task (default ${DEFAULTS.group})`, positiveInt)
    .option('--epochs <n>', `passes over each rollout batch (default ${DEFAULTS.epochs})`, positiveInt)
    .option('--minibatch <n>', `sequences per optimizer step (default ${DEFAULTS.minibatch})`, positiveInt)
    .option('--lr <x>', `learning rate (default ${DEFAULTS.lr})`, number)
    .option(
      '--kl-mode <mode>',
      'KL to the initial policy: none, reward or loss (default: ppo none, reinforce++ reward, others loss)',
    )
    .option('--kl-coef <x>', 'KL coefficient (default: 0 for ppo, else 0.001)', number)
    .option('--kl-estimator <k>', `KL estimator: ${KL_ESTIMATORS.join(', ')} (default: k3 with the loss, else k1)`)
    .option('--entropy-coef <x>', `entropy bonus coefficient (default ${DEFAULTS.entropyCoef})`, number)
    .option('--temperature <x>', `sampling temperature of rollouts (default ${DEFAULTS.temperature})`, number)
    .option(
      '--user-policy <spec>',
      "who plays the scenario's user (a conversation, e.g. helpdesk) in the rollouts and evals: one of its scripted users, or ckpt:DIR, hf:DIR, openai:MODEL@URL (played in this thread)",
    )
    .option(
      '--roles <list>',
      "who learns: agent (the default), user, or agent,user (a scenario with a user; the user's model is --user-policy ckpt:DIR|hf:DIR, saved in user/ beside the agent's)",
    )
    .option(
      '--eval-every <k>',
      `eval on dev before training, every k steps and after the last (default ${DEFAULTS.evalEvery}; 0: no eval)`,
      integer,
    )
    .option('--eval-episodes <n>', `dev episodes per eval (default ${DEFAULTS.evalEpisodes})`, positiveInt)
    .option('--checkpoint-every <k>', `checkpoint every k steps (default ${DEFAULTS.checkpointEvery})`, positiveInt)
    .option(
      '--demo-policy <name>',
      'warm start: the demonstration policy (default: noisy-expert, or the expert where the scenario has none)',
    )
    .option('--demo-episodes <n>', 'warm start: demonstrations', positiveInt, 800)
    .option('--sft-steps <n>', 'warm start: SFT steps (of 8 sequences)', positiveInt, 480)
    .option('--d-model <n>', 'warm start: model width', positiveInt, 64)
    .option('--layers <n>', 'warm start: transformer layers', positiveInt, 2)
    .option('--no-copy-head', 'warm start: no copy head (the model has one by default)')
    .option('--context-length <n>', "warm start: the model's context length in tokens (as sft's)", positiveInt, 768)
    .option('--context <mode>', CONTEXT_HELP, contextMode)
    .option('--vocab <n>', 'warm start: tokenizer vocabulary', positiveInt, 768)
    .option('--backend <name>', 'tfjs backend: tensorflow-gpu, tensorflow, webgpu, wasm or cpu')
    .option('--train-threads <n>', TRAIN_THREADS_HELP, trainThreadCount)
    .option(
      '--no-replica',
      'play every episode on the main thread (by default, on wasm, a copy of the model in a worker thread plays half of each rollout)',
    )
    .option('--data <path>', 'dataset file, for the dataset scenarios')
    .option('--option <key=value>', 'a scenario option (repeatable), e.g. --option problems=multistep', keyValue, [])
    .addOption(queueFlagOptions.queue())
    .addOption(queueFlagOptions.chunk())
    .addOption(queueFlagOptions.timeout())
    .option('--json', 'print the last step and eval as JSON on the last stdout line')
    .action(async (flags: TrainFlags) => {
      const result = await runTrainCommand(flags);
      const last = result.steps.at(-1);
      const lastEval = result.evals.at(-1);
      if (flags.json)
        printJson({
          out: flags.out,
          lastStep: last ?? null,
          lastEval: lastEval ?? null,
          final: result.finalDir,
          best: result.best,
        });
      else {
        const lines = [
          `steps ${result.steps.length ? `${result.steps[0]!.step}-${last!.step}` : 'none'}; reward ${f3(result.steps[0]?.reward)} → ${f3(last?.reward)}`,
          ...(lastEval
            ? [
                `dev (step ${lastEval.step}): EM ${f3(lastEval.outcome.em ?? lastEval.success)}, reward ${f3(lastEval.reward)}`,
              ]
            : []),
          `metrics: ${join(flags.out, 'metrics.jsonl')}`,
          `policy: ckpt:${result.finalDir}`,
          ...(existsSync(join(result.finalDir, 'user')) ? [`user: ckpt:${join(result.finalDir, 'user')}`] : []),
          ...(result.best
            ? [
                `best dev checkpoint (step ${result.best.step}, dev ${f3(result.best.devScore)}): ckpt:${result.best.dir}`,
              ]
            : []),
        ];
        process.stdout.write(lines.join('\n') + '\n');
      }
    });
}

/** The model a trained user starts from: --user-policy, which must name one (ckpt:DIR or hf:DIR). */
function userModelSpec(flags: TrainFlags, scenario: { id: string; user?: unknown }): string {
  if (!scenario.user) throw new UsageError(`--roles user: scenario ${scenario.id} has no user`);
  const spec = flags.userPolicy;
  if (spec === undefined || !/^(ckpt|hf):./.test(spec))
    throw new UsageError(
      `--roles user trains the user's model: name the one it starts from with --user-policy ckpt:DIR|hf:DIR${spec === undefined ? '' : ` (got ${spec})`}`,
    );
  if (flags.queue) throw new UsageError('--roles user: the user plays in this thread, not with --queue');
  return spec;
}
