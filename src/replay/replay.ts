import type { EpisodeRecord, PolicyOutput, ReplyRecord, ToolResult } from '../core/types.ts';
import { AgentR1Error } from '../core/errors.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { driveEpisode } from '../episode/drive-episode.ts';
import { shownContexts } from '../record/step-context.ts';
import { buildRecord } from '../episode/run-episode.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { ToolRunner } from '../tools/runner.ts';

/** The first place where a replay differs from its record. */
export interface Divergence {
  episodeId: string;
  /** The turn index, or null for episode-level fields. */
  turn: number | null;
  field: string;
  /** For `results`: the first call (0-based, in the turn's call order) whose result differs. */
  call?: number;
  expected: unknown;
  actual: unknown;
}

export interface ReplayResult {
  episodeId: string;
  verified: boolean;
  divergence?: Divergence;
  /** The replayed record (equal to the input when verified). */
  replayed?: EpisodeRecord;
}

export interface ReplayOptions {
  /** Re-execute the tools for real instead of feeding back the recorded results; differences are drift. */
  liveTools?: boolean;
}

const TURN_FIELDS = [
  'context',
  'states',
  'action',
  'results',
  'observation',
  'reward',
  'done',
  'info',
  'tokenCount',
  'text',
  'reply',
] as const;
const EPISODE_FIELDS = [
  'answer',
  'outcome',
  'processReward',
  'totalReward',
  'totalTokens',
  'endReason',
  'status',
  'error',
  'roles',
] as const;

/**
 * Re-drives the episode machine from a record: the recorded policy outputs (and, unless liveTools,
 * the recorded tool results) go back in; the ToolEnv runs for real; every state, observation and
 * reward must come out as recorded.
 */
export async function replayRecord(
  record: EpisodeRecord,
  scenario: Scenario,
  options: ReplayOptions = {},
): Promise<ReplayResult> {
  if (scenario.id !== record.scenario.id) {
    throw new AgentR1Error(`record ${record.episodeId} is from scenario ${record.scenario.id}, not ${scenario.id}`);
  }
  // The task must be the one the scenario, with the record's options, makes for its id.
  if (scenario.task) {
    const made = scenario.task(record.task.id) ?? null;
    if (!same(made, record.task)) {
      const divergence: Divergence = {
        episodeId: record.episodeId,
        turn: null,
        field: 'task',
        expected: record.task,
        actual:
          made ??
          `(scenario ${scenario.id} with options ${canonicalJson(scenario.options)} makes no task ${record.task.id})`,
      };
      return { episodeId: record.episodeId, verified: false, divergence };
    }
  }
  const runner = options.liveTools
    ? new ToolRunner(scenario.tools, {
        timeoutMs: record.config.toolTimeoutMs,
        maxOutputChars: record.config.maxToolOutputChars,
      })
    : undefined;
  const userRunner =
    options.liveTools && scenario.user
      ? new ToolRunner(scenario.user.tools, {
          timeoutMs: record.config.toolTimeoutMs,
          maxOutputChars: record.config.maxToolOutputChars,
        })
      : undefined;
  const driven = await driveEpisode(scenario, record.task, record.seed, record.config, {
    encode: record.promptTokens ? recordedEncoding(record) : undefined,
    tools: runner ? 'live' : 'recorded',
    act: async (input) => recordedOutput(record, input.turn),
    execute: async (call, ctx): Promise<ToolResult> => {
      if (runner) return runner.run(call, { task: record.task, rng: ctx.rng, state: ctx.state, signal: ctx.signal });
      const recorded = record.turns[ctx.turn]?.results[ctx.callIndex];
      if (!recorded)
        throw new AgentR1Error(
          `turn ${ctx.turn} calls a tool the record has no result for (call ${ctx.callIndex + 1})`,
        );
      return recorded;
    },
    // The user's turns come from the record too: a reply the record does not have is a divergence,
    // never a call to the model (or script) that played it.
    user: {
      act: async ({ turn, step }) => recordedReplyOutput(record, turn, step),
      execute: async (call, ctx): Promise<ToolResult> => {
        if (userRunner)
          return userRunner.run(call, { task: record.task, rng: ctx.rng, state: ctx.state, signal: ctx.signal });
        const recorded = record.turns[ctx.turn]?.reply?.steps[ctx.step]?.results[ctx.callIndex];
        if (!recorded)
          throw new AgentR1Error(
            `the user's step ${ctx.step + 1} of turn ${ctx.turn} calls a tool the record has no result for (call ${ctx.callIndex + 1})`,
          );
        return recorded;
      },
    },
  });
  const replayed = buildRecord(
    {
      // Where the scenario's folder is now is no part of what happened: the record keeps its own.
      scenario: { ...scenario, source: record.scenario.source },
      task: record.task,
      policy: record.policy as never,
      seed: record.seed,
      group: record.group,
      runId: record.runId,
      userPolicy: record.roles?.user?.policy,
    },
    { episodeId: record.episodeId, index: record.index, sample: record.sample, config: record.config },
    driven,
  );
  const divergence = firstDivergence(record, replayed);
  return divergence
    ? { episodeId: record.episodeId, verified: false, divergence, replayed }
    : { episodeId: record.episodeId, verified: true, replayed };
}

