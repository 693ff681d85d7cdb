import { randomBytes, randomInt } from 'node:crypto';
import type { PolicyOutput, Task } from '../core/types.ts';
import type { SamplingOptions } from '../architectures/generation.ts';
import type { Policy } from '../policy/policy.ts';
import { BatchQueue, type BatchQueueStats } from '../rollout/batch-queue.ts';
import { chatFormatFor, contextLengthOf, type ChatFormat, type ServedPolicy } from './chat-format.ts';
import { ChatTemplateError, TemplateBudgetError } from '../hf/errors.ts';
import { OpenAIHttpError, ServerFailureError } from './errors.ts';
import { ServingPolicy } from './serving-policy.ts';
import { normalizeMessages, type ChatCompletion, type ChatCompletionRequest, type FinishReason } from './wire.ts';

export interface ChatCompletionsOptions {
  policy: ServedPolicy;
  /** The model id clients ask for. */
  modelName: string;
  /** Policy-server batching: most rows in one generation batch, and how long a row waits for company. */
  maxBatch?: number;
  maxWaitMs?: number;
}

/**
 * Chat completions for a token policy, apart from HTTP (server.ts serves them): conversations are
 * read into the policy's own chat template (its ChatFormat: the GPT's or a Hugging Face model's);
 * generation goes through the same batch queue as rollouts (its direct front end), so concurrent
 * requests are merged into batches.
 */
export class ChatCompletions implements TurnAnswerer {
  private readonly serving: ServingPolicy;
  private readonly queue: BatchQueue;
  private readonly batched: Policy;
  private readonly format: ChatFormat;

  constructor(private readonly options: ChatCompletionsOptions) {
    const { policy } = options;
    this.format = chatFormatFor(policy);
    this.serving = new ServingPolicy(policy);
    this.queue = new BatchQueue(this.serving, { maxBatch: options.maxBatch ?? 32, maxWaitMs: options.maxWaitMs ?? 10 });
    this.batched = this.queue.direct();
  }

  stats(): BatchQueueStats {
    return this.queue.stats();
  }

  get policy(): ServedPolicy {
    return this.options.policy;
  }

  get contextLength(): number {
    return contextLengthOf(this.options.policy);
  }

  close(): void {
    this.queue.close();
  }

  /** One chat completion: the conversation in the template, one generation row, the answer in OpenAI shape. */
  async complete(body: ChatCompletionRequest): Promise<ChatCompletion> {
    return (await this.generate(body)).completion;
  }

  /**
   * A completion with the ids behind it: the rendered prompt, the sampled ids (cut at a stop string
   * as the answer is) and their log-probs. `turn` sets what a recording gateway decides for a turn.
   */
  async generate(body: ChatCompletionRequest, turn: TurnControl = {}): Promise<GeneratedTurn> {
    const { policy, modelName } = this.options;
    if (body.model !== modelName) throw unknownModel(body.model, modelName);
    const messages = normalizeMessages(body.messages);
    const context = contextLengthOf(policy);
    const format = this.format;
    // A token stands for at most maxTokenBytes bytes of text, so a conversation's bytes bound its tokens
    // from below: one that cannot fit is refused before any of it is tokenized (a 4 MB body would
    // otherwise hold the event loop for seconds).
    const bytes = messages.reduce((n, m) => n + Buffer.byteLength(m.content ?? ''), 0);
    const atLeast = Math.ceil(bytes / format.maxTokenBytes);
    if (atLeast > context) throw contextExceeded(`at least ${atLeast}`, context);
    // Tokenizing waits for a turn of the event loop, so requests already read are answered first.
    await new Promise((resolve) => setImmediate(resolve));
    const prompt = renderPrompt(() => format.prompt(messages, body.tools ?? [], context, turn.given));
    if (prompt.length > context) throw contextExceeded(`at least ${prompt.length}`, context);
    const maxTokens = Math.min(
      body.max_completion_tokens ?? body.max_tokens ?? Infinity,
      turn.maxTokens ?? Infinity,
      context - prompt.length + 1,
    );
    const rowId = turn.id ?? `chatcmpl-${randomBytes(12).toString('hex')}`;
    const own = turn.sampling === 'policy' ? { ...policy.sampling } : turn.sampling;
    this.serving.configure(rowId, own ?? sampling(policy.sampling, body));
    let output: PolicyOutput;
    try {
      output = await this.batched.act({
        episodeId: rowId,
        task: { id: rowId, split: '', question: '' },
        tools: [],
        messages: [],
        tokens: prompt,
        turn: 0,
        seed: turn.seed ?? body.seed ?? randomInt(2 ** 31 - 1),
        maxTokens,
      });
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw new ServerFailureError('generation failed', why, 'generation_failed');
    } finally {
      this.batched.release?.(rowId);
    }
    let tokens = output.tokens ?? format.encode(output.text);
    let logprobs = output.logprobs ?? [];
    let text = output.text;
    let finish: FinishReason = format.stopTokens.has(tokens.at(-1) ?? -1) ? 'stop' : 'length';
    const cut = cutAtStop(text, body.stop);
    if (cut !== null) {
      // The text ends before the stop string; the tokens end with the one that completed it.
      let k = 1;
      while (k < tokens.length && format.decode(tokens.slice(0, k)).length < cut + 1) k++;
      tokens = tokens.slice(0, k);
      logprobs = logprobs.slice(0, k);
      text = text.slice(0, cut);
      finish = 'stop';
    }
    // As with the OpenAI API, tool calls are returned as tool_calls only when the request offers tools.
    const structured = (body.tools?.length ?? 0) > 0 && body.tool_choice !== 'none';
    const { message, calls } = format.answer(text, structured, (i) => `call_${rowId.slice(9, 25)}_${i}`);
    if (calls) finish = 'tool_calls';
    if (!turn.given) format.remember(message, tokens);
    const completion: ChatCompletion = {
      id: rowId,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: modelName,
      system_fingerprint: `fp_${policy.version.slice(0, 12)}`,
      choices: [
        {
          index: 0,
          message: { ...message, refusal: null },
          finish_reason: finish,
          logprobs: body.logprobs
            ? {
                content: tokens.map((id, i) => ({
                  token: body.return_tokens_as_token_ids ? `token_id:${id}` : format.tokenText(id),
                  logprob: logprobs[i] ?? 0,
                  bytes: format.tokenBytes(id),
                  top_logprobs: [],
                })),
                refusal: null,
              }
            : null,
          token_ids: tokens,
        },
      ],
      usage: {
        prompt_tokens: prompt.length,
        completion_tokens: tokens.length,
        total_tokens: prompt.length + tokens.length,
      },
    };
    return { completion, prompt, text, tokens, logprobs: tokens.map((_, i) => logprobs[i] ?? 0) };
  }
}

