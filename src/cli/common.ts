import { InvalidArgumentError } from 'commander';
import { UnknownNameError, UsageError } from '../core/errors.ts';
import { EPISODE_LIMITS, type EpisodeBudget } from '../core/types.ts';
import { builtinScenarios } from '../../scenarios/index.ts';
import { contextSetting } from '../env/context.ts';
import { loadScenario } from '../scenario/load.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { MAX_TRAIN_THREADS } from '../rollout/worker-count.ts';
import { threadsOnCores } from '../rl/train-threads.ts';
import { terminalText } from './terminal-text.ts';
import { readHfCheckpoint } from '../hf/checkpoint.ts';
import type { LoadDtype } from '../hf/folder.ts';

export { EXIT_FAILED, EXIT_USAGE } from './exit-codes.ts';

/** Where a count or seed must lie: JavaScript's exact integers, which schemas and seeds take. */
const SAFE = `(at most ${Number.MAX_SAFE_INTEGER} in size)`;

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`expected a positive integer ${SAFE}`);
  return n;
}

export function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`expected a non-negative integer ${SAFE}`);
  return n;
}

export function nonNegativeNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !(n >= 0) || n === Infinity) throw new InvalidArgumentError('expected a number ≥ 0');
  return n;
}

export function finiteNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError('expected a number');
  return n;
}

/** `--dtype` of a command that loads a Hugging Face model: how its weights are held. */
export const LOAD_DTYPE_HELP =
  "how a Hugging Face model's weights are held: auto (BF16 matrices stay 16-bit: half the memory) or f32 (all widened; the same logits, bit for bit)";

export function loadDtype(value: string): LoadDtype {
  if (value === 'auto') return 'auto';
  if (value.toLowerCase() === 'f32') return 'F32';
  throw new InvalidArgumentError('expected auto or f32');
}

/** Whether `--init` names a Hugging Face model: hf:DIR, or ckpt:DIR of one trained here. */
export async function isHfModel(spec: string): Promise<boolean> {
  if (spec.startsWith('hf:')) return true;
  return spec.startsWith('ckpt:') && (await readHfCheckpoint(spec.slice('ckpt:'.length))) !== null;
}

export function integer(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new InvalidArgumentError(`expected an integer ${SAFE}`);
  return n;
}

