import type { EpisodeConfig, EpisodeRecord, Message, PolicyOutput, Task } from '../core/types.ts';
import { runEpisode } from '../episode/run-episode.ts';
import { openAITools, type EpisodeDrivers } from '../episode/drive-episode.ts';
import { historyToOpenAI } from '../openai/messages.ts';
import type { PolicyRequest } from '../policy/policy.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { ClientPolicy } from './client-policy.ts';
import { EnvProtocolError, EpisodeAbandonedError, RecordWriteError } from './errors.ts';
import type { EnvObservation, EnvStepResult } from './protocol.ts';

export interface ServedEpisodeOptions {
  scenario: Scenario;
  task: Task;
  /** The episode seed (derived from the reset's seed, task and sample, as rollouts derive it). */
  seed: number;
  episodeId?: string;
  index: number;
  group: string;
  sample: number;
  runId: string;
  config: Partial<EpisodeConfig>;
  policy: { name: string; version: string };
  /**
   * Called once with the sealed record, before the client hears that the episode is over; a
   * RecordWriteError it throws is what the client hears instead.
   */
  onRecord(record: EpisodeRecord): void;
}

/** One turn's ToolEnv verdict, as the episode's onStep hook sees it. */
type StepSeen = Parameters<NonNullable<EpisodeDrivers['onStep']>>[0];

/** What the episode did after an action: it waits for the next one, it ended, or it could not run. */
type EpisodeEvent =
  | { kind: 'turn'; request: PolicyRequest }
  | { kind: 'end'; record: EpisodeRecord }
  | { kind: 'failed'; error: unknown };

/**
 * One episode played by a remote client: runEpisode with a ClientPolicy, and a hand-off between
 * the two. reset → the machine asks for turn 0; each step → the client's action goes in, and the
 * reply is whatever the machine does next (ask for the next turn, or end and seal the record).
 */
export class ServedEpisode {
  readonly task: Task;
  readonly episodeId: string;
  /** Steps the client has sent. */
  steps = 0;
  /** The sealed record, once the episode is over. */
  record: EpisodeRecord | undefined;
  /** Why the record could not be kept, when it could not. */
  recordError: RecordWriteError | undefined;
  readonly finished: Promise<EpisodeRecord | undefined>;
  private readonly policy: ClientPolicy;
  private ready: EpisodeEvent | undefined;
  private waiter: ((event: EpisodeEvent) => void) | undefined;
  private lastStep: StepSeen | undefined;

  constructor(private readonly options: ServedEpisodeOptions) {
    this.task = options.task;
    this.episodeId = options.episodeId ?? `${options.task.id}#${options.sample}`;
    this.policy = new ClientPolicy(options.policy.name, options.policy.version, (request) =>
      this.emit({ kind: 'turn', request }),
    );
    this.finished = runEpisode({
      scenario: options.scenario,
      task: options.task,
      policy: this.policy,
      seed: options.seed,
      index: options.index,
      group: options.group,
      sample: options.sample,
      runId: options.runId,
      config: options.config,
      episodeId: this.episodeId,
      onStep: (seen) => (this.lastStep = seen),
    }).then(
      (record) => {
        this.record = record;
        try {
          options.onRecord(record);
        } catch (error) {
          this.recordError =
            error instanceof RecordWriteError ? error : new RecordWriteError(this.episodeId, String(error));
          this.emit({ kind: 'failed', error: this.recordError });
          return record;
        }
        this.emit({ kind: 'end', record });
        return record;
      },
      (error: unknown) => {
        this.emit({ kind: 'failed', error });
        return undefined;
      },
    );
  }

  get done(): boolean {
    return this.record !== undefined;
  }

  /** Waits for the episode's first turn: the reset's observation. */
  async start(): Promise<EnvStepResult> {
    return this.reply(await this.next());
  }

  /** Plays the client's action and answers with what the episode did next. */
  async step(output: PolicyOutput): Promise<EnvStepResult> {
    if (!this.policy.waiting) throw new Error('the episode is not waiting for an action');
    this.steps++;
    this.lastStep = undefined;
    this.policy.answer(output);
    return this.reply(await this.next());
  }

  /**
   * Ends the episode without the client: the turn it waits on fails with `reason`, the machine
   * takes its error path, and the record (every turn played so far, and why it ended) is written.
   */
  abandon(reason: string): Promise<EpisodeRecord | undefined> {
    this.policy.end(new EpisodeAbandonedError(reason));
    return this.finished;
  }

  private emit(event: EpisodeEvent): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    if (waiter) waiter(event);
    else this.ready = event;
  }

  private next(): Promise<EpisodeEvent> {
    const ready = this.ready;
    this.ready = undefined;
    return ready ? Promise.resolve(ready) : new Promise((resolve) => (this.waiter = resolve));
  }

  private reply(event: EpisodeEvent): EnvStepResult {
    if (event.kind === 'failed') {
      if (event.error instanceof RecordWriteError)
        throw new EnvProtocolError('EXECUTION_ERROR', event.error.message, { recorded: false }, 503);
      const why = event.error instanceof Error ? event.error.message : String(event.error);
      throw new EnvProtocolError('EXECUTION_ERROR', `the episode could not run: ${why}`);
    }
    const base = { episode_id: this.episodeId, task_id: this.task.id };
    if (event.kind === 'turn') {
      const { request } = event;
      const last = this.lastStep;
      const observation: EnvObservation = {
        ...base,
        text: last ? last.step.observation : lastContent(request.messages),
        messages: historyToOpenAI(request.messages),
        turn: request.turn,
        process_reward: last ? last.step.reward : null,
      };
      if (!last) observation.tools = [...openAITools(this.options.scenario)];
      else addStepDetails(observation, last);
      return { observation, reward: last ? last.step.reward : null, done: false };
    }
    const record = event.record;
    const turn = record.turns.length === this.steps ? record.turns.at(-1) : undefined;
    const messages: Message[] = [...record.prompt];
    for (const t of record.turns) {
      messages.push({ role: 'assistant', content: t.text });
      if (t.observation !== null) messages.push({ role: 'tool', content: t.observation });
    }
    const observation: EnvObservation = {
      ...base,
      text: turn ? turn.observation : null,
      messages: historyToOpenAI(messages),
      turn: record.turns.length,
      process_reward: turn ? turn.reward : null,
      outcome: record.outcome,
      end_reason: record.endReason,
      answer: record.answer,
      total_reward: record.totalReward,
      ...(record.error !== undefined ? { error: record.error } : {}),
    };
    if (turn && this.lastStep) addStepDetails(observation, this.lastStep);
    // The step rewards of an episode sum to its total reward: the last one carries the outcome.
    return { observation, reward: (turn ? turn.reward : 0) + record.outcome.reward, done: true };
  }
}

function lastContent(messages: readonly Message[]): string | null {
  return messages.at(-1)?.content ?? null;
}

function addStepDetails(observation: EnvObservation, last: StepSeen): void {
  observation.action = last.action;
  if (last.results.length > 0)
    observation.tool_results = last.results.map((r) => ({
      name: r.name,
      ok: r.ok,
      content: r.content,
      ...(r.error ? { error: `${r.error.kind}: ${r.error.message}` } : {}),
    }));
  if (last.step.info) observation.info = last.step.info;
}
