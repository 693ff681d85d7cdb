import { createHash, randomInt } from 'node:crypto';
import { z } from 'zod';
import { deriveSeed } from '../core/rng.ts';
import type { EpisodeRecord, Json, RecordPolicy } from '../core/types.ts';
import type { ServedPolicy } from '../openai/chat-format.ts';
import { ChatCompletions, type TurnAnswerer } from '../openai/completions.ts';
import { OpenAIHttpError } from '../openai/errors.ts';
import type { EpisodeGateway } from '../openai/episode-gateway.ts';
import { normalizeMessages, type ChatCompletion, type ChatCompletionRequest } from '../openai/wire.ts';
import { agentRecord, matchAnswers, type AgentTurn, type EpisodeEnd, type EpisodeSlot } from './agent-record.ts';
import {
  BadEpisodeIdError,
  BadRewardError,
  EpisodeClosedError,
  TooManyTurnsError,
  UnknownEpisodeError,
} from './errors.ts';

const EPISODE_ID = /^[A-Za-z0-9._:#-]{1,128}$/;

export interface GatewayOptions {
  /** What answers: a token policy's completions (policyAnswerer), or a scripted demonstrator (or, till setAnswerer, nothing: 503). */
  answerer?: TurnAnswerer;
  modelName: string;
  /** The run the records belong to, and who the agent is (the records' `scenario`). */
  runId: string;
  agent: { id: string; version: string; options: { [key: string]: string } };
  /**
   * `policy`: every turn samples as the policy is set to and from a seed of the episode's, whatever
   * the request asks (a trainer samples as it scores); `request` (default): as the request asks.
   */
  sampling?: 'policy' | 'request';
  /** Episodes begin with their first request (serve --record); otherwise only those open()ed are answered. */
  openOnRequest?: boolean;
  /** The first record's index when episodes are numbered as they close (serve --record). */
  firstIndex?: number;
  maxTurns?: number;
  maxTokensPerTurn?: number;
  /** An episode with neither a request nor its reward for this long is written as unfinished. */
  idleTimeoutMs?: number;
  /** Receives each sealed record (awaited before the reward is answered). */
  onRecord(record: EpisodeRecord): void | Promise<void>;
}

export const GATEWAY_DEFAULTS = { maxTurns: 32, idleTimeoutMs: 600_000 } as const;

interface OpenEpisode {
  slot: Omit<EpisodeSlot, 'index' | 'policy' | 'limits'> & { index?: number };
  /** The policy that answered its first turn. */
  policy: RecordPolicy;
  turns: AgentTurn[];
  inFlight: Set<Promise<unknown>>;
  reserved: number;
  timer?: NodeJS.Timeout;
  written?: (record: EpisodeRecord) => void;
}

const rewardSchema = z.strictObject({
  reward: z.number(),
  success: z.boolean().optional(),
  processRewards: z.array(z.number()).optional(),
});

/**
 * The recording gateway: chat completions whose requests carry an episode id are answered by the
 * policy and recorded turn by turn (the rendered prompt's ids, the sampled ids and their log-probs,
 * what the agent sent); a reward closes the episode and writes its record (agent-record.ts). An
 * earlier answer the agent sends back is put in as the ids sampled for it, matched to this
 * episode's turns by position, never re-tokenized from its text.
 */
export class Gateway implements EpisodeGateway {
  private answerer: TurnAnswerer | null;
  private readonly open = new Map<string, OpenEpisode>();
  /** Why each recently closed episode closed, so a second reward is told so (bounded). */
  private readonly closed = new Map<string, string>();
  private nextIndex: number;

  constructor(private readonly options: GatewayOptions) {
    this.answerer = options.answerer ?? null;
    this.nextIndex = options.firstIndex ?? 0;
  }

  get modelName(): string {
    return this.options.modelName;
  }

  /** What answers from now on (a trainer's next policy); episodes in progress keep their turns. */
  setAnswerer(answerer: TurnAnswerer): void {
    if (answerer === this.answerer) return;
    this.answerer?.close();
    this.answerer = answerer;
  }

  /** Requests without an episode: answered, not recorded. */
  complete(body: ChatCompletionRequest): Promise<ChatCompletion> {
    return this.serving().complete(body);
  }

  private serving(): TurnAnswerer {
    if (!this.answerer) throw new OpenAIHttpError(503, 'no model is served yet', 'server_error', 'not_ready');
    return this.answerer;
  }

  /**
   * Opens an episode the caller numbers (training: its task, group, sample and seed). The promise is
   * its record, however it closes (a reward posted, end(), the idle timeout, the gateway's close).
   */
  openEpisode(
    slot: Pick<EpisodeSlot, 'episodeId' | 'index' | 'task' | 'group' | 'sample' | 'seed'>,
  ): Promise<EpisodeRecord> {
    checkId(slot.episodeId);
    if (this.open.has(slot.episodeId) || this.closed.has(slot.episodeId))
      throw new Error(`episode "${slot.episodeId}" was opened before`);
    const episode = this.fresh({ ...slot, runId: this.options.runId, scenario: this.options.agent });
    const written = new Promise<EpisodeRecord>((resolve) => (episode.written = resolve));
    this.open.set(slot.episodeId, episode);
    this.touch(slot.episodeId);
    return written;
  }

  /** One turn of an episode: answered by the policy and recorded. */
  async completeTurn(episodeId: string, body: ChatCompletionRequest): Promise<ChatCompletion> {
    const episode = this.episode(episodeId, true);
    const answerer = this.serving();
    const maxTurns = this.options.maxTurns ?? GATEWAY_DEFAULTS.maxTurns;
    if (episode.reserved >= maxTurns) throw new TooManyTurnsError(episodeId, maxTurns);
    const k = episode.reserved++;
    this.touch(episodeId);
    const messages = normalizeMessages(body.messages);
    if (k === 0 && this.options.openOnRequest && episode.slot.task.question === '') {
      episode.slot.task.question = messages.find((m) => m.role === 'user')?.content ?? '';
      episode.policy = recordPolicy(answerer);
    }
    const { matched, given } = matchAnswers(
      messages,
      episode.turns.map((t) => ({ message: t.response.message, tokens: t.tokens })),
    );
    const trainer = this.options.sampling === 'policy';
    const seed = trainer ? deriveSeed(episode.slot.seed, 'turn', k) : (body.seed ?? randomInt(2 ** 31 - 1));
    const work = answerer.generate(body, {
      id: `chatcmpl-${createHash('sha256').update(`${this.options.runId}\0${episodeId}\0${k}`).digest('hex').slice(0, 24)}`,
      given: (i) => given.get(i),
      seed,
      ...(trainer ? { sampling: 'policy' as const } : {}),
      ...(this.options.maxTokensPerTurn ? { maxTokens: this.options.maxTokensPerTurn } : {}),
      task: episode.slot.task,
      episodeSeed: episode.slot.seed,
    });
    episode.inFlight.add(work);
    try {
      const generated = await work;
      const { completion } = generated;
      const choice = completion.choices[0]!;
      const { refusal: _refusal, ...message } = choice.message;
      episode.turns.push({
        request: { messages, tools: (body.tools ?? null) as Json[] | null, params: paramsOf(body) },
        seed,
        text: generated.text,
        ...(generated.prompt ? { prompt: generated.prompt } : {}),
        ...(generated.tokens ? { tokens: generated.tokens, logprobs: generated.logprobs ?? [] } : {}),
        response: { message, finish_reason: choice.finish_reason },
        matched,
      });
      return completion;
    } catch (err) {
      episode.reserved--;
      throw err;
    } finally {
      episode.inFlight.delete(work);
      this.touch(episodeId);
    }
  }

  /** `POST /v1/episodes/ID/reward`: closes the episode with the agent's reward and writes its record. */
  async reward(episodeId: string, body: unknown): Promise<EpisodeRecord> {
    const episode = this.episode(episodeId, false);
    const parsed = rewardSchema.safeParse(body);
    if (!parsed.success) throw new BadRewardError(episodeId, `is not valid: ${z.prettifyError(parsed.error)}`);
    const { reward, success, processRewards } = parsed.data;
    if (!Number.isFinite(reward)) throw new BadRewardError(episodeId, `is not a finite number (${reward})`);
    if (processRewards?.some((r) => !Number.isFinite(r)))
      throw new BadRewardError(episodeId, 'has a process reward that is not a finite number');
    await Promise.allSettled([...episode.inFlight]);
    if (episode.turns.length === 0)
      throw new BadRewardError(episodeId, 'came before any chat request of the episode: there is nothing to reward');
    if (processRewards && processRewards.length > episode.turns.length)
      throw new BadRewardError(
        episodeId,
        `has ${processRewards.length} process rewards for ${episode.turns.length} turns (one per turn at most)`,
      );
    return this.finish(episodeId, {
      reward,
      ...(success === undefined ? {} : { success }),
      ...(processRewards ? { processRewards } : {}),
    });
  }

  /** Closes an episode as given (the trainer's agent returned, threw or ran out of time). */
  async end(episodeId: string, end: EpisodeEnd): Promise<EpisodeRecord> {
    const episode = this.episode(episodeId, false);
    await Promise.allSettled([...episode.inFlight]);
    if (episode.turns.length === 0 && !('error' in end))
      return this.finish(episodeId, { error: 'the agent made no model request: there is nothing to reward' });
    return this.finish(episodeId, end);
  }

  /** Whether an episode is still open (no record written yet). */
  isOpen(episodeId: string): boolean {
    return this.open.has(episodeId);
  }

  /** Writes every open episode as unfinished, then stops answering. */
  async close(): Promise<void> {
    for (const id of [...this.open.keys()])
      await this.finish(id, { error: 'unfinished: the gateway stopped before a reward was posted' }).catch(() => {});
    this.answerer?.close();
  }

  private async finish(episodeId: string, end: EpisodeEnd): Promise<EpisodeRecord> {
    const episode = this.open.get(episodeId);
    if (!episode) throw new EpisodeClosedError(episodeId, this.closed.get(episodeId) ?? 'closed');
    this.open.delete(episodeId);
    clearTimeout(episode.timer);
    this.remember(episodeId, 'error' in end ? end.error : 'its reward was posted');
    const index = episode.slot.index ?? this.nextIndex++;
    const maxTurns = this.options.maxTurns ?? GATEWAY_DEFAULTS.maxTurns;
    const context = this.answerer?.contextLength ?? 0;
    const record = agentRecord(
      {
        ...episode.slot,
        index,
        policy: episode.policy,
        limits: { maxTurns, maxTokensPerTurn: this.options.maxTokensPerTurn ?? context, maxTotalTokens: context },
      } as EpisodeSlot,
      episode.turns,
      end,
    );
    try {
      await this.options.onRecord(record);
    } catch (err) {
      // Not written (a full disk): the episode stays open, so its reward can be posted again.
      this.closed.delete(episodeId);
      this.open.set(episodeId, episode);
      this.touch(episodeId);
      throw err;
    }
    episode.written?.(record);
    return record;
  }

  private episode(episodeId: string, opening: boolean): OpenEpisode {
    checkId(episodeId);
    const open = this.open.get(episodeId);
    if (open) return open;
    const why = this.closed.get(episodeId);
    if (why !== undefined) throw new EpisodeClosedError(episodeId, why);
    if (!opening || !this.options.openOnRequest) throw new UnknownEpisodeError(episodeId);
    const episode = this.fresh({
      runId: this.options.runId,
      episodeId,
      task: { id: episodeId, split: 'serve', question: '' },
      group: episodeId,
      sample: 0,
      seed: 0,
      scenario: this.options.agent,
    });
    this.open.set(episodeId, episode);
    return episode;
  }

  private fresh(slot: OpenEpisode['slot']): OpenEpisode {
    return { slot, policy: recordPolicy(this.answerer), turns: [], inFlight: new Set(), reserved: 0 };
  }

  /** Restarts an episode's idle clock; past it the episode is written as unfinished. */
  private touch(episodeId: string): void {
    const episode = this.open.get(episodeId);
    if (!episode) return;
    clearTimeout(episode.timer);
    const ms = this.options.idleTimeoutMs ?? GATEWAY_DEFAULTS.idleTimeoutMs;
    episode.timer = setTimeout(() => {
      if (episode.inFlight.size > 0) return this.touch(episodeId);
      const why = `unfinished: no reward was posted within ${ms / 1000} s of its last request`;
      void this.finish(episodeId, { error: why }).catch(() => {});
    }, ms);
    episode.timer.unref();
  }

  private remember(episodeId: string, why: string): void {
    this.closed.set(episodeId, why);
    if (this.closed.size > 100_000) this.closed.delete(this.closed.keys().next().value!);
  }
}

/** A token policy's completions, as a gateway's answerer. */
export function policyAnswerer(
  policy: ServedPolicy,
  modelName: string,
  batching: { maxBatch?: number; maxWaitMs?: number } = {},
): ChatCompletions {
  return new ChatCompletions({ policy, modelName, ...batching });
}

/** Who answers, as a record names it; a teacher's text-only mark is kept (RL refuses such records). */
function recordPolicy(answerer: TurnAnswerer | null): RecordPolicy {
  const policy = answerer?.policy;
  return { id: policy?.id ?? '', version: policy?.version ?? '', ...(policy?.textOnly ? { textOnly: true } : {}) };
}

function checkId(episodeId: string): void {
  if (!EPISODE_ID.test(episodeId)) throw new BadEpisodeIdError(episodeId);
}

/** The request's fields but its messages and tools (and how it is delivered), as recorded. */
export function paramsOf(body: ChatCompletionRequest): { [key: string]: Json } {
  const { messages: _m, tools: _t, stream: _s, stream_options: _o, ...rest } = body;
  return Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined && v !== null)) as {
    [key: string]: Json;
  };
}
