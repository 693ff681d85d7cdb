import { z } from 'zod';
import { json } from '../record/record.ts';
import { END_REASONS } from '../core/types.ts';
import { EnvProtocolError } from './errors.ts';

export { ENV_ERROR_CODES, type EnvErrorCode } from './errors.ts';

/**
 * The wire shapes of the environment server, after OpenEnv's (meta-pytorch/OpenEnv,
 * `core/env_server/types.py`): WebSocket messages `{type, data}`, step results
 * `{observation, reward, done}` with reward and done lifted out of the observation, errors
 * `{message, code}` with OpenEnv's codes. The action, observation and state are ours; their JSON
 * Schemas are served at GET /schema.
 */

/** The message types a client sends over /ws. (`mcp` is OpenEnv's too; this server does not speak MCP.) */
export const CLIENT_MESSAGE_TYPES = ['reset', 'step', 'state', 'close'] as const;

/** Reset arguments: OpenEnv's `seed` and `episode_id`, and ours. Unknown keys are refused (a typo is not a default). */
export const resetArgsSchema = z
  .object({
    seed: z
      .number()
      .int()
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .nullish()
      .describe('run seed: with split, task and sample it fixes the task and the world stream (absent: a fresh one)'),
    episode_id: z.string().min(1).max(255).nullish().describe("the record's episode id (default <task id>#<sample>)"),
    split: z.string().min(1).max(100).optional().describe('task split (default: train, or the first split)'),
    task: z
      .number()
      .int()
      .min(0)
      .max(100_000)
      .optional()
      .describe("index in the split's task list for this seed, as `rollout --seed` numbers episodes (default 0)"),
    group: z.string().min(1).max(255).optional().describe('GRPO group key (default: the task id)'),
    sample: z.number().int().min(0).max(1_000_000).optional().describe('sample index within the group (default 0)'),
    policy: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('names the client in the record: policy id remote:<policy> (default remote:client)'),
    policy_version: z.string().min(1).max(200).optional().describe("the record's policy version (default unversioned)"),
  })
  .strict();

export type ResetArgs = z.input<typeof resetArgsSchema>;

const toolCallSchema = z
  .object({
    name: z.string().min(1).max(200),
    arguments: z
      .union([z.record(z.string(), json), z.string()])
      .optional()
      .describe('a JSON object, or a JSON string of one (as in OpenAI tool calls)'),
  })
  .strict();

/**
 * An action: the model's raw text (Hermes `<tool_call>` / `<answer>`, parsed exactly as in rollouts),
 * or structured tool calls, or a structured answer. Structured actions are written as the text a
 * model would have written for them, so the record is the same either way.
 */
export const actionSchema = z
  .object({
    text: z.string().optional().describe("the model's output, as generated"),
    tokens: z
      .array(z.number().int().min(0))
      .optional()
      .describe('the token ids of text (recorded; they count against the token budgets instead of an estimate)'),
    logprobs: z.array(z.number()).optional().describe('log-probs of the tokens (recorded)'),
    tool_calls: z.array(toolCallSchema).min(1).max(64).optional(),
    answer: z.string().optional(),
    metadata: z.record(z.string(), json).optional().describe("OpenEnv's action metadata (accepted, not recorded)"),
  })
  .strict()
  .superRefine((a, ctx) => {
    const given = (['text', 'tool_calls', 'answer'] as const).filter((k) => a[k] !== undefined);
    if (given.length !== 1)
      ctx.addIssue({
        code: 'custom',
        message: `an action has exactly one of text, tool_calls or answer (got ${given.length === 0 ? 'none' : given.join(' and ')})`,
      });
    if ((a.tokens || a.logprobs) && a.text === undefined)
      ctx.addIssue({ code: 'custom', message: 'tokens and logprobs go with text', path: ['tokens'] });
    if (a.logprobs && (!a.tokens || a.tokens.length !== a.logprobs.length))
      ctx.addIssue({ code: 'custom', message: 'logprobs needs tokens of the same length', path: ['logprobs'] });
  });

export type EnvAction = z.input<typeof actionSchema>;

/** POST /step's body: OpenEnv's StepRequest, plus reset arguments for the fresh episode it plays one step of. */
export const stepRequestSchema = resetArgsSchema.extend({
  action: actionSchema,
  timeout_s: z.number().gt(0).nullish().describe('accepted; tool timeouts come from the episode budgets'),
  request_id: z.string().max(255).nullish(),
});

