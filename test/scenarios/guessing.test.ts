import test from 'ava';
import guessingScenario from '../../scenarios/guessing/index.ts';
import { metaOf, roundTask, taskOfId } from '../../scenarios/guessing/tasks.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { roleView } from '../../src/record/role-view.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';

// The guessing game: a guesser (the agent) and a describer (the user) who must agree on what a
// one-word clue means. Its rules are what make co-training the two roles worth comparing.

const define = guessingScenario as unknown as (options: { [key: string]: string }) => Scenario;
const scenario = define({});
const user = (name: string) => scenario.user!.policies[name]!({ scenario, seed: 1 });

test('every round has one attribute of the secret that no other item has, and one that another shares; ood secrets are new pairs', (t) => {
  const pairs = (split: string) => new Set(Array.from({ length: 200 }, (_, i) => metaOf(roundTask(split, i)).secret));
  const ood = pairs('ood');
  for (const split of ['train', 'test'])
    t.true(
      [...pairs(split)].every((p) => !ood.has(p)),
      split,
    );
  for (const split of ['train', 'test', 'ood']) {
    for (let i = 0; i < 200; i++) {
      const { secret, items, unique } = metaOf(roundTask(split, i));
      t.is(items.length, 4);
      t.is(new Set(items).size, items.length);
      t.true(items.includes(secret));
      const [color, shape] = secret.split(' ');
      const others = items.filter((it) => it !== secret).map((it) => it.split(' '));
      const sharesColor = others.some(([c]) => c === color);
      const sharesShape = others.some(([, s]) => s === shape);
      t.is(sharesColor, unique === 'shape', `${split} ${i}`);
      t.is(sharesShape, unique === 'color', `${split} ${i}`);
    }
  }
});

test('the expert guesser with the scripted describer wins every round; the noisy describer loses about a quarter', async (t) => {
  const expert = await referencePolicy(scenario, 'expert', 1);
  for (const split of ['test', 'ood']) {
    const { records, summary } = await rollout({ scenario, policy: expert, split, episodes: 200, seed: 1 });
    t.is(summary.successRate, 1, split);
    t.true(records.every((r) => r.endReason === 'done' && r.turns.length === 2));
  }
  const noisy = await rollout({
    scenario,
    policy: expert,
    userPolicy: await user('noisy'),
    split: 'test',
    episodes: 200,
    seed: 1,
  });
  // Half the clues fit two items (or more); the expert takes the first that fits.
  t.true(noisy.summary.successRate > 0.6 && noisy.summary.successRate < 0.9, String(noisy.summary.successRate));
});

test('a round replays from its record alone, the describer included', async (t) => {
  const { records } = await rollout({
    scenario,
    policy: await referencePolicy(scenario, 'expert', 2),
    userPolicy: await user('noisy'),
    split: 'dev',
    episodes: 8,
    seed: 2,
  });
  for (const r of records) {
    const replayed = await replayRecord(r as EpisodeRecord, scenario);
    t.true(replayed.verified, JSON.stringify(replayed.divergence));
  }
});

test("the describer's view of a round: its instructions, the question it heard, its clue", async (t) => {
  const { records } = await rollout({
    scenario,
    policy: await referencePolicy(scenario, 'expert', 1),
    split: 'test',
    episodes: 1,
    seed: 1,
  });
  const view = roleView(records[0]!, 'user')!;
  const { secret } = metaOf(records[0]!.task);
  t.is(view.episodeId, `${records[0]!.episodeId}/user`);
  t.deepEqual(view.policy, { id: 'scripted', version: 'guessing-describer-1' });
  t.is(view.prompt.length, 2);
  t.true(view.prompt[0]!.content.includes(`Secret: ${secret}.`));
  t.deepEqual(view.prompt[1], { content: 'Which one is it?', role: 'user' });
  t.is(view.turns.length, 1);
  t.true(secret.split(' ').includes(view.turns[0]!.text));
  t.is(view.outcome.reward, 1);
});

test('bad options and ids are refused', (t) => {
  t.throws(() => define({ colour: 'red' }), { message: /unknown option colour; valid: noisyRate/ });
  t.throws(() => define({ noisyRate: '2' }), { message: /noisyRate must be in \[0, 1\]/ });
  t.is(define({ noisyRate: '0' }).options['noisyRate'], '0');
  t.deepEqual(taskOfId('guessing-test-3'), roundTask('test', 3));
  t.is(taskOfId('guessing-test-200'), undefined);
  t.is(taskOfId('guessing-nope-1'), undefined);
});
