import { existsSync, readdirSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { initBackend } from '../../policy/tfjs/backend.ts';
import { TrainingError } from '../../rl/errors.ts';
import { formatPaperTable, paperTableJson, runPaper } from '../../app/paper.ts';
import { sequencesWords } from '../../rl/warm-start.ts';
import { loadScenario } from '../../scenario/load.ts';
import { contextSetting } from '../../env/context.ts';
import {
  CONTEXT_HELP,
  contextMode,
  integer,
  isHfModel,
  LORA_HELP,
  loraAlpha,
  loraRequest,
  modelInit,
  positiveInt,
  TRAIN_THREADS_HELP,
  trainThreadCount,
  kernelTrainThreads,
} from '../common.ts';
import type { HfModelRequest } from '../../app/paper.ts';
import { START_SCENARIO_OPTIONS } from '../../app/start.ts';
import { FAMILIES, FAMILY_NAMES, hfFamilyBudget, type Family } from '../../app/families.ts';
import { InvalidArgumentError } from 'commander';
import { UsageError } from '../../core/errors.ts';
import { loadAgent } from '../../gateway/agent-module.ts';
import { readTasksFile, tasksOfSplit } from '../../gateway/tasks-file.ts';
import { AGENT_START_SPLITS, agentBudget, runAgentStart } from '../../app/agent-start.ts';
import { trainReplicas } from '../../rl/train-threads.ts';

function familyName(value: string): string {
  if (!Object.hasOwn(FAMILIES, value)) throw new InvalidArgumentError(`expected one of ${FAMILY_NAMES.join(', ')}`);
  return value;
}

/** The demonstrator's declared error rates, as the family's options set them. */
function noisyHabits(family: Family): string {
  const options = family.options(false, 0);
  const rates = Object.entries(options).filter(([k]) => k.startsWith('noisy'));
  return rates.length > 0 ? rates.map(([k, v]) => `${k} ${v}`).join(', ') : 'the scenario default';
}

/**
 * The job starts over in `out`: a start run's folder (its warm start, or its result file) is
 * removed; a folder it did not make, with anything in it, is refused rather than wiped.
 */
function startOver(out: string, resultFile: string): void {
  if (!existsSync(out)) return;
  if (!existsSync(join(out, 'warm-start')) && !existsSync(join(out, resultFile)) && readdirSync(out).length > 0)
    throw new TrainingError(`${out} exists and is not a start run; choose another --out`);
  rmSync(out, { recursive: true, force: true });
}

interface StartFlags {
  scenario: string;
  agent?: string;
  init?: string;
  lora?: number;
  loraAlpha?: number;
  quick?: boolean;
  seed: number;
  out?: string;
  backend?: string;
  replica: boolean;
  trainThreads?: number;
  context?: string;
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command('start')
    .description(
      'the main job: a task family (multi-hop QA by default) → SFT warm start on imperfect demonstrations → GRPO, then the results table',
    )
    .option(
      '--scenario <family>',
      `the task family: ${FAMILY_NAMES.join(', ')} (multihop-qa: the paper's main job)`,
      familyName,
      'multihop-qa',
    )
    .option(
      '--agent <dir>',
      "instead of a family: an agent folder (index.ts's default export, a demonstrator, tasks.jsonl), trained through the gateway; " +
        'its tasks.jsonl needs "split": "train" tasks (demonstrations, GRPO) and "test" tasks (the held-out table, up to 200); "dev" tasks, if any, pick the best GRPO checkpoint',
    )
    .option(
      '--init <hf:DIR|ckpt:DIR>',
      'train this Hugging Face model instead of a new GPT: its warm start is SFT on the same demonstrations through its own chat template, then GRPO and the same table',
      modelInit,
    )
    .option('--lora <R>', LORA_HELP.rank, positiveInt)
    .option('--lora-alpha <A>', LORA_HELP.alpha, loraAlpha)
    .option('--quick', 'a small run for CI (under 2 minutes) that runs the whole pipeline')
    .option('--seed <n>', 'seed of the world, the demonstrations and the training', integer, 1)
    .option('--out <dir>', 'run directory (default runs/start or runs/start-quick)')
    .option('--backend <name>', 'tfjs backend: tensorflow-gpu, tensorflow, webgpu, wasm or cpu')
    .option('--json', 'end with the table as one JSON line: {"methods": [{method, test, ood}], "seconds": {…}}')
    .option('--train-threads <n>', TRAIN_THREADS_HELP, trainThreadCount)
    .option('--context <mode>', CONTEXT_HELP, contextMode)
    .option(
      '--no-replica',
      'play every episode on the main thread (by default, on wasm, a copy of the model in a worker thread plays half of them on a second core)',
    )
    .action(async (flags: StartFlags, command: Command) => {
      const lora = loraRequest(flags, flags.init !== undefined);
      if (flags.init !== undefined && !(await isHfModel(flags.init)))
        throw new UsageError(
          `${flags.init} is not a Hugging Face model: start --init trains one (hf:DIR, or ckpt:DIR of one)`,
        );
      const hf =
        flags.init === undefined
          ? undefined
          : { init: flags.init, ...(lora ? { lora } : {}), ...kernelTrainThreads(flags.trainThreads) };
      if (flags.agent !== undefined) {
        if (command.getOptionValueSource('scenario') === 'cli')
          throw new UsageError('--agent and --scenario name two different jobs: give one');
        await startAgent(flags, hf);
        return;
      }
      const t0 = performance.now();
      const say = (s: string) =>
        process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${s}\n`);
      const quick = flags.quick ?? false;
      const family = FAMILIES[flags.scenario]!;
      const main = flags.scenario === 'multihop-qa';
      const name = main ? 'start' : `start-${flags.scenario}`;
      const out = flags.out ?? join('runs', quick ? `${name}-quick` : name);
      startOver(out, 'paper.json');
      const info = await initBackend(flags.backend);
      say(`backend ${info.name}`);
      const scenario = await loadScenario(family.scenario, builtinScenarios, family.options(quick, flags.seed));
      say(scenario.description);
      const budget = hf ? hfFamilyBudget(family.budget(quick), quick, hf) : family.budget(quick);
      if (hf) say(`model ${hf.init}${hf.lora ? ` with rank-${hf.lora.rank} LoRA adapters` : ''}`);
      const metric = family.metric === 'em' ? 'EM' : 'success';
      if (flags.context !== undefined) {
        // The run's --context replaces the family's own (gridworld's card, support-desk's window).
        const { context: _default, ...episode } = budget.episode ?? {};
        const context = contextSetting(scenario, flags.context);
        budget.episode = context === undefined ? episode : { ...episode, context };
      }
      const result = await runPaper({
        scenario,
        seed: flags.seed,
        algos: ['grpo'],
        outDir: out,
        evalSplits: family.evalSplits,
        references: family.references,
        replica: flags.replica,
        trainThreads: flags.trainThreads ?? availableParallelism(),
        ...budget,
        onEvent: (e) => {
          if (e.message) say(e.message);
          if (e.sft && (e.sft.step % 10 === 0 || e.sft.step === e.sft.steps)) {
            say(
              `sft step ${e.sft.step}/${e.sft.steps}  loss ${e.sft.loss.toFixed(3)}  ${e.sft.tokensPerS.toFixed(0)} tok/s`,
            );
          }
          if (e.step) {
            const m = e.step;
            say(
              `${e.algo} step ${m.step}/${budget.rl.steps}  reward ${m.reward.toFixed(3)}  ${metric} ${(m.outcome.em ?? m.success).toFixed(3)}  ` +
                `entropy ${m.entropy.toFixed(3)}  clip ${m.clipFraction.toFixed(3)}  grad ${m.gradNorm.toFixed(2)}  ${m.time.tokensPerS.toFixed(0)} tok/s` +
                (m.user ? `  user: entropy ${m.user.entropy.toFixed(3)}  grad ${m.user.gradNorm.toFixed(2)}` : ''),
            );
          }
          if (e.eval)
            say(
              `${e.algo} eval on ${e.eval.split} at step ${e.eval.step}: ${metric} ${(e.eval.outcome.em ?? e.eval.success).toFixed(3)}`,
            );
        },
      });
      const rewards = result.rewards.filter((r) => !r.coTrained).map((r) => r.reward);
      const coTrained = result.rewards.filter((r) => r.coTrained).map((r) => r.reward);
      const half = Math.max(1, Math.floor(rewards.length / 2));
      const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
      const episodes = family.evalSplits.map(
        (s) => `${s} ${s === 'ood' ? budget.evalEpisodes.ood : budget.evalEpisodes.test}`,
      );
      const habits = main
        ? `${100 * Number(START_SCENARIO_OPTIONS.noisyEarly)}% answer one search early with the bridge entity`
        : `its errors: ${scenario.policies['noisy-expert'] ? noisyHabits(family) : 'none'}`;
      const lines = [
        '',
        formatPaperTable(result.scores, family.metric),
        '',
        `${family.metric === 'em' ? 'EM and F1' : 'Success'} in %, greedy decoding; ${episodes.join(' and ')} episodes.`,
        `warm start: ${result.warmStart.demonstrations} ${budget.warmStart.demoPolicy} demonstrations (${(100 * result.warmStart.demoSuccess).toFixed(0)}% correct; ` +
          `${habits})${sequencesWords(result.warmStart)}, ` +
          `${result.warmStart.steps} SFT steps, ${result.warmStart.parameters} parameters`,
        ...(result.userWarmStart
          ? [
              `the user's warm start: its view of the same demonstrations (${family.budget(quick).user?.demoPolicy} user), ` +
                `${result.userWarmStart.steps} SFT steps, ${result.userWarmStart.parameters} parameters`,
            ]
          : []),
        `GRPO training reward per step: ${rewards.map((r) => r.toFixed(3)).join(' ')}`,
        `mean reward, first half → second half: ${avg(rewards.slice(0, half)).toFixed(3)} → ${avg(rewards.slice(half)).toFixed(3)}`,
        ...(coTrained.length > 0
          ? [
              `co-trained training reward per step: ${coTrained.map((r) => r.toFixed(3)).join(' ')}`,
              `co-trained mean reward, first half → second half: ${avg(coTrained.slice(0, half)).toFixed(3)} → ${avg(coTrained.slice(half)).toFixed(3)}`,
            ]
          : []),
        `time: ${Object.entries(result.seconds)
          .map(([k, v]) => `${k} ${v.toFixed(0)} s`)
          .join(', ')}; total ${((performance.now() - t0) / 1000).toFixed(0)} s`,
        `run directory: ${out}  (GRPO policy: ckpt:${join(out, 'grpo', 'final')}; metrics: ${join(out, 'grpo', 'metrics.jsonl')})`,
        ...(result.userWarmStart
          ? [
              `co-trained: ckpt:${join(out, 'grpo-co-trained', 'final')} and its user ckpt:${join(out, 'grpo-co-trained', 'final', 'user')}`,
            ]
          : []),
      ];
      process.stdout.write(lines.join('\n') + '\n');
      if (flags.json) {
        const total = (performance.now() - t0) / 1000;
        const table = paperTableJson(result.scores, { ...result.seconds, total });
        process.stdout.write(`${JSON.stringify(table)}\n`);
      }
    });
}

