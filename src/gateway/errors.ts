import { OpenAIHttpError } from '../openai/errors.ts';
import { UsageError } from '../core/errors.ts';

/**
 * The gateway's refusals, each with the status and OpenAI error object a client gets and the data a
 * caller needs. A refused request or reward changes nothing that was recorded.
 */

/** An episode id no request has carried (or, in training, that the trainer did not open). */
export class UnknownEpisodeError extends OpenAIHttpError {
  constructor(readonly episodeId: string) {
    super(
      404,
      `no episode "${episodeId}": an episode begins with a chat request carrying the header x-agent-r1-episode: ${episodeId}`,
      'invalid_request_error',
      'unknown_episode',
    );
  }
}

/** A request or reward for an episode whose record is already written. */
export class EpisodeClosedError extends OpenAIHttpError {
  constructor(
    readonly episodeId: string,
    readonly why: string,
  ) {
    super(
      409,
      `episode "${episodeId}" is closed (${why}); its record is written`,
      'invalid_request_error',
      'episode_closed',
    );
  }
}

/** An episode id that is not 1–128 letters, digits, `.`, `_`, `:`, `#` or `-`. */
export class BadEpisodeIdError extends OpenAIHttpError {
  constructor(readonly episodeId: string) {
    super(
      400,
      `the episode id ${JSON.stringify(episodeId.slice(0, 140))} is not 1-128 letters, digits, ".", "_", ":", "#" or "-"`,
      'invalid_request_error',
      'invalid_episode_id',
    );
  }
}

/** A request past an episode's turn limit. */
export class TooManyTurnsError extends OpenAIHttpError {
  constructor(
    readonly episodeId: string,
    readonly maxTurns: number,
  ) {
    super(
      400,
      `episode "${episodeId}" has had its ${maxTurns} turns (the gateway's limit per episode); post its reward`,
      'invalid_request_error',
      'too_many_turns',
    );
  }
}

/** A reward body that is not `{reward: number, success?: boolean, processRewards?: number[]}`. */
export class BadRewardError extends OpenAIHttpError {
  constructor(
    readonly episodeId: string,
    why: string,
  ) {
    super(400, `the reward for episode "${episodeId}" ${why}`, 'invalid_request_error', 'invalid_reward');
  }
}

/**
 * The teacher (`serve --policy openai:URL`) gave no usable answer: unreachable (after retries), an
 * error of its own, or a body that is not a chat completion. 502: the gateway is fine, the server
 * behind it is not; the episode stays open and the request can be sent again.
 */
export class TeacherError extends OpenAIHttpError {
  constructor(
    readonly teacher: string,
    why: string,
  ) {
    super(502, `the teacher at ${teacher} ${why}`, 'server_error', 'teacher_error');
  }
}

/** A `--policy openai:URL` whose URL is not an http(s) URL (a usage error: exit 2). */
export class TeacherUrlError extends UsageError {}
