import test from 'ava';
import type { EpisodeRecord, TurnRecord } from '../../src/core/types.ts';
import { DEFAULT_EPISODE_CONFIG } from '../../src/core/types.ts';
import {
  buildStepTrajectories,
  buildTrajectories,
  buildTrajectory,
  fitToContext,
  recordTokens,
  TextOnlyRecordError,
  TrajectoryError,
} from '../../src/policy/trajectory.ts';
import { parseRecordLine, sealRecord, serializeRecord } from '../../src/record/record.ts';

const turn = (index: number, tokens: number[], obs: number[] | undefined, reward: number): TurnRecord => ({
  index,
  text: 'x',
  tokens,
  logprobs: tokens.map((_, k) => -0.1 * (k + 1)),
  tokenCount: tokens.length,
  action: { kind: 'answer', text: '' },
  results: [],
  observation: obs ? 'o' : null,
  observationTokens: obs,
  reward,
  done: false,
  states: [],
});

const record = (over: Partial<EpisodeRecord> = {}): EpisodeRecord => ({
  schema: 1,
  runId: 'r',
  episodeId: 'e0',
  index: 0,
  scenario: { id: 's', version: '1', options: {} },
  task: { id: 't', split: 'train', question: 'q' },
  group: 'g0',
  sample: 0,
  seed: 1,
  policy: { id: 'ckpt:x', version: 'v7' },
  config: DEFAULT_EPISODE_CONFIG,
  prompt: [],
  promptTokens: [1, 2, 3],
  turns: [turn(0, [10, 11], [20, 21, 22], 0.5), turn(1, [12, 13, 14], [30], 0.25)],
  answer: 'a',
  outcome: { reward: 1, success: true, metrics: { em: 1 } },
  processReward: 0.75,
  totalReward: 1.75,
  totalTokens: 5,
  status: 'ok',
  endReason: 'answered',
  checksum: '',
  ...over,
});

test('a record becomes [prompt][action][obs][action][end] with the mask on action tokens only', (t) => {
  const s = buildTrajectory(record());
  t.deepEqual(s.tokens, [1, 2, 3, 10, 11, 20, 21, 22, 12, 13, 14, 30]);
  t.deepEqual(s.mask, [0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0]);
  // process reward 0.5 on the first action's last token; 0.25 + outcome 1 on the last action token
  t.deepEqual(s.rewards, [0, 0, 0, 0, 0.5, 0, 0, 0, 0, 0, 1.25, 0]);
  t.deepEqual(
    s.sampleLogprobs.map((x) => Math.round(x * 10) / 10),
    [0, 0, 0, -0.1, -0.2, 0, 0, 0, -0.1, -0.2, -0.3, 0],
  );
  t.is(s.promptLength, 3);
  t.is(s.policyVersion, 'v7');
  t.is(s.group, 'g0');
  t.true(s.success);
});

test('a turn without tokens hands its reward to the neighbouring action', (t) => {
  const s = buildTrajectory(
    record({ turns: [turn(0, [], [20], 0.3), turn(1, [12], undefined, 0.2), turn(2, [], undefined, -0.1)] }),
  );
  t.deepEqual(s.tokens, [1, 2, 3, 20, 12]);
  t.deepEqual(s.mask, [0, 0, 0, 0, 1]);
  t.is(Math.round(s.rewards[4]! * 1e9) / 1e9, 0.3 + 0.2 - 0.1 + 1);
});

test('failed or untokenized episodes are skipped with a reason; the rest still build', (t) => {
  const bad = [
    record({ episodeId: 'fail', status: 'error', error: 'worker died' }),
    record({ episodeId: 'text', promptTokens: undefined }),
    record({ episodeId: 'empty', turns: [] }),
    record({ episodeId: 'lp', turns: [{ ...turn(0, [1, 2], undefined, 0), logprobs: [0] }] }),
    record({ episodeId: 'nan', outcome: { reward: NaN, success: false } }),
  ];
  const { sequences, skipped } = buildTrajectories([record(), ...bad, record({ episodeId: 'e1' })]);
  t.deepEqual(
    sequences.map((s) => s.episodeId),
    ['e0', 'e1'],
  );
  t.deepEqual(
    skipped.map((s) => s.episodeId),
    ['fail', 'text', 'empty', 'lp', 'nan'],
  );
  t.regex(skipped[0]!.reason, /worker died/);
  t.regex(skipped[1]!.reason, /no prompt token ids/);
  t.regex(skipped[2]!.reason, /no action tokens/);
  t.regex(skipped[3]!.reason, /1 log-probs for 2 tokens/);
  t.throws(() => buildTrajectory(null as any), { instanceOf: TrajectoryError });
});

