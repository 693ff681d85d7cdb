import type { parquetWriteBuffer } from 'hyparquet-writer';
import { importOptional } from '../core/optional-import.ts';
import type { EpisodeRow } from './episode-row.ts';

type SchemaElement = NonNullable<Parameters<typeof parquetWriteBuffer>[0]['schema']>[number];

const str = (name: string, optional = false): SchemaElement => ({
  name,
  type: 'BYTE_ARRAY',
  converted_type: 'UTF8',
  repetition_type: optional ? 'OPTIONAL' : 'REQUIRED',
});
const int = (name: string, optional = false): SchemaElement => ({
  name,
  type: 'INT32',
  repetition_type: optional ? 'OPTIONAL' : 'REQUIRED',
});
const dbl = (name: string): SchemaElement => ({ name, type: 'DOUBLE', repetition_type: 'REQUIRED' });
const json = (name: string): SchemaElement => ({
  name,
  type: 'BYTE_ARRAY',
  converted_type: 'JSON',
  repetition_type: 'REQUIRED',
});

/**
 * The parquet schema of an export. `messages` is a real nested column (list of structs, with
 * `tool_calls` a list of structs), which pandas/pyarrow/datasets read as lists of dicts; `tools` and
 * `metrics` have no fixed shape (JSON Schemas, per-scenario metric names) and are JSON text columns.
 */
const SCALARS: Array<[keyof EpisodeRow, SchemaElement]> = [
  ['episode_id', str('episode_id')],
  ['run_id', str('run_id')],
  ['index', int('index')],
  ['scenario', str('scenario')],
  ['task_id', str('task_id')],
  ['split', str('split')],
  ['group', str('group')],
  ['sample', int('sample')],
  ['seed', int('seed')],
  ['policy', str('policy')],
  ['policy_version', str('policy_version')],
  ['step', int('step', true)],
];

const SCHEMA: SchemaElement[] = [
  { name: 'root', num_children: SCALARS.length + 8 },
  ...SCALARS.map(([, s]) => s),
  { name: 'messages', repetition_type: 'REQUIRED', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', repetition_type: 'REQUIRED', num_children: 4 },
  str('role'),
  str('content', true),
  { name: 'tool_calls', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', repetition_type: 'REQUIRED', num_children: 3 },
  str('id'),
  str('type'),
  { name: 'function', repetition_type: 'REQUIRED', num_children: 2 },
  str('name'),
  str('arguments'),
  str('tool_call_id', true),
  json('tools'),
  { name: 'rewards', repetition_type: 'REQUIRED', num_children: 3 },
  dbl('outcome'),
  dbl('process'),
  dbl('total'),
  { name: 'turn_rewards', repetition_type: 'REQUIRED', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  dbl('element'),
  { name: 'success', type: 'BOOLEAN', repetition_type: 'REQUIRED' },
  str('end_reason'),
  str('answer', true),
  json('metrics'),
];

/**
 * Rows as one parquet file (snappy), one row per episode (per step, for a step-level run). The writer,
 * hyparquet-writer, is an optional dependency (only this export uses it), loaded here.
 */
export async function rowsToParquet(rows: readonly EpisodeRow[]): Promise<ArrayBuffer> {
  const { parquetWriteBuffer } = await importOptional(
    'hyparquet-writer',
    'the parquet export (agent-r1 export --format parquet)',
    () => import('hyparquet-writer'),
  );
  const column = <K extends keyof EpisodeRow>(name: K, map: (v: EpisodeRow[K]) => unknown = (v) => v) => ({
    name,
    data: rows.map((r) => map(r[name])),
  });
  return parquetWriteBuffer({
    columnData: [
      ...SCALARS.map(([name]) => column(name)),
      column('messages'),
      column('tools', (v) => JSON.stringify(v)),
      column('rewards'),
      column('turn_rewards'),
      column('success'),
      column('end_reason'),
      column('answer'),
      column('metrics', (v) => JSON.stringify(v)),
    ] as Parameters<typeof parquetWriteBuffer>[0]['columnData'],
    schema: SCHEMA,
    kvMetadata: [
      {
        key: 'agent-r1.export',
        value:
          'episodes v2: one row per episode, or per step (step not null) for step-level episodes; messages in OpenAI chat format; tools and metrics are JSON text',
      },
    ],
    createdBy: 'agent-r1-ts',
  });
}
