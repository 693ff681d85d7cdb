import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { RunDirError } from './errors.ts';

/** One training step's numbers, as the trainer writes them to metrics.jsonl. */
export interface MetricRow {
  step: number;
  [field: string]: number;
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
  /** Eval results: DIR/eval*.json files, by file name. */
  evals: { file: string; data: { [key: string]: unknown } }[];
  /** Checkpoint folders under DIR (relative paths). */
  checkpoints: string[];
  /** Where a checkpoint's tokenizer is: its tokenizer.json, or the model.json that embeds it. */
  tokenizerPath: string | undefined;
  /** Problems with the run's files that did not stop it from being shown. */
  warnings: string[];
}

const isObject = (v: unknown): v is { [key: string]: unknown } => typeof v === 'object' && v !== null && !Array.isArray(v);

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

/**
 * Parses metrics.jsonl: one JSON object per line with a numeric `step`; every other finite
 * numeric field is a curve. A malformed line is skipped and reported, not fatal (a trainer may be
 * writing the file right now).
 */
export function parseMetrics(text: string, file = 'metrics.jsonl'): { rows: MetricRow[]; fields: string[]; warnings: string[] } {
  const rows: MetricRow[] = [];
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
    const row: MetricRow = { step: value.step };
    for (const [k, v] of Object.entries(value)) {
      if (k === 'step' || typeof v !== 'number' || !Number.isFinite(v)) continue;
      row[k] = v;
      if (!seen.has(k)) {
        seen.add(k);
        fields.push(k);
      }
    }
    rows.push(row);
  });
  return { rows, fields, warnings };
}

/** Folders (depth ≤ 2) that look like checkpoints: they hold model or tokenizer files. */
function findCheckpoints(dir: string): { checkpoints: string[]; tokenizerPath: string | undefined } {
  const checkpoints: string[] = [];
  let tokenizerPath: string | undefined;
  const visit = (folder: string, depth: number) => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = readdirSync(folder, { withFileTypes: true });
    } catch {
      return;
    }
    const names = new Set(entries.filter((e) => e.isFile()).map((e) => e.name));
    if (folder !== dir && (names.has('model.json') || names.has('tokenizer.json') || names.has('weights.bin') || names.has('checkpoint.json'))) {
      checkpoints.push(relative(dir, folder));
      // The last checkpoint's tokenizer (they are normally identical across a run).
      if (names.has('tokenizer.json')) tokenizerPath = join(folder, 'tokenizer.json');
      else if (names.has('model.json')) tokenizerPath = join(folder, 'model.json');
    }
    if (depth < 2) for (const e of entries) if (e.isDirectory() && !e.name.startsWith('.')) visit(join(folder, e.name), depth + 1);
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
  if (existsSync(metricsPath)) {
    const parsed = parseMetrics(readFileSync(metricsPath, 'utf8'));
    metrics = parsed.rows;
    metricFields = parsed.fields;
    warnings.push(...parsed.warnings);
  }
  const evals: RunInfo['evals'] = [];
  for (const file of readdirSync(dir).filter((f) => /^eval.*\.json$/.test(f)).sort()) {
    try {
      evals.push({ file, data: readJsonObject(join(dir, file)) });
    } catch (err) {
      warnings.push((err as Error).message);
    }
  }
  const { checkpoints, tokenizerPath } = findCheckpoints(dir);
  return { name: name ?? basename(dir), dir, episodesPath, summary, metrics, metricFields, evals, checkpoints, tokenizerPath, warnings };
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