test('fitToContext cuts at the context and moves rewards beyond it to the last action token inside', (t) => {
  const s = buildTrajectory(record());
  t.is(fitToContext(s, 100), s);
  const cut = fitToContext(s, 9)!;
  t.deepEqual(cut.tokens, [1, 2, 3, 10, 11, 20, 21, 22, 12]);
  t.deepEqual(cut.mask, [0, 0, 0, 1, 1, 0, 0, 0, 1]);
  t.deepEqual(cut.rewards, [0, 0, 0, 0, 0.5, 0, 0, 0, 1.25]);
  t.is(fitToContext(s, 3), null);
});

// A stand-in encoding: prompt [100], action text → [200 + length], observation → [50, 51], end → [99].
const encoding = {
  prompt: () => [100],
  action: (text: string) => [200 + text.length],
  observation: () => [50, 51],
  end: () => [99],
};

test('recordTokens: recorded ids as they are (RL), or the texts encoded as live play encodes them (SFT)', (t) => {
  const r = record({ turns: [turn(0, [10, 11], [20, 21, 22], 0.5), turn(1, [12, 13, 14], undefined, 0.25)] });
  const ids = recordTokens(r);
  t.deepEqual(ids.tokens, [1, 2, 3, 10, 11, 20, 21, 22, 12, 13, 14]);
  t.deepEqual(ids.actions, [
    { start: 3, end: 5 },
    { start: 8, end: 11 },
  ]);
  t.deepEqual(buildTrajectory(r).tokens, ids.tokens);
  // encoded: the end tokens close the last action, which has no observation
  const encoded = recordTokens(r, { encoding });
  t.deepEqual(encoded.tokens, [100, 201, 50, 51, 201, 99]);
  t.deepEqual(encoded.mask, [0, 1, 0, 0, 1, 0]);
  // useRecordTokens: the ids where the record has them, the encoding where not
  const mixed = recordTokens({ ...r, promptTokens: undefined }, { encoding, useRecordTokens: true });
  t.deepEqual(mixed.tokens, [100, 10, 11, 20, 21, 22, 12, 13, 14, 99]);
  const textOnly = { ...r, promptTokens: undefined };
  t.throws(() => recordTokens(textOnly), { instanceOf: TrajectoryError, message: /no prompt token ids/ });
  const untokenized = record({ turns: [{ ...turn(0, [], undefined, 0), tokens: undefined }] });
  t.throws(() => recordTokens(untokenized), { instanceOf: TrajectoryError, message: /turn 0 has no token ids/ });
});

test("a text-only record (a teacher's) is refused by RL, the batch with it, whatever ids it carries; SFT encodes its text", (t) => {
  const teacher = { id: 'openai:big@http://127.0.0.1:8001/v1', version: 'big', textOnly: true as const };
  // Even with ids in it (a teacher's own tokenizer's), the mark wins: they are not ours.
  const marked = record({ episodeId: 'e1', policy: teacher });
  const refusal = {
    instanceOf: TextOnlyRecordError,
    message: /episode e1 is a text-only record \(answered by openai:big@/,
  };
  t.throws(() => buildTrajectories([record(), marked]), refusal);
  t.throws(() => buildTrajectory(marked), refusal);
  t.throws(() => buildStepTrajectories(marked), refusal);
  t.throws(() => recordTokens(marked), refusal);
  t.deepEqual(recordTokens(marked, { encoding }).mask, recordTokens(record(), { encoding }).mask);
  // The mark is part of the record's schema; records without it (all earlier ones) load as before.
  const { checksum: _c, ...body } = marked;
  t.deepEqual(parseRecordLine(serializeRecord(sealRecord(body))).policy, teacher);
  const { checksum: _d, ...plain } = record();
  t.is(parseRecordLine(serializeRecord(sealRecord(plain))).policy.textOnly, undefined);
  const { checksum: _e, ...wrong } = record({ policy: { ...teacher, textOnly: false as never } });
  t.throws(() => parseRecordLine(serializeRecord(sealRecord(wrong))), { message: /record schema/ });
});
