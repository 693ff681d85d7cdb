/**
 * The engine benchmark's baseline: a run's episodes with no machine and no records, sequentially:
 * the same policy, parser, tool runner and ToolEnv the engine calls. Run in this thread, or in worker
 * threads (plain-loop-thread.ts) to see how the work itself scales on this machine's cores.
 */
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  createRng,
  instantiateScenario,
  episodeConfig,
  parseAction,
  planEpisodes,
  toOpenAITool,
  ToolRunner,
  worldSeed,
  type EpisodePlanItem,
  type Message,
  type Policy,
  type Scenario,
  type TurnRecord,
} from 'agent-r1-ts';
import { taskChunks } from '../src/rollout/task-chunks.ts';

/** The repository (a bundled copy of this module is told it: its own URL is elsewhere). */
export const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * The benchmark's scenarios by the name a worker loads them with, built (`npm run build`), as the
 * CLI and the engine's threads run them: through tsx, the TypeScript sources carry its helpers
 * (the calculator's tasks() took twice as long).
 */
export async function benchScenario(source: string, root = REPO_ROOT): Promise<Scenario> {
  const options: { [name: string]: { [key: string]: string } } = { calculator: {}, 'multihop-qa': { size: 'large' } };
  if (!Object.hasOwn(options, source)) throw new Error(`bench: no scenario ${source}`);
  const mod = await import(pathToFileURL(join(root, 'dist/scenarios', source, 'index.js')).href);
  return instantiateScenario(mod.default, options[source]!);
}

/** Plans a run of `episodes` and plays all of it in this thread; returns the time and env steps. */
export async function plainLoop(
  scenario: Scenario,
  episodes: number,
  seed = 1,
): Promise<{ ms: number; steps: number }> {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  // Timed from the plan on, as rollout() is: both make the run's tasks and seeds.
  const start = performance.now();
  const plan = await planPlain(scenario, policy, episodes, seed);
  const steps = await playPlain(scenario, policy, plan);
  return { ms: performance.now() - start, steps };
}

/** A run's plan (tasks and seeds), as rollout() makes it. */
export async function planPlain(
  scenario: Scenario,
  policy: Policy,
  episodes: number,
  seed: number,
): Promise<EpisodePlanItem[]> {
  return (await planEpisodes({ scenario, policy, split: 'train', episodes, seed })).plan;
}

/**
 * The episodes thread `share` of `of` plays: those the engine's worker of the same number plays, so
 * that both do the same work. Each thread has its own search cache, so which episodes meet on one
 * thread decides how many searches are computed rather than found: split every other episode, the
 * plain loop's two threads computed 1092 searches of a multihop-qa run where the engine's two workers
 * computed 1219 (docs/benchmarks.md). The engine's pool hands a run's chunks (taskChunks) to its
 * threads in turn: where all of them are in flight at once (multihop-qa's 1200 episodes, 8 chunks),
 * chunk j plays on thread j mod `of` (as logged); later chunks of a longer run go to the thread that
 * frees first, which matters less there (the calculator computes what it is asked; no cache here).
 */
export function plainShare(plan: readonly EpisodePlanItem[], share: number, of: number): EpisodePlanItem[] {
  return taskChunks(plan, of, 'scripted')
    .filter((_, j) => j % of === share)
    .flat();
}

/** Plays the given episodes of a plan in order; returns the env steps. */
export async function playPlain(
  scenario: Scenario,
  policy: Policy,
  items: readonly EpisodePlanItem[],
): Promise<number> {
  const config = episodeConfig(scenario);
  const runner = new ToolRunner(scenario.tools, {
    timeoutMs: config.toolTimeoutMs,
    maxOutputChars: config.maxToolOutputChars,
  });
  const tools = scenario.tools.map(toOpenAITool);
  let steps = 0;
  for (const item of items) {
    const rng = createRng(worldSeed(item.seed));
    const state = await scenario.env.init?.(item.task, { rng, tools: 'live' });
    const messages: Message[] = scenario.env.prompt(item.task, tools);
    const history: TurnRecord[] = [];
    let answer: string | null = null;
    for (let turn = 0; turn < config.maxTurns; turn++) {
      const out = await policy.act({
        episodeId: 'x',
        task: item.task,
        tools,
        messages,
        turn,
        seed: 0,
        maxTokens: config.maxTokensPerTurn,
      });
      const action = parseAction(out.text);
      const results =
        action.kind === 'tool_calls'
          ? await Promise.all(action.calls.map((c) => runner.run(c, { task: item.task, rng, state })))
          : [];
      const step = await scenario.env.step({ task: item.task, state, rng, turn, action, results, history });
      steps++;
      messages.push({ role: 'assistant', content: out.text });
      if (step.observation !== null) messages.push({ role: 'tool', content: step.observation });
      history.push({
        index: turn,
        text: out.text,
        tokenCount: 0,
        action,
        results,
        observation: step.observation,
        reward: step.reward,
        done: step.done,
        states: [],
      });
      if (action.kind === 'answer') {
        answer = action.text;
        break;
      }
    }
    await scenario.env.outcome({ task: item.task, state, answer, endReason: 'answered', history });
    await scenario.env.dispose?.(state);
  }
  return steps;
}