/**
 * The record's own token ids stand in for the policy's tokenizer: the prompt first, then (step-level)
 * each step's context, and the observations, each in turn order.
 */
function recordedEncoding(record: EpisodeRecord) {
  const observed = record.turns.filter((t) => t.observation !== null);
  const shown = shownContexts(record);
  const prompts = [
    record.promptTokens!,
    ...record.turns.flatMap((t, i) => (t.context ? [shown[i]!.tokens ?? []] : [])),
  ];
  let nextObservation = 0;
  let nextPrompt = 0;
  return {
    prompt: () => (prompts[nextPrompt++] ?? []).slice(),
    observation: () => observed[nextObservation++]?.observationTokens ?? [],
  };
}

/** The failure an error record ended with, raised again where the record stops (see recordedOutput). */
export class RecordedFailure extends AgentR1Error {}

function recordedOutput(record: EpisodeRecord, turn: number): PolicyOutput {
  const t = record.turns[turn];
  // An episode whose policy failed at this turn (an API that gave up, a remote client that went
  // away) has no action here: the replay fails the same way, so the record verifies.
  if (!t && turn === record.turns.length && record.status === 'error' && record.error !== undefined)
    throw new RecordedFailure(record.error);
  if (!t) throw new AgentR1Error(`the replay reached turn ${turn}, but the record has ${record.turns.length} turns`);
  const out: PolicyOutput = { text: t.text };
  if (t.tokens) out.tokens = t.tokens;
  if (t.logprobs) out.logprobs = t.logprobs;
  if (t.tokenDrift !== undefined) out.tokenDrift = t.tokenDrift;
  return out;
}

function recordedReplyOutput(record: EpisodeRecord, turn: number, step: number): PolicyOutput {
  const s = record.turns[turn]?.reply?.steps[step];
  if (!s)
    throw new AgentR1Error(
      `the replay asked the user for step ${step + 1} of its reply to turn ${turn}, which the record does not have`,
    );
  const out: PolicyOutput = { text: s.text };
  if (s.tokens) out.tokens = s.tokens;
  if (s.logprobs) out.logprobs = s.logprobs;
  return out;
}

/** Where two replies first differ, as a field path (`reply.steps[1].text`), with both values. */
function replyDivergence(e: ReplyRecord | undefined, a: ReplyRecord | undefined) {
  if (!e || !a) return { field: 'reply', expected: e, actual: a };
  const n = Math.max(e.steps.length, a.steps.length);
  for (let k = 0; k < n; k++) {
    const es = e.steps[k];
    const as = a.steps[k];
    if (!es || !as) return { field: `reply.steps[${k}]`, expected: es, actual: as };
    for (const f of ['text', 'action', 'results', 'tokens', 'logprobs'] as const)
      if (!same(es[f], as[f])) return { field: `reply.steps[${k}].${f}`, expected: es[f], actual: as[f] };
  }
  for (const f of ['text', 'ended', 'role'] as const)
    if (!same(e[f], a[f])) return { field: `reply.${f}`, expected: e[f], actual: a[f] };
  return { field: 'reply', expected: e, actual: a };
}

function firstDifferentCall(expected: readonly ToolResult[], actual: readonly ToolResult[]): number {
  let k = 0;
  while (k < Math.max(expected.length, actual.length) && same(expected[k], actual[k])) k++;
  return k;
}

/** Equal as written to a record (so 0 and -0, or a missing and an undefined field, are equal). */
const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);

/** The first field, in turn order, where two records differ. */
export function firstDivergence(expected: EpisodeRecord, actual: EpisodeRecord): Divergence | undefined {
  const id = expected.episodeId;
  // Another scenario version or options is the cause of whatever differs after it: named first.
  if (!same(expected.scenario, actual.scenario))
    return { episodeId: id, turn: null, field: 'scenario', expected: expected.scenario, actual: actual.scenario };
  const turns = Math.max(expected.turns.length, actual.turns.length);
  for (let i = 0; i < turns; i++) {
    const e = expected.turns[i];
    const a = actual.turns[i];
    if (!e || !a)
      return {
        episodeId: id,
        turn: i,
        field: 'turn',
        expected: e ? 'present' : 'absent',
        actual: a ? 'present' : 'absent',
      };
    for (const field of TURN_FIELDS) {
      if (same(e[field], a[field])) continue;
      if (field === 'reply') return { episodeId: id, turn: i, ...replyDivergence(e.reply, a.reply) };
      if (field === 'results') {
        // Drift is told at the call that returned something else, not as the whole turn's list.
        const call = firstDifferentCall(e.results, a.results);
        return { episodeId: id, turn: i, field, call, expected: e.results[call], actual: a.results[call] };
      }
      return { episodeId: id, turn: i, field, expected: e[field], actual: a[field] };
    }
  }
  for (const field of EPISODE_FIELDS) {
    if (!same(expected[field], actual[field])) {
      return { episodeId: id, turn: null, field, expected: expected[field], actual: actual[field] };
    }
  }
  if (expected.checksum !== actual.checksum) {
    return { episodeId: id, turn: null, field: 'checksum', expected: expected.checksum, actual: actual.checksum };
  }
  return undefined;
}
