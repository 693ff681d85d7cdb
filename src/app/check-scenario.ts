import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, resolve } from 'node:path';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import { createActor, type AnyStateMachine } from 'xstate';
import { z } from 'zod';
import { canonicalJson } from '../core/canonical-json.ts';
import type { EpisodeConfig, EpisodeRecord, Json, Task } from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import { runEpisode } from '../episode/run-episode.ts';
import type { PolicyFactory, Scenario } from '../scenario/scenario.ts';
import { SUMMARIZE_REPLACED, withSource } from '../scenario/load.ts';
import { importUserModule, scenarioEntry } from '../scenario/user-module.ts';
import { checkDeterminism } from './check-determinism.ts';

/**
 * `agent-r1 scenario check DIR`: loads a user's scenario folder and names every problem it finds,
 * instead of stopping at the first. A pure library function: it returns the problems; the CLI prints.
 *
 * What it checks: the module loads and has a default export; the scenario's fields have the right
 * types; every tool's parameters are a zod schema whose JSON Schema z.toJSONSchema can produce, is
 * valid (draft 2020-12 meta-schema) and describes an object; tool names are valid and unique; each
 * split yields well-formed tasks, the same ones when asked twice; the world machine starts; every
 * reference policy finishes one episode (no error, within a timeout); then determinism (see
 * check-determinism.ts): each policy's episodes played twice give the same bytes and replay from
 * their records. A reference `expert` that fails some of its own episodes is a warning.
 */

export type ProblemKind =
  | 'load'
  | 'missing_export'
  | 'bad_field'
  | 'tool_schema'
  | 'tool'
  | 'tasks'
  | 'world_machine'
  | 'policy'
  | 'summarizer'
  | 'nondeterminism'
  | 'replay'
  | 'expert'
  | 'hang';

export interface ScenarioProblem {
  kind: ProblemKind;
  /** Which part: `tools[1] (lookup)`, `policies.expert`, `worldMachine`, … */
  where: string;
  message: string;
}

export interface CheckOptions {
  /** The most time a policy's episode may take (ms). */
  episodeTimeoutMs?: number;
  /**
   * Under a watchdog (checkScenarioDirInThread): the most time loading the scenario, tasks() and the
   * world machine may hold the thread without yielding (ms; default 60 000, at least the episode's).
   */
  setupTimeoutMs?: number;
  /** Seed of the tasks and episodes the check runs. */
  seed?: number;
  /** Budget overrides for the check's episodes. */
  config?: Partial<EpisodeConfig>;
  /** Options passed to a scenario whose default export is a function of its options. */
  options?: { [key: string]: string };
  /**
   * The scenario's folder (checkScenarioDir sets it): the determinism check's second run loads the
   * scenario there in a fresh worker thread, and records name it, as they do in a rollout.
   */
  source?: string;
  /** Play each policy's episodes twice, compare them and replay them (default true). */
  determinism?: boolean;
  /** Episodes each policy plays per split in the determinism check (default 2). */
  episodesPerSplit?: number;
  /** The reference expert's success rate below which it is a warning (default 1). */
  expertSuccess?: number;
  /** Parts not to run (`policies.NAME`: that policy's episode and determinism check), e.g. one that hung the check. */
  skip?: readonly string[];
  /** Told where the check is before each part that runs scenario code, with what it found so far (a watchdog reports it). */
  onPhase?: (where: string, found: Findings) => void;
}

/** What a check has found so far. */
export interface Findings {
  problems: ScenarioProblem[];
  warnings: ScenarioProblem[];
  /** What passed. */
  checked: string[];
  /** What was not checked, and why (a broken part it needs). */
  notChecked: string[];
}