/** A parser of an episode budget flag: an integer within the bounds a queue job is held to too. */
export function budget(name: EpisodeBudget): (value: string) => number {
  const { min, max } = EPISODE_LIMITS[name];
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}`);
    return n;
  };
}

/** Collects repeated `--option key=value` flags. */
export function keyValue(value: string, previous: string[] = []): string[] {
  if (!/^[\w-]+=/.test(value)) throw new InvalidArgumentError('expected key=value');
  return [...previous, value];
}

/** Collects repeated flags (`--scenario DIR --scenario DIR2`). */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** The help of `--scenario` on the commands that read records (replay, report, export, view). */
export const RECORD_SCENARIO_HELP =
  "a scenario folder (or built-in name) the records were played in; a folder's code runs only when " +
  'it is named here, never because a record names it (repeatable)';

/** Loads a scenario by built-in name or folder, with the options given on the command line. */
export function scenarioFromFlags(flags: { scenario: string; data?: string; option?: string[] }): Promise<Scenario> {
  const options: { [key: string]: string } = {};
  for (const kv of flags.option ?? []) {
    const at = kv.indexOf('=');
    options[kv.slice(0, at)] = kv.slice(at + 1);
  }
  if (flags.data) options.data = flags.data;
  return loadScenario(flags.scenario, builtinScenarios, options);
}

/** Rejects a split the scenario does not have, listing the ones it does. */
export function checkSplit(scenario: Scenario, split: string): void {
  if (!scenario.splits.includes(split)) {
    throw new UnknownNameError(`split of scenario ${scenario.id}`, split, scenario.splits);
  }
}

/** Prints the last stdout line of a --json command. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}

const fmt = (v: unknown) =>
  typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : JSON.stringify(v);

/** A summary as aligned `key  value` lines, with nested per-key tables (byType) as columns. */
export function formatSummary(summary: Record<string, unknown>): string {
  const lines: string[] = [];
  const tables: [string, Record<string, Record<string, unknown>>][] = [];
  for (const [key, value] of Object.entries(summary)) {
    if (
      value &&
      typeof value === 'object' &&
      !Array.isArray(value) &&
      Object.values(value).every((v) => v && typeof v === 'object')
    ) {
      tables.push([key, value as Record<string, Record<string, unknown>>]);
    } else {
      lines.push(`${key.padEnd(16)} ${fmt(value)}`);
    }
  }
  for (const [key, rows] of tables) {
    const columns = [...new Set(Object.values(rows).flatMap((r) => Object.keys(r)))];
    const names = Object.keys(rows);
    const width = Math.max(key.length, ...names.map((n) => n.length)) + 2;
    lines.push('', key.padEnd(width) + columns.map((c) => c.padStart(8)).join(''));
    for (const name of names)
      lines.push(name.padEnd(width) + columns.map((c) => fmt(rows[name]![c] ?? '').padStart(8)).join(''));
  }
  return terminalText(lines.join('\n'));
}

/** `--context` (rollout, eval, sft, train, start, env serve): who owns what each step is shown. */
export const CONTEXT_HELP =
  'what each step is shown: concat (the whole history, as in the paper), window:K (the prompt and the last K turns) ' +
  "or card (the prompt and the scenario's state card): the step-level MDP; default concat";

/** Checks a `--context` value's form; whether the scenario has a card is checked once it is loaded. */
export function contextMode(value: string): string {
  if (/^\d+$/.test(value))
    throw new InvalidArgumentError(
      "expected concat, window:K or card (the model's context length in tokens is --context-length)",
    );
  try {
    contextSetting({ id: '', env: { card: () => '' } }, value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  return value;
}

/** `--train-threads`: a positive integer, at most MAX_TRAIN_THREADS (beyond, a usage error; past the cores, capped). */
export function trainThreadCount(value: string): number {
  const n = positiveInt(value);
  if (n > MAX_TRAIN_THREADS)
    throw new InvalidArgumentError(`expected at most ${MAX_TRAIN_THREADS} (more are capped at the cores anyway)`);
  return n;
}

/** The help of `--train-threads` (sft, train, start). */
export const TRAIN_THREADS_HELP =
  'threads that compute training gradients: the built-in GPT on a replica of the model each, a Hugging Face ' +
  "model's matrix products (its projections and vocabulary head) split between them (default: one per core; " +
  '1: this thread only); the weights are the same for any number';

/**
 * `--train-threads` for a Hugging Face model: its training kernels' threads (none given: every
 * core), capped at the cores, as the GPT's replicas are, and said once on stderr when capped.
 */
export function kernelTrainThreads(requested: number | undefined): { threads?: number } {
  if (requested === undefined) return {};
  const { threads, note } = threadsOnCores(requested);
  if (note) process.stderr.write(`${note}\n`);
  return { threads };
}

/** `--init` (sft, train): a model to start from, hf:DIR or ckpt:DIR. */
export function modelInit(value: string): string {
  if (!value.startsWith('hf:') && !value.startsWith('ckpt:'))
    throw new InvalidArgumentError('expected hf:DIR (a Hugging Face folder) or ckpt:DIR (a checkpoint)');
  return value;
}

/** The help of `--lora` and `--lora-alpha` (sft, train). */
export const LORA_HELP = {
  rank: 'train rank-R LoRA adapters on every attention and MLP projection of a Hugging Face model, its weights frozen (default: full fine-tuning)',
  alpha: 'LoRA alpha: the update is scaled by alpha / R (default 2·R)',
};

/** `--lora-alpha`: a positive number. */
export function loraAlpha(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a positive number');
  return n;
}

/** LoRA as the flags ask for it, for a Hugging Face `--init` (`hf`); undefined without `--lora`. */
export function loraRequest(flags: { lora?: number; loraAlpha?: number }, hf: boolean) {
  if (flags.lora === undefined) {
    if (flags.loraAlpha !== undefined) throw new UsageError('--lora-alpha needs --lora R');
    return undefined;
  }
  if (!hf)
    throw new UsageError('--lora trains adapters on a Hugging Face model: give --init hf:DIR (or ckpt:DIR of one)');
  return { rank: flags.lora, alpha: flags.loraAlpha ?? 2 * flags.lora };
}