/** `start --agent DIR`: the families' job for an agent folder, through the gateway. */
async function startAgent(flags: StartFlags, hf: HfModelRequest | undefined): Promise<void> {
  const t0 = performance.now();
  const say = (s: string) =>
    process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${s}\n`);
  const quick = flags.quick ?? false;
  const agent = await loadAgent(flags.agent!);
  if (!agent.demonstrator)
    throw new UsageError(`${agent.file} exports no demonstrator: start --agent warm-starts a model on its episodes`);
  if (!agent.tasksFile) throw new UsageError(`${flags.agent} has no tasks.jsonl beside its index`);
  const tasks = await readTasksFile(agent.tasksFile);
  // Before the run directory is cleared or a backend starts: a missing split is a usage error.
  for (const [split, purpose] of Object.entries(AGENT_START_SPLITS))
    tasksOfSplit(tasks, split, agent.tasksFile, purpose);
  const out = flags.out ?? join('runs', quick ? 'start-agent-quick' : 'start-agent');
  startOver(out, 'agent-start.json');
  const info = await initBackend(flags.backend);
  say(`backend ${info.name}; agent ${agent.file} (${tasks.length} tasks)`);
  const budget = agentBudget(quick);
  // The agent's budget is the calculator family's (agentBudget): so is its Hugging Face variant.
  const hfBudget = hf ? hfFamilyBudget(FAMILIES.calculator!.budget(quick), quick, hf) : undefined;
  if (hfBudget) {
    budget.rl = hfBudget.rl;
    budget.testEpisodes = hfBudget.evalEpisodes.test as number;
    say(`model ${hf!.init}${hf!.lora ? ` with rank-${hf!.lora.rank} LoRA adapters` : ''}`);
  }
  const { replicas, note } = hf
    ? { replicas: undefined, note: undefined }
    : trainReplicas(info.name, flags.trainThreads ?? availableParallelism());
  if (note) say(note);
  try {
    const result = await runAgentStart({
      agent,
      tasks,
      tasksFile: agent.tasksFile,
      seed: flags.seed,
      outDir: out,
      budget,
      ...(hfBudget ? { hf: hfBudget.hf } : {}),
      replicas,
      onEvent: (e) => {
        if (e.message) say(e.message);
        if (e.sft && (e.sft.step % 100 === 0 || e.sft.step === e.sft.steps))
          say(`sft step ${e.sft.step}/${e.sft.steps}  loss ${e.sft.loss.toFixed(3)}`);
        if (e.step)
          say(
            `grpo step ${e.step.step}/${budget.rl.steps}  reward ${e.step.reward.toFixed(3)}  success ${e.step.success.toFixed(3)}  failed ${e.step.failed}  ${e.step.time.tokensPerS.toFixed(0)} tok/s`,
          );
        if (e.eval) say(`grpo eval on ${e.eval.split} at step ${e.eval.step}: success ${e.eval.success.toFixed(3)}`);
      },
    });
    const total = (performance.now() - t0) / 1000;
    const rewards = result.rewards.map((r) => r.toFixed(3)).join(' ');
    const lines = [
      '',
      formatPaperTable(result.scores, 'success'),
      '',
      `Success in %, greedy decoding; ${result.tasks.test} held-out test tasks (of ${tasks.length} in ${agent.tasksFile}: train ${result.tasks.train}, dev ${result.tasks.dev}); every episode the agent's own code, through the gateway.`,
      `warm start: ${result.warmStart.demonstrations} demonstrations (${(100 * result.warmStart.demoSuccess).toFixed(0)}% correct), ${result.warmStart.steps} SFT steps, ${result.warmStart.parameters} parameters`,
      `GRPO training reward per step: ${rewards}`,
      `time: ${Object.entries(result.seconds)
        .map(([k, v]) => `${k} ${v.toFixed(0)} s`)
        .join(', ')}; total ${total.toFixed(0)} s`,
      `run directory: ${out}  (GRPO policy: ckpt:${join(out, 'grpo', 'final')}; test records: ${join(out, 'test-grpo.jsonl')})`,
    ];
    process.stdout.write(lines.join('\n') + '\n');
    if (flags.json)
      process.stdout.write(`${JSON.stringify(paperTableJson(result.scores, { ...result.seconds, total }))}\n`);
  } finally {
    await replicas?.close();
  }
}
