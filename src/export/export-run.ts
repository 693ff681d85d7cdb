import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { AgentR1Error, UsageError } from '../core/errors.ts';
import { writeOutput } from '../core/write-output.ts';
import type { EpisodeRecord } from '../core/types.ts';
import { loadRecords } from '../record/jsonl.ts';
import { openAITools } from '../episode/drive-episode.ts';
import type { Scenario } from '../scenario/scenario.ts';
import type { OpenAITool } from '../tools/tool.ts';
import { agentRecordTools, isAgentRecord } from '../record/agent.ts';
import { recordToRows, type EpisodeRow } from './episode-row.ts';
import { rowsToParquet } from './parquet.ts';

export class ExportError extends AgentR1Error {}

export const EXPORT_FORMATS = ['messages', 'parquet'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export interface ExportOptions {
  /** A run directory (with episodes.jsonl) or an episodes .jsonl file. */
  runDir: string;
  format: ExportFormat;
  out: string;
  /**
   * Loads a record's scenario, for its tools (records keep the scenario's id and options, not the
   * tools; and, for a scenario folder, the folder's path as `source`).
   */
  loadScenario: (id: string, options: { [key: string]: string }, source?: string) => Promise<Scenario>;
}

export interface ExportResult {
  rows: number;
  out: string;
  bytes: number;
}

/** The records of a run, refusing a file with corrupt lines (an export must not silently drop episodes). */
export async function readRun(runDir: string): Promise<EpisodeRecord[]> {
  const file = existsSync(runDir) && statSync(runDir).isDirectory() ? join(runDir, 'episodes.jsonl') : runDir;
  if (!existsSync(file))
    throw new ExportError(`no records at ${file} (expected a run directory with episodes.jsonl, or a .jsonl file)`);
  const { records, corrupt } = await loadRecords(file);
  if (corrupt.length > 0) {
    throw new ExportError(
      `${file}: ${corrupt.length} corrupt record line(s), first: ${corrupt[0]!.message}; fix or remove them before exporting`,
    );
  }
  if (records.length === 0) throw new ExportError(`${file} holds no records`);
  return records;
}

/** Every record as an export row, with its scenario's tools (each scenario loaded once). */
export async function recordsToRows(
  records: readonly EpisodeRecord[],
  load: ExportOptions['loadScenario'],
): Promise<EpisodeRow[]> {
  const tools = new Map<string, Promise<readonly OpenAITool[]>>();
  const rows: EpisodeRow[] = [];
  for (const r of records) {
    // An agent's episode carries its tools in its first request; a scenario's are the scenario's.
    if (isAgentRecord(r)) {
      rows.push(...recordToRows(r, agentRecordTools(r) as unknown as OpenAITool[]));
      continue;
    }
    const key = JSON.stringify([r.scenario.id, r.scenario.options, r.scenario.source ?? null]);
    if (!tools.has(key)) {
      tools.set(
        key,
        load(r.scenario.id, r.scenario.options, r.scenario.source).then(
          (s) => openAITools(s),
          (err: unknown) => {
            // What the user can fix with a flag (a scenario folder to name) stays a usage error.
            if (err instanceof UsageError) throw err;
            throw new ExportError(
              `cannot load scenario "${r.scenario.id}" for its tools: ${err instanceof Error ? err.message : String(err)}`,
            );
          },
        ),
      );
    }
    rows.push(...recordToRows(r, await tools.get(key)!));
  }
  return rows;
}

/** `agent-r1 export`: a run's records as JSONL rows (`messages`) or one parquet file. */
export async function exportRun(options: ExportOptions): Promise<ExportResult> {
  if (!EXPORT_FORMATS.includes(options.format))
    throw new ExportError(`unknown format "${options.format}"; valid: ${EXPORT_FORMATS.join(', ')}`);
  const rows = await recordsToRows(await readRun(options.runDir), options.loadScenario);
  const data =
    options.format === 'parquet'
      ? new Uint8Array(await rowsToParquet(rows))
      : rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
  writeOutput(options.out, data);
  return {
    rows: rows.length,
    out: options.out,
    bytes: typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength,
  };
}
