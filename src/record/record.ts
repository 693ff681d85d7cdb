import { hash } from 'node:crypto';
import { z } from 'zod';
import { canonicalJson, fieldJson } from '../core/canonical-json.ts';
import { CorruptRecordError, RecordSchemaVersionError } from '../core/errors.ts';
import { nestsDeeperThan } from '../core/json-depth.ts';
import { ACTION_FORMATS, END_REASONS, RECORD_SCHEMA_VERSION, ROLES, type EpisodeRecord } from '../core/types.ts';

/** sha256 of the canonical JSON of every field but the checksum. */
export function recordChecksum(record: Omit<EpisodeRecord, 'checksum'> | EpisodeRecord): string {
  const { checksum: _ignored, ...rest } = record as EpisodeRecord;
  return hash('sha256', canonicalJson(rest));
}

/** The line of each sealed record or parsed line, so a record is written without being serialized again. */
const lines = new WeakMap<EpisodeRecord, string>();

/**
 * Seals a record with its checksum. It is serialized once, for the checksum and for the line
 * `serializeRecord` returns; a sealed record is not to be changed (copy it to make another). A
 * record built in canonical order (as the engine builds them) is written by JSON.stringify itself.
 */
export function sealRecord(record: Omit<EpisodeRecord, 'checksum'>): EpisodeRecord {
  const { checksum: _ignored, ...rest } = record as EpisodeRecord;
  const body = canonicalJson(rest);
  const checksum = hash('sha256', body);
  // The line is the body with the checksum field put in its place, cut from the body that hashing
  // has just flattened: after the fields whose keys sort before "checksum" (a record's answer).
  const before = fieldsBefore(rest, 'checksum');
  const head = before.length > 1 ? `${before},` : before; // `{`, or `{` and those fields and a comma
  const after = body.slice(head.length, -1);
  const line = `${head}"checksum":"${checksum}"${after ? ',' : ''}${after}}`;
  const sealed = rest as EpisodeRecord; // a copy already: the caller's record is left as it was
  sealed.checksum = checksum;
  lines.set(sealed, line);
  return sealed;
}

/** How the canonical JSON of `value` begins: `{` and its fields whose keys sort before `key`. */
function fieldsBefore(value: object, key: string): string {
  let out = '{';
  for (const k of Object.keys(value)
    .filter((k) => k < key)
    .sort()) {
    const json = fieldJson((value as Record<string, unknown>)[k]);
    if (json !== undefined) out += `${out.length > 1 ? ',' : ''}${JSON.stringify(k)}:${json}`;
  }
  return out;
}

/** One JSONL line (no newline). Keys are sorted, so equal records are equal bytes. */
export function serializeRecord(record: EpisodeRecord): string {
  return lines.get(record) ?? canonicalJson(record);
}

/**
 * A record from a line this process's own workers sealed (trusted: neither schema nor checksum is
 * checked; use parseRecordLine for a file). The line is kept, so writing it costs nothing more.
 */
export function recordFromTrustedLine(line: string): EpisodeRecord {
  const record = JSON.parse(line) as EpisodeRecord;
  lines.set(record, line);
  return record;
}

/** Any JSON value (records', tasks' and tool results' data). */
export const json: z.ZodType = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(json), z.record(z.string(), json)]),
);
const jsonObject = z.record(z.string(), json);

const action = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('tool_calls'), calls: z.array(z.object({ name: z.string(), arguments: jsonObject })) }),
  z.object({ kind: z.literal('answer'), text: z.string() }),
  z.object({ kind: z.literal('invalid'), error: z.string() }),
]);

const toolResult = z.object({
  name: z.string(),
  ok: z.boolean(),
  content: z.string(),
  data: json.optional(),
  truncated: z.boolean().optional(),
  error: z
    .object({ kind: z.enum(['unknown_tool', 'bad_arguments', 'tool_error', 'timeout']), message: z.string() })
    .optional(),
});

const ints = z.array(z.number().int());

const message = z.object({ role: z.enum(['system', 'user', 'assistant', 'tool']), content: z.string() });

const stepContext = z.object({
  keep: z.number().int().nonnegative(),
  messages: z.array(message),
  keepTokens: z.number().int().nonnegative().optional(),
  tokens: ints.optional(),
});

