import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { RunDirError } from './errors.ts';

/** One training step's numbers (nested numbers flattened to `a.b`), from metrics.jsonl. */
export interface MetricRow {
  step: number;
  [field: string]: number;
}

/** One eval line of metrics.jsonl (`kind: "eval"`): its numbers, split, and nested summary. */
export interface EvalRow {
  step: number;
  split: string;
  values: { [field: string]: number };
  summary?: { [key: string]: unknown };
}

/** What a run directory holds, besides its episodes. */
export interface RunInfo {
  name: string;
  dir: string;
  episodesPath: string | undefined;
  summary: { [key: string]: unknown } | undefined;
  metrics: MetricRow[];
  /** Numeric fields of the metrics, in first-seen order (step excluded). */
  metricFields: string[];
  /** Evals the trainer ran during training (eval lines of metrics.jsonl), in file order. */
  trainingEvals: EvalRow[];
  /** Eval results: DIR/eval*.json files, by file name. */
  evals: { file: string; data: { [key: string]: unknown } }[];
  /** Checkpoint folders under DIR (relative paths). */
  checkpoints: string[];
  /** Where a checkpoint's tokenizer is: its tokenizer.json, or the model.json that embeds it. */
  tokenizerPath: string | undefined;
  /** Problems with the run's files that did not stop it from being shown. */
  warnings: string[];
}

