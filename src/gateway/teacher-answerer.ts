import type { GeneratedTurn, TurnAnswerer, TurnControl } from '../openai/completions.ts';
import { unknownModel } from '../openai/completions.ts';
import { ExternalPolicyError } from '../openai/errors.ts';
import { readCompletion, requestJson, type RetryOptions } from '../openai/external-policy.ts';
import type { ChatCompletion, ChatCompletionRequest, FinishReason } from '../openai/wire.ts';
import { TeacherError, TeacherUrlError } from './errors.ts';

export interface TeacherOptions extends RetryOptions {
  /** The teacher's base URL, with its version path (`http://127.0.0.1:8000/v1`). */
  baseURL: string;
  /** The model id asked of the teacher. */
  model: string;
  /** The model id the gateway's clients ask for (the answers name it). */
  modelName: string;
}

/**
 * A teacher's base URL as given to `--policy openai:URL`, checked (http or https) and without a
 * trailing slash.
 */
export function teacherBaseURL(url: string): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:'))
    throw new TeacherUrlError(
      `--policy openai:URL: "${url}" is not an http(s) URL (expected e.g. openai:http://127.0.0.1:8000/v1; the model goes in --teacher-model)`,
    );
  return url.replace(/\/+$/, '');
}

/** The first model a teacher lists (`GET URL/models`): what it is asked for when none is named. */
export async function teacherModel(baseURL: string, options: RetryOptions = {}): Promise<string> {
  let listed: unknown;
  try {
    listed = await requestJson(`${baseURL}/models`, undefined, options);
  } catch (err) {
    if (err instanceof ExternalPolicyError)
      throw new TeacherError(baseURL, `did not list its models (give --teacher-model NAME): ${err.message}`);
    throw err;
  }
  const id = (listed as { data?: Array<{ id?: unknown }> } | null)?.data?.[0]?.id;
  if (typeof id !== 'string' || id === '')
    throw new TeacherError(
      baseURL,
      `lists no model at GET /models (give --teacher-model NAME): ${JSON.stringify(listed).slice(0, 200)}`,
    );
  return id;
}

/**
 * A gateway answerer that forwards each request to a teacher: any OpenAI-compatible endpoint (vLLM,
 * a hosted API, another `agent-r1 serve`). The request goes as the client sent it (the fields the
 * server validates), with the teacher's model name and the turn's seed; the client gets the
 * teacher's completion under the model name it asked for, streamed by the server if it asked. Its
 * turns are recorded as text (native tool calls as Hermes `<tool_call>` text) with no ids: the
 * teacher's token ids are not ours, so its records are marked text-only, SFT data and never RL data.
 */
export class TeacherAnswerer implements TurnAnswerer {
  readonly policy: { id: string; version: string; textOnly: true };
  /** The teacher's context is its own: no limit here (the record's budgets say so). */
  readonly contextLength = 1_000_000;
  private readonly endpoint: string;

  constructor(private readonly options: TeacherOptions) {
    const base = teacherBaseURL(options.baseURL);
    this.endpoint = `${base}/chat/completions`;
    this.policy = { id: `openai:${options.model}@${base}`, version: options.model, textOnly: true };
  }

  async generate(body: ChatCompletionRequest, turn: TurnControl): Promise<GeneratedTurn> {
    const { model, modelName, baseURL } = this.options;
    if (body.model !== modelName) throw unknownModel(body.model, modelName);
    // The server streams a finished completion itself: the teacher is asked for the whole of it.
    const { stream: _s, stream_options: _o, ...rest } = body;
    const cap = turn.maxTokens;
    const asked = body.max_completion_tokens ?? body.max_tokens ?? Number.POSITIVE_INFINITY;
    const request = {
      ...rest,
      model,
      ...(turn.seed !== undefined ? { seed: turn.seed } : {}),
      ...(cap !== undefined && cap < asked ? { max_tokens: cap, max_completion_tokens: undefined } : {}),
    };
    let response: unknown;
    try {
      response = await requestJson(this.endpoint, request, this.options);
    } catch (err) {
      if (err instanceof ExternalPolicyError) throw new TeacherError(baseURL, `gave no answer: ${err.message}`);
      throw err;
    }
    let read: ReturnType<typeof readCompletion>;
    try {
      read = readCompletion(response);
    } catch (err) {
      if (err instanceof ExternalPolicyError)
        throw new TeacherError(baseURL, `answered something that is not a chat completion: ${err.message}`);
      throw err;
    }
    // Only the text is kept: ids and log-probs the teacher returned are its tokenizer's, never recorded as ours.
    const { output, message } = read;
    const r = response as {
      id?: unknown;
      created?: unknown;
      system_fingerprint?: unknown;
      usage?: { prompt_tokens?: unknown; completion_tokens?: unknown };
      choices: Array<{ finish_reason?: unknown; logprobs?: unknown }>;
    };
    const choice = r.choices[0]!;
    const calls = (message.tool_calls?.length ?? 0) > 0;
    const finish: FinishReason = calls ? 'tool_calls' : choice.finish_reason === 'length' ? 'length' : 'stop';
    const count = (n: unknown) => (Number.isInteger(n) && (n as number) >= 0 ? (n as number) : 0);
    const [promptTokens, completionTokens] = [count(r.usage?.prompt_tokens), count(r.usage?.completion_tokens)];
    const completion: ChatCompletion = {
      id: typeof r.id === 'string' ? r.id : (turn.id ?? 'chatcmpl-teacher'),
      object: 'chat.completion',
      created: typeof r.created === 'number' ? r.created : Math.floor(Date.now() / 1000),
      model: modelName,
      system_fingerprint: typeof r.system_fingerprint === 'string' ? r.system_fingerprint : 'fp_teacher',
      choices: [
        {
          index: 0,
          message: { ...message, refusal: null },
          finish_reason: finish,
          logprobs: (body.logprobs ? (choice.logprobs ?? null) : null) as ChatCompletion['choices'][0]['logprobs'],
        },
      ],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
      },
    };
    return { completion, text: output.text };
  }

  /** A request without an episode: the teacher's answer, not recorded. */
  async complete(body: ChatCompletionRequest): Promise<ChatCompletion> {
    return (await this.generate(body, {})).completion;
  }

  close(): void {}
}