/** The schema of a record line; replay and the viewer reject anything else as corrupt. */
export const episodeRecordSchema = z.object({
  schema: z.literal(RECORD_SCHEMA_VERSION),
  runId: z.string(),
  episodeId: z.string(),
  index: z.number().int().nonnegative(),
  scenario: z.object({
    id: z.string(),
    version: z.string(),
    options: z.record(z.string(), z.string()),
    source: z.string().optional(),
  }),
  task: z.object({
    id: z.string(),
    split: z.string(),
    question: z.string(),
    type: z.string().optional(),
    answer: z.string().optional(),
    meta: jsonObject.optional(),
  }),
  group: z.string(),
  sample: z.number().int().nonnegative(),
  seed: z.number().int(),
  policy: z.object({ id: z.string(), version: z.string(), textOnly: z.literal(true).optional() }),
  roles: z
    .partialRecord(
      z.enum(ROLES),
      z.object({ policy: z.object({ id: z.string(), version: z.string() }), prompt: z.array(message) }),
    )
    .optional(),
  config: z.object({
    actionFormat: z.enum(ACTION_FORMATS).optional(),
    maxTurns: z.number(),
    maxTokensPerTurn: z.number(),
    maxTotalTokens: z.number(),
    toolTimeoutMs: z.number(),
    maxToolOutputChars: z.number(),
    context: z.string().optional(),
  }),
  prompt: z.array(message),
  promptTokens: ints.optional(),
  turns: z.array(
    z.object({
      index: z.number().int(),
      text: z.string(),
      tokens: ints.optional(),
      logprobs: z.array(z.number()).optional(),
      tokenDrift: z.number().int().nonnegative().optional(),
      tokenCount: z.number().int(),
      action,
      results: z.array(toolResult),
      observation: z.string().nullable(),
      observationTokens: ints.optional(),
      reward: z.number(),
      done: z.boolean(),
      info: jsonObject.optional(),
      states: z.array(z.string()),
      context: stepContext.optional(),
      reply: z
        .object({
          role: z.enum(ROLES),
          steps: z.array(
            z.object({
              text: z.string(),
              tokens: ints.optional(),
              logprobs: z.array(z.number()).optional(),
              action,
              results: z.array(toolResult),
            }),
          ),
          text: z.string().nullable(),
          ended: z.boolean(),
        })
        .optional(),
    }),
  ),
  answer: z.string().nullable(),
  outcome: z.object({ reward: z.number(), success: z.boolean(), metrics: z.record(z.string(), z.number()).optional() }),
  processReward: z.number(),
  totalReward: z.number(),
  totalTokens: z.number().int(),
  status: z.enum(['ok', 'error']),
  endReason: z.enum(END_REASONS),
  error: z.string().optional(),
  checksum: z.string(),
});

/**
 * The deepest a record line may nest: its envelope, and tool results and task data of any shape within
 * reason. Deeper, schema validation and the checksum (both recursive) would overflow the stack.
 */
export const MAX_RECORD_DEPTH = 256;

/** Parses one JSONL line into a record, checking its schema and checksum. */
export function parseRecordLine(text: string, line?: number): EpisodeRecord {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new CorruptRecordError(`not valid JSON (${err instanceof Error ? err.message : String(err)})`, line);
  }
  if (nestsDeeperThan(value, MAX_RECORD_DEPTH))
    throw new CorruptRecordError(`nests deeper than ${MAX_RECORD_DEPTH} levels of objects and arrays`, line);
  const schema = (value as { schema?: unknown } | null)?.schema;
  if (typeof schema === 'number' && schema !== RECORD_SCHEMA_VERSION)
    throw new RecordSchemaVersionError(schema, RECORD_SCHEMA_VERSION, line);
  const parsed = episodeRecordSchema.safeParse(value);
  if (!parsed.success) {
    throw new CorruptRecordError(`does not match the record schema: ${z.prettifyError(parsed.error)}`, line);
  }
  const record = value as EpisodeRecord;
  const expected = recordChecksum(record);
  if (record.checksum !== expected) {
    throw new CorruptRecordError(`checksum mismatch (the line was changed after it was written)`, line);
  }
  return record;
}
