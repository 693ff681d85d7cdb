import { randomInt } from 'node:crypto';
import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import { episodeSeed } from '../episode/run-episode.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { actionOutput } from './action-text.ts';
import { EnvProtocolError, type RecordWriteError } from './errors.ts';
import { actionSchema, resetArgsSchema, validate, type EnvState, type EnvStepResult } from './protocol.ts';
import { ServedEpisode } from './served-episode.ts';
import type { TaskPicker } from './task-picker.ts';

export interface SessionContext {
  scenario: Scenario;
  tasks: TaskPicker;
  config: Partial<EpisodeConfig>;
  runId: string;
  onRecord(record: EpisodeRecord): void;
  /** Throws (an EnvProtocolError) when the server takes no new episode now: it cannot write records. */
  admit(): void;
}

/**
 * One client's session: a sequence of episodes, one at a time. The transport (WebSocket, or one
 * HTTP request) serializes calls, so a session never sees two at once.
 */
export class EnvSession {
  private episode: ServedEpisode | undefined;
  private details: { split: string; taskIndex: number; seed: number; group: string; sample: number } | undefined;
  private episodes = 0;
  private closed = false;

  constructor(private readonly ctx: SessionContext) {}

  async reset(data: unknown): Promise<EnvStepResult> {
    this.refuseIfClosed();
    const args = validate(resetArgsSchema, data ?? {}, 'reset');
    const { tasks } = this.ctx;
    const split = args.split ?? tasks.defaultSplit;
    const runSeed = args.seed ?? randomInt(0, 2 ** 31);
    const taskIndex = args.task ?? 0;
    // The task is found before the episode under way ends: a bad reset leaves the session as it was.
    const task = await tasks.pick(split, runSeed, taskIndex);
    await this.endEpisode('the client reset the session before the episode ended');
    // The session may have closed meanwhile (a disconnect): an episode started now would wait forever.
    this.refuseIfClosed();
    this.ctx.admit();
    const sample = args.sample ?? 0;
    const seed = episodeSeed(runSeed, task.id, sample);
    const group = args.group ?? task.id;
    this.details = { split, taskIndex, seed, group, sample };
    const episode = new ServedEpisode({
      scenario: this.ctx.scenario,
      task,
      seed,
      ...(args.episode_id ? { episodeId: args.episode_id } : {}),
      // The episode's ordinal in its session, not its place in the shared file: records must not
      // depend on how sessions interleave.
      index: this.episodes++,
      group,
      sample,
      runId: this.ctx.runId,
      config: this.ctx.config,
      policy: { name: args.policy ?? 'client', version: args.policy_version ?? 'unversioned' },
      onRecord: this.ctx.onRecord,
    });
    this.episode = episode;
    try {
      return await episode.start();
    } catch (err) {
      this.episode = undefined; // it could not start: there is nothing to step
      throw err;
    }
  }

  async step(data: unknown): Promise<EnvStepResult> {
    this.refuseIfClosed();
    const action = validate(actionSchema, data, 'step');
    const episode = this.episode;
    if (!episode) throw new EnvProtocolError('EXECUTION_ERROR', 'no episode yet: send reset first');
    if (episode.done)
      throw new EnvProtocolError(
        'EXECUTION_ERROR',
        `the episode is over (ended: ${episode.record!.endReason}); send reset to start another`,
      );
    return episode.step(actionOutput(action));
  }

  state(): EnvState {
    const state: EnvState = {
      episode_id: this.episode?.episodeId ?? null,
      step_count: this.episode?.steps ?? 0,
      scenario: this.ctx.scenario.id,
      episodes: this.episodes,
    };
    const episode = this.episode;
    const d = this.details;
    if (episode && d) {
      Object.assign(state, {
        split: d.split,
        task_id: episode.task.id,
        task_index: d.taskIndex,
        seed: d.seed,
        group: d.group,
        sample: d.sample,
        done: episode.done,
      });
      if (episode.record) state.end_reason = episode.record.endReason;
    }
    return state;
  }

  /** True while an episode is under way (its record not yet written). */
  get playing(): boolean {
    return this.episode !== undefined && !this.episode.done;
  }

  /**
   * Ends the session; an episode under way is recorded as ended by `reason`. Resolves with the
   * RecordWriteError when that record could not be written (the caller says so where it can).
   */
  async close(reason: string): Promise<RecordWriteError | undefined> {
    if (this.closed) return undefined;
    this.closed = true;
    const episode = this.episode;
    if (!episode || episode.done) return undefined;
    await this.endEpisode(reason);
    return episode.recordError;
  }

  private refuseIfClosed(): void {
    if (this.closed) throw new EnvProtocolError('SESSION_ERROR', 'the session is closed');
  }

  private async endEpisode(reason: string): Promise<void> {
    const episode = this.episode;
    if (!episode || episode.done) return;
    const turn = episode.steps;
    await episode.abandon(`${reason} (turn ${turn})`);
  }
}
