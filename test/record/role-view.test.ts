import test from 'ava';
import { helpdesk } from '../../scenarios/helpdesk/index.ts';
import { scriptedCustomer } from '../../scenarios/helpdesk/users.ts';
import type { Message } from '../../src/core/types.ts';
import type { Policy } from '../../src/policy/policy.ts';
import { roleView } from '../../src/record/role-view.ts';
import { shownContexts } from '../../src/record/step-context.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';

// A role's view of an episode is what trains that role: each of its steps must be shown exactly what
// its policy was shown when it acted, and act exactly as it did.

const scenario = helpdesk as unknown as Scenario;

test("the user's view: each step shown exactly what the user's policy was, its actions as it wrote them", async (t) => {
  const seen = new Map<string, Message[][]>();
  const watching: Policy = {
    ...scriptedCustomer,
    act: async (request) => {
      const list = seen.get(request.episodeId) ?? [];
      list.push(request.messages.map((m) => ({ ...m })));
      seen.set(request.episodeId, list);
      return scriptedCustomer.act(request);
    },
  };
  const { records } = await rollout({
    scenario,
    policy: await referencePolicy(scenario, 'expert', 1),
    userPolicy: watching,
    split: 'test',
    episodes: 12,
    seed: 5,
    concurrency: 1,
  });
  let steps = 0;
  for (const record of records) {
    const view = roleView(record, 'user')!;
    const asked = seen.get(`${record.episodeId}/user`)!;
    const shown = shownContexts(view).map((c) => c.messages);
    t.deepEqual(shown, asked, record.episodeId);
    const written = record.turns.flatMap((turn) => turn.reply?.steps.map((s) => s.text) ?? []);
    t.deepEqual(
      view.turns.map((turn) => turn.text),
      written,
    );
    t.is(view.turns.at(-1)!.done, true);
    t.is(view.totalReward, record.outcome.reward);
    t.is(view.checksum, '');
    t.is(view.roles, undefined);
    steps += view.turns.length;
  }
  t.true(steps > 3 * records.length, `${steps} user steps`);
});

test("a role's reward is the scenario's for it (an opposed one here); a role that never spoke has no view", async (t) => {
  const { records } = await rollout({
    scenario,
    policy: await referencePolicy(scenario, 'expert', 1),
    split: 'test',
    episodes: 2,
    seed: 5,
  });
  const view = roleView(records[0]!, 'user', { reward: (r) => -r.outcome.reward })!;
  t.is(view.outcome.reward, -records[0]!.outcome.reward);
  t.is(view.totalReward, -records[0]!.outcome.reward);
  const silent = { ...records[0]!, turns: records[0]!.turns.map(({ reply: _reply, ...turn }) => turn) };
  t.is(roleView(silent, 'user'), null);
  const { roles: _roles, ...anonymous } = records[0]!;
  t.is(roleView(anonymous, 'user'), null);
});

test("with an encoding, a view carries each step's prompt ids: what RL scores", async (t) => {
  const { records } = await rollout({
    scenario,
    policy: await referencePolicy(scenario, 'expert', 1),
    split: 'test',
    episodes: 1,
    seed: 5,
  });
  // An encoding whose ids are the messages' characters: any change in what is shown changes them.
  const encode = (messages: readonly Message[]) =>
    [...messages.map((m) => `${m.role}:${m.content}|`).join('')].map((c) => c.codePointAt(0)!);
  const view = roleView(records[0]!, 'user', { encode })!;
  for (const context of shownContexts(view)) t.deepEqual(context.tokens, encode(context.messages));
});
