import type { EpisodeRecord } from '../core/types.ts';
import type { ChatCompletion, ChatCompletionRequest } from './wire.ts';

/** The header that puts a chat request in an episode (`x-agent-r1-episode: ID`). */
export const EPISODE_HEADER = 'x-agent-r1-episode';

/**
 * What the HTTP server asks of a gateway (src/gateway): the recording one, or the one that answers
 * an agent from its records. With one, the server also takes `POST /v1/episodes/ID/reward`.
 */
export interface EpisodeGateway {
  readonly modelName: string;
  /** A request without an episode. */
  complete(body: ChatCompletionRequest): Promise<ChatCompletion>;
  /** A turn of episode `episodeId`. */
  completeTurn(episodeId: string, body: ChatCompletionRequest): Promise<ChatCompletion>;
  /** Closes an episode with the agent's reward; its record. */
  reward(episodeId: string, body: unknown): Promise<EpisodeRecord>;
}