const openAIToolCall = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

const openAIMessage = z.union([
  z.object({ role: z.enum(['system', 'user']), content: z.string() }),
  z.object({
    role: z.literal('assistant'),
    content: z.string().nullable(),
    tool_calls: z.array(openAIToolCall).optional(),
  }),
  z.object({ role: z.literal('tool'), content: z.string(), tool_call_id: z.string() }),
]);

const parsedAction = z.union([
  z.object({ kind: z.literal('tool_calls'), calls: z.array(z.object({ name: z.string(), arguments: json })) }),
  z.object({ kind: z.literal('answer'), text: z.string() }),
  z.object({ kind: z.literal('invalid'), error: z.string() }),
]);

/** What the agent sees after reset and after each step. */
export const observationSchema = z.object({
  episode_id: z.string(),
  task_id: z.string(),
  text: z
    .string()
    .nullable()
    .describe("the text the agent sees next: the user's request after reset, then each step's observation"),
  messages: z.array(openAIMessage).describe('the episode so far as OpenAI chat messages'),
  turn: z.number().int().describe('turns played so far (the index of the next action)'),
  process_reward: z.number().nullable().describe("this step's process reward (null after reset)"),
  tools: z.array(z.unknown()).optional().describe("after reset: the scenario's tools as OpenAI function schemas"),
  action: parsedAction.optional().describe('how the step’s action was read (invalid: why)'),
  tool_results: z
    .array(z.object({ name: z.string(), ok: z.boolean(), content: z.string(), error: z.string().optional() }))
    .optional(),
  info: z.record(z.string(), json).optional(),
  outcome: z
    .object({ reward: z.number(), success: z.boolean(), metrics: z.record(z.string(), z.number()).optional() })
    .optional()
    .describe('when done: the outcome (EM/F1 in metrics where the scenario has them)'),
  end_reason: z.enum(END_REASONS).optional(),
  answer: z.string().nullable().optional(),
  error: z.string().optional().describe('when the episode ended in an error: what happened'),
  total_reward: z.number().optional().describe('when done: process rewards + outcome reward, as recorded'),
});

export type EnvObservation = z.infer<typeof observationSchema>;

/** A step result: reward is this step's process reward, plus the outcome reward on the last step. */
export interface EnvStepResult {
  observation: EnvObservation;
  reward: number | null;
  done: boolean;
}

export const stateSchema = z.object({
  episode_id: z.string().nullable(),
  step_count: z.number().int().min(0),
  scenario: z.string(),
  episodes: z.number().int().describe('episodes started in this session'),
  split: z.string().optional(),
  task_id: z.string().optional(),
  task_index: z.number().int().optional(),
  seed: z.number().int().optional().describe('the episode seed (as recorded)'),
  group: z.string().optional(),
  sample: z.number().int().optional(),
  done: z.boolean().optional(),
  end_reason: z.string().optional(),
});

export type EnvState = z.infer<typeof stateSchema>;

/** The JSON Schemas GET /schema serves. */
export function envJsonSchemas(): { action: object; observation: object; state: object } {
  const action = z.toJSONSchema(actionSchema, { io: 'input' }) as Record<string, unknown>;
  // The one-of rule lives in a refinement, which JSON Schema output leaves out: state it here.
  action.oneOf = [{ required: ['text'] }, { required: ['tool_calls'] }, { required: ['answer'] }];
  return {
    action,
    observation: z.toJSONSchema(observationSchema, { io: 'output' }),
    state: z.toJSONSchema(stateSchema, { io: 'output' }),
  };
}

/** Parses with a schema; failures are OpenEnv validation errors naming every problem. */
export function validate<T extends z.ZodType>(schema: T, data: unknown, what: string): z.output<T> {
  const parsed = schema.safeParse(data);
  if (parsed.success) return parsed.data;
  const errors = parsed.error.issues.map((i) => ({ loc: i.path.map(String), msg: i.message }));
  const message = `invalid ${what}: ${z.prettifyError(parsed.error).replace(/\n\s*/g, ' ')}`;
  throw new EnvProtocolError('VALIDATION_ERROR', message, { errors });
}
