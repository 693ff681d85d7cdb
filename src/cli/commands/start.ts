import { existsSync, readdirSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { initBackend } from '../../policy/tfjs/backend.ts';
import { TrainingError } from '../../rl/errors.ts';
import { formatPaperTable, paperTableJson, runPaper } from '../../app/paper.ts';
import { loadScenario } from '../../scenario/load.ts';
import { contextSetting } from '../../env/context.ts';
import { CONTEXT_HELP, contextMode, integer, positiveInt, TRAIN_THREADS_HELP } from '../common.ts';
import { START_SCENARIO_OPTIONS, startBudget, startScenarioOptions } from '../../app/start.ts';

interface StartFlags {
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
      'the main job: multi-hop QA world → SFT warm start on imperfect demonstrations → GRPO, then the results table',
    )
    .option('--quick', 'a small run for CI (under 2 minutes) that still shows the reward rising')
    .option('--seed <n>', 'seed of the world, the demonstrations and the training', integer, 1)
    .option('--out <dir>', 'run directory (default runs/start or runs/start-quick)')
    .option('--backend <name>', 'tfjs backend: tensorflow-gpu, tensorflow, webgpu, wasm or cpu')
    .option('--json', 'end with the table as one JSON line: {"methods": [{method, test, ood}], "seconds": {…}}')
    .option('--train-threads <n>', TRAIN_THREADS_HELP, positiveInt)
    .option('--context <mode>', CONTEXT_HELP, contextMode)
    .option(
      '--no-replica',
      'play every episode on the main thread (by default, on wasm, a copy of the model in a worker thread plays half of them on a second core)',
    )
    .action(async (flags: StartFlags) => {
      const t0 = performance.now();
      const say = (s: string) =>
        process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${s}\n`);
      const quick = flags.quick ?? false;
      const out = flags.out ?? join('runs', quick ? 'start-quick' : 'start');
      if (existsSync(out)) {
        // The main job starts over; refuse to wipe a directory it did not make.
        if (
          !existsSync(join(out, 'warm-start')) &&
          !existsSync(join(out, 'paper.json')) &&
          readdirSync(out).length > 0
        ) {
          throw new TrainingError(`${out} exists and is not a start run; choose another --out`);
        }
        rmSync(out, { recursive: true, force: true });
      }
      const info = await initBackend(flags.backend);
      say(`backend ${info.name}`);
      const scenario = await loadScenario('multihop-qa', builtinScenarios, {
        seed: String(flags.seed),
        ...startScenarioOptions(quick),
      });
      say(scenario.description);
      const budget = startBudget(quick);
      const context = contextSetting(scenario, flags.context);
      if (context !== undefined) budget.episode = { ...budget.episode, context };
      const result = await runPaper({
        scenario,
        seed: flags.seed,
        algos: ['grpo'],
        outDir: out,
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
              `${e.algo} step ${m.step}/${budget.rl.steps}  reward ${m.reward.toFixed(3)}  EM ${(m.outcome.em ?? m.success).toFixed(3)}  ` +
                `entropy ${m.entropy.toFixed(3)}  clip ${m.clipFraction.toFixed(3)}  grad ${m.gradNorm.toFixed(2)}  ${m.time.tokensPerS.toFixed(0)} tok/s`,
            );
          }
          if (e.eval)
            say(
              `${e.algo} eval on ${e.eval.split} at step ${e.eval.step}: EM ${(e.eval.outcome.em ?? e.eval.success).toFixed(3)}`,
            );
        },
      });
      const rewards = result.rewards.map((r) => r.reward);
      const half = Math.max(1, Math.floor(rewards.length / 2));
      const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
      const lines = [
        '',
        formatPaperTable(result.scores),
        '',
        `EM and F1 in %, greedy decoding; test ${budget.evalEpisodes.test} and ood ${budget.evalEpisodes.ood} episodes.`,
        `warm start: ${result.warmStart.sequences} noisy-expert demonstrations (${(100 * result.warmStart.demoSuccess).toFixed(0)}% correct; ` +
          `${100 * Number(START_SCENARIO_OPTIONS.noisyEarly)}% answer one search early with the bridge entity), ` +
          `${result.warmStart.steps} SFT steps, ${result.warmStart.parameters} parameters`,
        `GRPO training reward per step: ${rewards.map((r) => r.toFixed(3)).join(' ')}`,
        `mean reward, first half → second half: ${avg(rewards.slice(0, half)).toFixed(3)} → ${avg(rewards.slice(half)).toFixed(3)}`,
        `time: ${Object.entries(result.seconds)
          .map(([k, v]) => `${k} ${v.toFixed(0)} s`)
          .join(', ')}; total ${((performance.now() - t0) / 1000).toFixed(0)} s`,
        `run directory: ${out}  (GRPO policy: ckpt:${join(out, 'grpo', 'final')}; metrics: ${join(out, 'grpo', 'metrics.jsonl')})`,
      ];
      process.stdout.write(lines.join('\n') + '\n');
      if (flags.json) {
        const total = (performance.now() - t0) / 1000;
        const table = paperTableJson(result.scores, { ...result.seconds, total });
        process.stdout.write(`${JSON.stringify(table)}\n`);
      }
    });
}