export interface CheckResult {
  problems: ScenarioProblem[];
  /** Not contract violations, but worth fixing: a reference expert that fails its own tasks. */
  warnings: ScenarioProblem[];
  /** What was checked and passed, for the report (e.g. `tools: 3`, `policies.expert: answered in 2 turns`). */
  checked: string[];
  /** What was not checked, and why (e.g. determinism, until the problems are fixed). */
  notChecked: string[];
  scenario?: Scenario;
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Loads DIR/index.ts (or its compiled index.js) and checks the scenario it exports. */
export async function checkScenarioDir(dir: string, options: CheckOptions = {}): Promise<CheckResult> {
  const path = resolve(dir);
  if (!existsSync(path) || !statSync(path).isDirectory()) {
    return {
      problems: [{ kind: 'load', where: dir, message: `${path} is not a folder` }],
      warnings: [],
      checked: [],
      notChecked: [],
    };
  }
  const file = scenarioEntry(path);
  if (!file) {
    return {
      problems: [{ kind: 'load', where: dir, message: `${path} has no index.ts (or index.js)` }],
      warnings: [],
      checked: [],
      notChecked: [],
    };
  }
  const name = basename(file);
  let mod: Record<string, unknown>;
  try {
    mod = await importUserModule(file);
  } catch (err) {
    const message = `importing ${name} failed: ${errorText(err)}`;
    return { problems: [{ kind: 'load', where: name, message }], warnings: [], checked: [], notChecked: [] };
  }
  return checkScenarioModule(mod, { ...options, source: options.source ?? path });
}

/** Checks a scenario module's exports (its default export: a Scenario or a function of options). */
export async function checkScenarioModule(
  mod: Record<string, unknown>,
  options: CheckOptions = {},
): Promise<CheckResult> {
  const definition = mod['default'];
  if (definition === undefined) {
    return {
      problems: [
        {
          kind: 'missing_export',
          where: 'default',
          message: 'index.ts has no default export (the scenario, or a function returning it)',
        },
      ],
      warnings: [],
      checked: [],
      notChecked: [],
    };
  }
  let scenario: unknown = definition;
  if (typeof definition === 'function') {
    try {
      scenario = await (definition as (o: { [key: string]: string }) => unknown)(options.options ?? {});
    } catch (err) {
      return {
        problems: [{ kind: 'load', where: 'default', message: `the scenario function threw: ${errorText(err)}` }],
        warnings: [],
        checked: [],
        notChecked: [],
      };
    }
  }
  if (!scenario || typeof scenario !== 'object') {
    return {
      problems: [
        {
          kind: 'missing_export',
          where: 'default',
          message: 'the default export is not a scenario object (or a function returning one)',
        },
      ],
      warnings: [],
      checked: [],
      notChecked: [],
    };
  }
  const found = scenario as Scenario;
  // As loadScenario marks a folder's scenario: its records name the folder.
  return checkScenario(options.source ? withSource(found, options.source) : found, options);
}

/** Checks a scenario object. Every problem found is listed; checks that need a broken part are skipped. */
export async function checkScenario(scenario: Scenario, options: CheckOptions = {}): Promise<CheckResult> {
  const problems: ScenarioProblem[] = [];
  const warnings: ScenarioProblem[] = [];
  const checked: string[] = [];
  const notChecked: string[] = [];
  const phase = (where: string) => options.onPhase?.(where, { problems, warnings, checked, notChecked });
  const s = scenario as unknown as Record<string, unknown>;
  const problem = (kind: ProblemKind, where: string, message: string) => problems.push({ kind, where, message });

  // Fields.
  const required: Array<[string, string, (v: unknown) => boolean]> = [
    ['id', 'a non-empty string', (v) => typeof v === 'string' && v.length > 0],
    ['version', 'a string', (v) => typeof v === 'string'],
    ['description', 'a non-empty string', (v) => typeof v === 'string' && v.length > 0],
    [
      'splits',
      'a non-empty array of strings',
      (v) => Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string'),
    ],
    ['options', 'an object of strings', (v) => isRecord(v) && Object.values(v).every((x) => typeof x === 'string')],
    ['tasks', 'a function ({split, seed, count}) → tasks', (v) => typeof v === 'function'],
    ['tools', 'an array of tools', (v) => Array.isArray(v)],
    ['env', 'a ToolEnv object', (v) => isRecord(v)],
    ['policies', 'an object of policy factories', (v) => isRecord(v)],
  ];
  for (const [name, what, ok] of required) {
    if (s[name] === undefined) problem('missing_export', name, `the scenario has no "${name}" (${what})`);
    else if (!ok(s[name])) problem('bad_field', name, `"${name}" must be ${what}, got ${describe(s[name])}`);
  }
  const optional: Array<[string, string, (v: unknown) => boolean]> = [
    ['episode', 'an object of episode budgets', (v) => isRecord(v)],
    [
      'summarizer',
      'a function () → { add(record), result() } (and optionally digest(record))',
      (v) => typeof v === 'function',
    ],
    ['taskCount', 'a function (split) → how many tasks the split has', (v) => typeof v === 'function'],
    ['worldMachine', 'an XState machine (setup(...).createMachine(...))', isMachine],
  ];
  for (const [name, what, ok] of optional) {
    if (s[name] !== undefined && !ok(s[name]))
      problem('bad_field', name, `"${name}" must be ${what}, got ${describe(s[name])}`);
  }
  if (s['summarize'] !== undefined) problem('bad_field', 'summarize', SUMMARIZE_REPLACED);
  const env = isRecord(s['env']) ? s['env'] : undefined;
  if (env) {
    for (const fn of ['prompt', 'step', 'outcome']) {
      if (typeof env[fn] !== 'function')
        problem(
          env[fn] === undefined ? 'missing_export' : 'bad_field',
          `env.${fn}`,
          `the ToolEnv has no ${fn} function`,
        );
    }
    for (const fn of ['init', 'dispose']) {
      if (env[fn] !== undefined && typeof env[fn] !== 'function')
        problem('bad_field', `env.${fn}`, `env.${fn} must be a function, got ${describe(env[fn])}`);
    }
  }

  // Tools.
  if (Array.isArray(s['tools'])) {
    const toolProblems = checkTools(s['tools'] as unknown[]);
    problems.push(...toolProblems);
    checked.push(`tools: ${(s['tools'] as unknown[]).length}`);
  }

  // The world machine starts.
  if (isMachine(s['worldMachine'])) {
    phase('worldMachine');
    const machine = s['worldMachine'] as AnyStateMachine;
    try {
      const actor = createActor(machine);
      let failure: unknown;
      actor.subscribe({ error: (err) => (failure = err) });
      actor.start();
      const snapshot = actor.getSnapshot();
      actor.stop();
      if (failure !== undefined || snapshot.status === 'error') {
        problem(
          'world_machine',
          'worldMachine',
          `the world machine fails on start: ${errorText(failure ?? snapshot.error)}`,
        );
      } else checked.push(`worldMachine: starts in ${JSON.stringify(snapshot.value)}`);
    } catch (err) {
      problem('world_machine', 'worldMachine', `the world machine does not start: ${errorText(err)}`);
    }
  }

  // Tasks of every split, twice: the same query must give the same tasks.
  let firstTask: Task | undefined;
  let tasksDeterministic = true;
  if (typeof s['tasks'] === 'function' && Array.isArray(s['splits'])) {
    for (const split of s['splits'] as string[]) {
      phase(`tasks(${split})`);
      try {
        const tasks = await scenario.tasks({ split, seed: options.seed ?? 0, count: 2 });
        const where = `tasks(${split})`;
        if (!Array.isArray(tasks)) problem('tasks', where, `tasks() must return an array, got ${describe(tasks)}`);
        else if (tasks.length === 0) problem('tasks', where, `split "${split}" has no tasks`);
        else {
          tasks.forEach((task, i) => {
            const bad = taskProblem(task);
            if (bad) problem('tasks', `${where}[${i}]`, bad);
          });
          if (new Set(tasks.map((t) => t?.id)).size !== tasks.length)
            problem('tasks', where, 'task ids are not unique');
          if (!firstTask && tasks.every((t) => !taskProblem(t))) firstTask = tasks[0];
          const again = await scenario.tasks({ split, seed: options.seed ?? 0, count: 2 });
          const differs = tasksDifference(tasks, again);
          if (differs) {
            tasksDeterministic = false;
            problem(
              'nondeterminism',
              where,
              `two calls with the same {split, seed, count} gave different tasks (${differs}); likely cause: ` +
                'Math.random or Date.now in the task source (draw from createRng(deriveSeed(split, seed)))',
            );
          }
          if (!differs) checked.push(`${where}: ${tasks.length} tasks, the same when asked again`);
          if (typeof s['taskCount'] === 'function') {
            // a fixed split: asked for one more than it says it has, it gives exactly that many
            const n = scenario.taskCount!(split);
            const all =
              Number.isInteger(n) && n > 0
                ? await scenario.tasks({ split, seed: options.seed ?? 0, count: n + 1 })
                : [];
            if (all.length !== n)
              problem(
                'tasks',
                `taskCount(${split})`,
                `taskCount says ${Number.isInteger(n) ? n : describe(n)} tasks, tasks() gives ${all.length}`,
              );
          }
        }
      } catch (err) {
        problem('tasks', `tasks(${split})`, `tasks() threw: ${errorText(err)}`);
      }
    }
  }

  // Every reference policy finishes an episode.
  if (isRecord(s['policies'])) {
    const names = Object.keys(s['policies']);
    if (names.length === 0)
      problem(
        'policy',
        'policies',
        'the scenario has no reference policy (e.g. an `expert`), so nothing shows an episode can finish',
      );
    // Episodes need a complete ToolEnv and a task; tools with broken schemas are left out of them
    // (their problems are already listed), so a policy's own failure is still found.
    const envComplete = env !== undefined && ['prompt', 'step', 'outcome'].every((fn) => typeof env[fn] === 'function');
    const brokenTools = new Set(
      problems.filter((p) => p.kind === 'tool' || p.kind === 'tool_schema').map((p) => p.where),
    );
    const tools = Array.isArray(s['tools'])
      ? (s['tools'] as unknown[]).filter(
          (t, i) => isRecord(t) && ![...brokenTools].some((w) => w === `tools[${i}]` || w.startsWith(`tools[${i}] `)),
        )
      : [];
    const runnable = envComplete && firstTask !== undefined;
    const finished: Array<{ name: string; factory: PolicyFactory }> = [];
    const records: EpisodeRecord[] = [];
    const episodeScenario = { ...scenario, tools } as Scenario;
    for (const name of names) {
      const factory = (s['policies'] as Record<string, unknown>)[name];
      const where = `policies.${name}`;
      if (options.skip?.includes(where)) continue;
      phase(where);
      if (typeof factory !== 'function') {
        problem(
          'bad_field',
          where,
          `a policy entry must be a factory function (ctx) → Policy, got ${describe(factory)}`,
        );
        continue;
      }
      let policy: Policy;
      try {
        policy = await factory({ scenario, seed: options.seed ?? 0 });
      } catch (err) {
        problem('policy', where, `the policy factory threw: ${errorText(err)}`);
        continue;
      }
      if (!isRecord(policy) || typeof policy.act !== 'function' || typeof policy.id !== 'string') {
        problem('policy', where, `the factory must return a Policy ({id, version, act}), got ${describe(policy)}`);
        continue;
      }
      if (!runnable) {
        notChecked.push(`${where}: episode not run (the ToolEnv or the tasks are broken)`);
        continue;
      }
      const record = await runOneEpisode(episodeScenario, firstTask!, policy, options);
      if (typeof record === 'string') problem('policy', where, record);
      else {
        checked.push(
          `${where}: finished (${record.endReason}) in ${record.turns.length} turns, success ${record.outcome.success}`,
        );
        finished.push({ name, factory: factory as PolicyFactory });
        records.push(record);
      }
    }
    if (typeof s['summarizer'] === 'function' && records.length > 0) {
      phase('summarizer');
      const trouble = summarizerProblem(scenario.summarizer!, records);
      if (trouble) problem('summarizer', 'summarizer', trouble);
      else checked.push(`summarizer: summarized the reference policies' ${records.length} episodes`);
    }
    // Determinism needs a sound scenario: with broken tools or tasks that change, it would only repeat those.
    const sound = problems.length === 0;
    if ((options.determinism ?? true) && finished.length > 0) {
      if (!sound || !tasksDeterministic) {
        notChecked.push('determinism: not checked until the problems above are fixed');
      } else {
        const report = await checkDeterminism(scenario, finished, {
          seed: options.seed ?? 0,
          config: options.config,
          episodeTimeoutMs: options.episodeTimeoutMs ?? 10_000,
          episodesPerSplit: options.episodesPerSplit,
          source: options.source,
          expertSuccess: options.expertSuccess,
          onPolicy: (name) => phase(`policies.${name}`),
        });
        problems.push(...report.problems);
        warnings.push(...report.warnings);
        checked.push(...report.checked);
        // A scenario with a state card supports the step-level mode that shows it: its runs with
        // --context card must repeat and replay too (checked unless a mode was named).
        if (options.config?.context === undefined && typeof scenario.env.card === 'function') {
          const card = await checkDeterminism(scenario, finished, {
            seed: options.seed ?? 0,
            config: { ...options.config, context: 'card' },
            episodeTimeoutMs: options.episodeTimeoutMs ?? 10_000,
            episodesPerSplit: options.episodesPerSplit,
            source: options.source,
            expertSuccess: options.expertSuccess,
            onPolicy: (name) => phase(`policies.${name}`),
          });
          const underCard = (p: ScenarioProblem) => ({ ...p, message: `${p.message} (with --context card)` });
          problems.push(...card.problems.map(underCard));
          warnings.push(...card.warnings.map(underCard));
          checked.push(...card.checked.map((c) => `${c} (with --context card)`));
        }
      }
    }
  }
  return { problems, warnings, checked, notChecked, scenario };
}

async function runOneEpisode(
  scenario: Scenario,
  task: Task,
  policy: Policy,
  options: CheckOptions,
): Promise<string | EpisodeRecord> {
  const timeoutMs = options.episodeTimeoutMs ?? 10_000;
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((res) => {
    timer = setTimeout(() => res('timeout'), timeoutMs);
  });
  const episode = runEpisode({
    scenario,
    task,
    policy,
    seed: options.seed ?? 0,
    config: options.config,
    signal: controller.signal,
  });
  episode.catch(() => {}); // a late failure after the timeout must not become unhandled
  try {
    const record = await Promise.race([episode, timeout]);
    if (record === 'timeout') {
      controller.abort(new Error('scenario check: episode timeout'));
      return `the policy did not finish an episode of task ${task.id} within ${timeoutMs} ms`;
    }
    if (record.status === 'error')
      return `the episode of task ${task.id} ended in an error at turn ${record.turns.length + 1}: ${record.error}`;
    return record;
  } catch (err) {
    return `the episode of task ${task.id} could not run: ${errorText(err)}`;
  } finally {
    clearTimeout(timer);
  }
}

/** What is wrong with a scenario's summarizer over some records, if anything. */
function summarizerProblem(
  summarizer: NonNullable<Scenario['summarizer']>,
  records: EpisodeRecord[],
): string | undefined {
  let fold: unknown;
  try {
    fold = summarizer();
  } catch (err) {
    return `summarizer() threw: ${errorText(err)}`;
  }
  if (!isRecord(fold) || typeof fold['add'] !== 'function' || typeof fold['result'] !== 'function')
    return `summarizer() must return { add(record), result() }, got ${describe(fold)}`;
  const digest = fold['digest'];
  if (digest !== undefined && typeof digest !== 'function')
    return `the summarizer's digest must be a function (record) → what add needs, got ${describe(digest)}`;
  let result: unknown;
  try {
    for (const record of records) {
      let input: unknown = record;
      if (typeof digest === 'function') {
        // As a worker thread sends it to the main thread.
        const taken = digest.call(fold, record);
        try {
          input = structuredClone(taken);
        } catch (err) {
          return `the summarizer's digest must return plain data (numbers, strings, objects, arrays) that can be sent between threads: ${errorText(err)}`;
        }
      }
      (fold['add'] as (input: unknown) => void).call(fold, input);
    }
    result = (fold['result'] as () => unknown).call(fold);
  } catch (err) {
    return `the summarizer threw: ${errorText(err)}`;
  }
  if (!isRecord(result)) return `the summarizer's result() must be an object of metrics, got ${describe(result)}`;
  return undefined;
}

// Loaded on first use: this module is part of the package's root, which every worker thread loads.
let validator: Ajv2020 | undefined;
function schemaValidator(): Ajv2020 {
  if (!validator) {
    const ajv = createRequire(import.meta.url)('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js');
    validator = new ajv.Ajv2020({ strict: false, allErrors: true });
  }
  return validator;
}

/** Problems with the tools: shape, names, and JSON Schemas of their parameters. */
export function checkTools(tools: readonly unknown[]): ScenarioProblem[] {
  const problems: ScenarioProblem[] = [];
  const seen = new Map<string, number>();
  tools.forEach((t, i) => {
    const label = isRecord(t) && typeof t['name'] === 'string' ? `tools[${i}] (${t['name']})` : `tools[${i}]`;
    const add = (kind: ProblemKind, message: string) => problems.push({ kind, where: label, message });
    if (!isRecord(t)) {
      add('tool', `a tool must be an object made with tool({...}), got ${describe(t)}`);
      return;
    }
    const name = t['name'];
    if (typeof name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(name))
      add('tool', `the name must be 1-64 letters, digits, _ or -, got ${describe(name)}`);
    else if (seen.has(name)) add('tool', `the name "${name}" is also used by tools[${seen.get(name)}]`);
    else seen.set(name, i);
    if (typeof t['description'] !== 'string' || t['description'].length === 0)
      add('tool', 'the description must be a non-empty string');
    if (typeof t['execute'] !== 'function') add('tool', 'execute must be a function (args, ctx) → result');
    const parameters = t['parameters'];
    if (!(parameters instanceof z.ZodType)) {
      add('tool_schema', `parameters must be a zod schema (z.object({...})), got ${describe(parameters)}`);
      return;
    }
    let schema: Record<string, unknown>;
    try {
      schema = z.toJSONSchema(parameters) as Record<string, unknown>;
    } catch (err) {
      add('tool_schema', `its parameters cannot be written as JSON Schema: ${errorText(err)}`);
      return;
    }
    const ajv = schemaValidator();
    if (!ajv.validateSchema(schema)) {
      add(
        'tool_schema',
        `its parameters' JSON Schema is invalid: ${ajv.errorsText(ajv.errors, { dataVar: 'schema' })}`,
      );
      return;
    }
    if (schema['type'] !== 'object')
      add(
        'tool_schema',
        `its parameters must describe an object (the call's arguments), got type ${describe(schema['type'])}`,
      );
  });
  return problems;
}

/** How two task lists differ, in words (undefined when they are equal). */
function tasksDifference(a: readonly Task[], b: readonly Task[]): string | undefined {
  if (a.length !== b.length) return `${a.length} tasks, then ${b.length}`;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as unknown as Record<string, unknown>;
    const y = b[i] as unknown as Record<string, unknown>;
    for (const key of new Set([...Object.keys(x), ...Object.keys(y)])) {
      const [p, q] = [canonicalJson((x[key] ?? null) as Json), canonicalJson((y[key] ?? null) as Json)];
      if (p !== q) return `task ${i}'s ${key}: ${clipText(p)}, then ${clipText(q)}`;
    }
  }
  return undefined;
}

const clipText = (s: string, n = 80) => (s.length > n ? `${s.slice(0, n)}…` : s);

function taskProblem(task: unknown): string | undefined {
  if (!isRecord(task)) return `a task must be an object, got ${describe(task)}`;
  if (typeof task['id'] !== 'string' || task['id'] === '') return 'the task has no string id';
  if (typeof task['question'] !== 'string') return `task ${task['id']} has no string question`;
  if (typeof task['split'] !== 'string') return `task ${task['id']} has no split`;
  return undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function isMachine(v: unknown): boolean {
  return isRecord(v) && isRecord(v['root']) && typeof (v as { transition?: unknown }).transition === 'function';
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)}`;
}