const isObject = (v: unknown): v is { [key: string]: unknown } =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function readJsonObject(path: string): { [key: string]: unknown } {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new RunDirError(`${path} is not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  if (!isObject(value)) throw new RunDirError(`${path} must hold a JSON object`);
  return value;
}

/** Every finite number in a JSON object, nested ones under dotted names (`outcome.em`, `time.tokensPerS`). */
function numericFields(
  value: { [key: string]: unknown },
  prefix = '',
  out: { [field: string]: number } = {},
): { [field: string]: number } {
  for (const [k, v] of Object.entries(value)) {
    if (typeof v === 'number' && Number.isFinite(v)) out[prefix + k] = v;
    else if (isObject(v)) numericFields(v, `${prefix}${k}.`, out);
  }
  return out;
}

/**
 * Parses metrics.jsonl: one JSON object per line with a numeric `step`. Lines with `kind: "eval"`
 * are evals; the others (`kind: "step"` or none) are training steps, every finite numeric field of
 * which (nested ones flattened) is a curve. A malformed line is skipped and reported, not fatal (a
 * trainer may be writing the file right now).
 */
export function parseMetrics(
  text: string,
  file = 'metrics.jsonl',
): { rows: MetricRow[]; fields: string[]; evals: EvalRow[]; warnings: string[] } {
  const rows: MetricRow[] = [];
  const evals: EvalRow[] = [];
  const fields: string[] = [];
  const seen = new Set<string>();
  const warnings: string[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      warnings.push(`${file} line ${i + 1}: not valid JSON`);
      return;
    }
    if (!isObject(value) || typeof value.step !== 'number' || !Number.isFinite(value.step)) {
      warnings.push(`${file} line ${i + 1}: needs an object with a numeric "step"`);
      return;
    }
    if (value.kind === 'eval') {
      const { summary, ...rest } = value;
      const values = numericFields(rest);
      delete values.step;
      evals.push({
        step: value.step,
        split: typeof value.split === 'string' ? value.split : '',
        values,
        ...(isObject(summary) ? { summary } : {}),
      });
      return;
    }
    const row: MetricRow = { step: value.step };
    for (const [k, v] of Object.entries(numericFields(value))) {
      if (k === 'step') continue;
      row[k] = v;
      if (!seen.has(k)) {
        seen.add(k);
        fields.push(k);
      }
    }
    rows.push(row);
  });
  return { rows, fields, evals, warnings };
}

/**
 * Folders (depth ≤ 3) that look like checkpoints: the trainer's checkpoints/step-N/ and final/, or any
 * folder holding model, tokenizer or trainer-state files.
 */
function findCheckpoints(dir: string): { checkpoints: string[]; tokenizerPath: string | undefined } {
  const checkpoints: string[] = [];
  let tokenizerPath: string | undefined;
  const visit = (folder: string, depth: number) => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = readdirSync(folder, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
    } catch {
      return;
    }
    const names = new Set(entries.filter((e) => e.isFile()).map((e) => e.name));
    const rel = relative(dir, folder);
    const looksLikeOne =
      names.has('model.json') ||
      names.has('tokenizer.json') ||
      names.has('weights.bin') ||
      names.has('trainer.json') ||
      rel === 'final' ||
      rel === 'best' ||
      /^checkpoints[\\/][^\\/]+$/.test(rel);
    if (folder !== dir && looksLikeOne) {
      checkpoints.push(rel);
      // The last checkpoint's tokenizer (they are normally identical across a run).
      if (names.has('tokenizer.json')) tokenizerPath = join(folder, 'tokenizer.json');
      else if (names.has('model.json')) tokenizerPath = join(folder, 'model.json');
    }
    if (depth < 3)
      for (const e of entries) if (e.isDirectory() && !e.name.startsWith('.')) visit(join(folder, e.name), depth + 1);
  };
  visit(dir, 0);
  checkpoints.sort();
  return { checkpoints, tokenizerPath };
}

/** Reads a run directory. It must exist and hold episodes.jsonl, metrics.jsonl or summary.json. */
export function readRunDir(dirArg: string, name?: string): RunInfo {
  const dir = resolve(dirArg);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new RunDirError(`run directory ${dirArg} does not exist`);
  const episodesPath = existsSync(join(dir, 'episodes.jsonl')) ? join(dir, 'episodes.jsonl') : undefined;
  const summaryPath = join(dir, 'summary.json');
  const metricsPath = join(dir, 'metrics.jsonl');
  const warnings: string[] = [];
  if (!episodesPath && !existsSync(summaryPath) && !existsSync(metricsPath)) {
    throw new RunDirError(`${dirArg} is not a run directory (no episodes.jsonl, metrics.jsonl or summary.json)`);
  }
  let summary: RunInfo['summary'];
  if (existsSync(summaryPath)) {
    try {
      summary = readJsonObject(summaryPath);
    } catch (err) {
      warnings.push((err as Error).message);
    }
  }
  let metrics: MetricRow[] = [];
  let metricFields: string[] = [];
  let trainingEvals: EvalRow[] = [];
  if (existsSync(metricsPath)) {
    const parsed = parseMetrics(readFileSync(metricsPath, 'utf8'));
    metrics = parsed.rows;
    metricFields = parsed.fields;
    trainingEvals = parsed.evals;
    warnings.push(...parsed.warnings);
  }
  const evals: RunInfo['evals'] = [];
  for (const file of readdirSync(dir)
    .filter((f) => /^eval.*\.json$/.test(f))
    .sort()) {
    try {
      evals.push({ file, data: readJsonObject(join(dir, file)) });
    } catch (err) {
      warnings.push((err as Error).message);
    }
  }
  const { checkpoints, tokenizerPath } = findCheckpoints(dir);
  return {
    name: name ?? basename(dir),
    dir,
    episodesPath,
    summary,
    metrics,
    metricFields,
    trainingEvals,
    evals,
    checkpoints,
    tokenizerPath,
    warnings,
  };
}

/** Distinct display names for several runs (two `runs/x` folders in different parents get a suffix). */
export function runNames(dirs: readonly string[]): string[] {
  const counts = new Map<string, number>();
  return dirs.map((d) => {
    const base = basename(resolve(d));
    const n = (counts.get(base) ?? 0) + 1;
    counts.set(base, n);
    return n === 1 ? base : `${base}-${n}`;
  });
}