/** What a recording gateway decides for one turn instead of the request (see ChatCompletions.generate). */
export interface TurnControl {
  /** The completion's id (`chatcmpl-` and 24 hex digits; its tool calls' ids derive from it): records that reproduce. */
  id?: string;
  /** The ids of the conversation's earlier answers, by message index (never re-tokenized). */
  given?: (index: number) => readonly number[] | undefined;
  seed?: number;
  /** Sampling that replaces the request's: given, or the policy's own (a trainer samples as it scores). */
  sampling?: SamplingOptions | 'policy';
  /** The episode's task and seed (for an answerer that needs them: a scripted demonstrator). */
  task?: Task;
  episodeSeed?: number;
  /** A cap on the answer's tokens beside the request's. */
  maxTokens?: number;
}

export interface GeneratedTurn {
  completion: ChatCompletion;
  /** The answer's text. */
  text: string;
  /** The rendered conversation's ids, the generation prompt included (a token policy's). */
  prompt?: number[];
  /** The answer's sampled ids and their log-probs under the sampling used (a token policy's). */
  tokens?: number[];
  logprobs?: number[];
}

/** What answers a gateway's turns: a token policy (ChatCompletions), a scripted demonstrator or a teacher endpoint. */
export interface TurnAnswerer {
  /** `textOnly`: its answers are text without ids of ours (a teacher's): its records are SFT data, never RL data. */
  readonly policy: { readonly id: string; readonly version: string; readonly textOnly?: boolean };
  readonly contextLength: number;
  generate(body: ChatCompletionRequest, turn: TurnControl): Promise<GeneratedTurn>;
  complete(body: ChatCompletionRequest): Promise<ChatCompletion>;
  close(): void;
}

/** The request's sampling on top of the policy's own: temperature and top_p replace the checkpoint's when given. */
function sampling(own: SamplingOptions, body: ChatCompletionRequest): SamplingOptions {
  const out: SamplingOptions = { ...own };
  if (body.temperature !== undefined && body.temperature !== null) out.temperature = body.temperature;
  if (body.top_p !== undefined && body.top_p !== null) out.topP = body.top_p;
  return out;
}

/** Where the text is cut by the first stop string (OpenAI semantics: the stop string is not returned). */
function cutAtStop(text: string, stop: string | string[] | null | undefined): number | null {
  const stops = (typeof stop === 'string' ? [stop] : (stop ?? [])).filter((s) => s !== '');
  let cut: number | null = null;
  for (const s of stops) {
    const at = text.indexOf(s);
    if (at >= 0 && (cut === null || at < cut)) cut = at;
  }
  return cut;
}

/**
 * The prompt, a chat template's failure as the 400 it is: the template refused these messages
 * (raise_exception), or ran past its budget on them (too many, or a template that never ends).
 */
function renderPrompt(render: () => number[]): number[] {
  try {
    return render();
  } catch (err) {
    if (!(err instanceof ChatTemplateError)) throw err;
    const code = err instanceof TemplateBudgetError ? 'template_budget_exceeded' : 'chat_template_error';
    throw new OpenAIHttpError(400, err.message, 'invalid_request_error', code, 'messages');
  }
}

/** A conversation longer than the model's context (400, as the OpenAI API answers it). */
export function contextExceeded(tokens: string, context: number): OpenAIHttpError {
  const message = `the conversation is ${tokens} tokens; this model's context is ${context} tokens`;
  return new OpenAIHttpError(400, message, 'invalid_request_error', 'context_length_exceeded', 'messages');
}

export function unknownModel(asked: string, served: string): OpenAIHttpError {
  const message = `the model "${asked}" does not exist; this server serves "${served}"`;
  return new OpenAIHttpError(400, message, 'invalid_request_error', 'model_not_found', 'model');
}
