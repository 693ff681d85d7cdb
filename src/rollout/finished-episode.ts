import type { EndReason, EpisodeRecord } from '../core/types.ts';
import { recordFromTrustedLine, serializeRecord } from '../record/record.ts';

/**
 * What a run's summary and progress take from a record, computed where the record was played (see
 * rolloutSummarizer): a worker thread sends it with the record's line, so the main thread folds the
 * summary without parsing the line.
 */
export interface EpisodeDigest {
  index: number;
  turns: number;
  /** Tokens the policy generated. */
  tokens: number;
  totalReward: number;
  success: boolean;
  status: EpisodeRecord['status'];
  endReason: EndReason;
  /** The scenario summarizer's digest of the record, where it has one (Summarizer.digest). */
  own?: unknown;
  /** What the scenario summarizer's digest threw instead. */
  ownError?: string;
}

const decoder = new TextDecoder();

/**
 * A finished episode as rollout() hands it on: its sealed JSONL line, its digest, and the record,
 * which is parsed from the line only if someone asks for it. A record played in this thread is at
 * hand; one played in a worker thread arrives as its line's UTF-8 bytes, which a RecordWriter writes
 * as they are (`writeLine`).
 */
export class FinishedEpisode {
  private constructor(
    readonly digest: EpisodeDigest,
    private readonly bytes: Uint8Array | undefined,
    private held: EpisodeRecord | undefined,
  ) {}

  /** A record at hand (played in this thread). */
  static of(record: EpisodeRecord, digest: EpisodeDigest): FinishedEpisode {
    return new FinishedEpisode(digest, undefined, record);
  }

  /** A record sealed by another thread of this process, as the UTF-8 bytes of its line (trusted: not checked). */
  static sealed(bytes: Uint8Array, digest: EpisodeDigest): FinishedEpisode {
    return new FinishedEpisode(digest, bytes, undefined);
  }

  get index(): number {
    return this.digest.index;
  }

  /** The sealed line without its newline: UTF-8 bytes where a worker thread sent them, else the string. */
  get line(): string | Uint8Array {
    return this.bytes ?? serializeRecord(this.held!);
  }

  /** The sealed line as a string. */
  get text(): string {
    return this.bytes ? decoder.decode(this.bytes) : serializeRecord(this.held!);
  }

  /** The record: at hand, or parsed from the line on first use (the costly part a writer does without). */
  get record(): EpisodeRecord {
    this.held ??= recordFromTrustedLine(this.text);
    return this.held;
  }
}

/** What an executor hands on: a record, or an episode sealed in another thread (its line and digest). */
export type Finished = EpisodeRecord | FinishedEpisode;

/** The sealed line of either, as a string. */
export function lineOf(finished: Finished): string {
  return finished instanceof FinishedEpisode ? finished.text : serializeRecord(finished);
}
