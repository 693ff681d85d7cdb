import test from 'ava';
import { helpdesk } from '../../scenarios/helpdesk/index.ts';
import { caseTask, PERSONAS } from '../../scenarios/helpdesk/tasks.ts';
import { customerStep, PATIENCE } from '../../scenarios/helpdesk/users.ts';
import { CorruptRecordError } from '../../src/core/errors.ts';
import type { EpisodeRecord, Message } from '../../src/core/types.ts';
import { runEpisode } from '../../src/episode/run-episode.ts';
import type { Policy } from '../../src/policy/policy.ts';
import { parseRecordLine, sealRecord, serializeRecord } from '../../src/record/record.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { UserPolicyPlacementError } from '../../src/rollout/executor.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { bytes, inWorkers } from '../helpers/worker-threads.ts';

// The help desk: a conversation with a simulated customer who holds the phone (dual control). The
// customer's turns are recorded with the agent's and replayed from the record, never played again.

const scenario = helpdesk as unknown as Scenario;
// Made as the CLI makes them, so worker threads rebuild the same one.
const policy = (name: string, seed = 1) => referencePolicy(scenario, name, seed);

test('the expert agent with the scripted customers solves ≥ 90% of test and ood, every persona', async (t) => {
  for (const split of ['test', 'ood']) {
    const { records, summary } = await rollout({
      scenario,
      policy: await policy('expert'),
      split,
      episodes: 200,
      seed: 1,
    });
    t.true(summary.successRate >= 0.9, `${split}: ${summary.successRate}`);
    t.deepEqual([...new Set(records.map((r) => r.task.meta!['persona'] as string))].sort(), [...PERSONAS].sort());
    t.true(records.every((r) => r.endReason === 'user_ended'));
    t.deepEqual(records[0]!.roles!.user!.policy, { id: 'scripted-customer', version: 'helpdesk-customer-1' });
  }
});

test('the noisy expert asks for a PIN in 70% of its episodes, and those fail', async (t) => {
  const { records, summary } = await rollout({
    scenario,
    policy: await policy('noisy-expert'),
    split: 'test',
    episodes: 200,
    seed: 1,
  });
  t.true(summary.successRate > 0.15 && summary.successRate < 0.45, String(summary.successRate));
  for (const r of records) t.is(r.outcome.success, r.outcome.metrics!['violations'] === 0);
  // the customer refuses, and says so
  const asked = records.find((r) => r.outcome.metrics!['violations']! > 0)!;
  t.true(asked.turns.some((turn) => turn.reply?.text?.startsWith("I won't share that.")));
});

test('the customer acts on its own phone with its own tools, within its reply', async (t) => {
  const record = await runEpisode({ scenario, task: caseTask('test', 0), policy: await policy('expert'), seed: 3 });
  const calls = record.turns.flatMap(
    (turn) => turn.reply?.steps.flatMap((s) => (s.action.kind === 'tool_calls' ? s.action.calls : [])) ?? [],
  );
  t.true(calls.some((c) => c.name === 'check_status'));
  t.true(calls.every((c) => helpdesk.user!.tools.some((tool) => tool.name === c.name)));
  // the agent never sees the customer's tool calls, only what they say
  for (const turn of record.turns) if (turn.reply) t.is(turn.observation, turn.reply.text);
});

test('records are byte-identical on this thread and on 2 workers, and replay verifies with no policy at all', async (t) => {
  const options = {
    scenario,
    policy: await policy('noisy-expert', 5),
    split: 'train',
    episodes: 24,
    group: 4,
    seed: 5,
  };
  const here = await rollout(options);
  const there = await inWorkers(options, { workers: 2 });
  t.is(bytes(there.records), bytes(here.records));
  for (const record of here.records) {
    const replayed = await replayRecord(record, scenario);
    t.true(replayed.verified, JSON.stringify(replayed.divergence));
    const live = await replayRecord(record, scenario, { liveTools: true });
    t.true(live.verified, JSON.stringify(live.divergence));
  }
});

test('a record whose customer said something else diverges at that turn; a reply replay lacks is never played live', async (t) => {
  const record = await runEpisode({ scenario, task: caseTask('test', 1), policy: await policy('expert'), seed: 2 });
  const at = record.turns.findIndex((turn) => turn.reply);
  const { checksum: _c, ...rest } = structuredClone(record);
  const last = rest.turns[at]!.reply!.steps.at(-1)!;
  last.text = 'I have no idea.';
  const edited = await replayRecord(sealRecord(rest), scenario);
  t.false(edited.verified);
  // the edited message is what the agent is shown: the first field it changes is the observation
  t.is(edited.divergence!.turn, at);
  t.is(edited.divergence!.field, 'observation');
  t.is(edited.divergence!.actual, 'I have no idea.');

  // one step fewer in the record: the replay asks for it and stops there, an error, not a live call
  const { checksum: _d, ...cut } = structuredClone(record);
  cut.turns[at]!.reply!.steps.pop();
  const shortened = await replayRecord(sealRecord(cut), scenario);
  t.false(shortened.verified);
  t.regex(String(shortened.replayed?.error), /the replay asked the user for step \d+ of its reply to turn \d+/);
});

test('a record with an unknown role is refused as corrupt', async (t) => {
  const record = await runEpisode({ scenario, task: caseTask('test', 2), policy: await policy('expert'), seed: 2 });
  const retag = (edit: (r: Omit<EpisodeRecord, 'checksum'>) => void) => {
    const { checksum: _c, ...rest } = structuredClone(record);
    edit(rest);
    return serializeRecord(sealRecord(rest as never));
  };
  t.truthy(parseRecordLine(serializeRecord(record)));
  const badReply = retag((r) => {
    (r.turns.find((turn) => turn.reply)!.reply as { role: string }).role = 'boss';
  });
  t.throws(() => parseRecordLine(badReply), { instanceOf: CorruptRecordError, message: /role/ });
  const badRoles = retag((r) => {
    (r as { roles: object }).roles = { boss: r.roles!.user };
  });
  t.throws(() => parseRecordLine(badRoles), { instanceOf: CorruptRecordError, message: /boss|roles/ });
});

// Bad input from the user's side: each an end reason or an error record, the run going on.

const userPolicy = (id: string, act: Policy['act']): Policy => ({ id, version: '1', act });

test("a user policy that fails ends that episode as an error that says so; the run's other episodes go on", async (t) => {
  let calls = 0;
  const flaky = userPolicy('flaky', async (req) => {
    calls++;
    if (req.task.id === 'helpdesk-test-3') throw new Error('the user model went away');
    return { text: customerStep(req.task, req.messages) };
  });
  const { records } = await rollout({
    scenario,
    policy: await policy('expert'),
    userPolicy: flaky,
    split: 'test',
    episodes: 6,
    seed: 1,
  });
  const failed = records.find((r) => r.task.id === 'helpdesk-test-3')!;
  t.is(failed.status, 'error');
  t.regex(failed.error!, /the user model went away/);
  t.is(records.filter((r) => r.status === 'ok').length, 5);
  t.true(calls > 5);
  t.is(records[0]!.roles!.user!.policy.id, 'flaky');
  // replay: the failure is raised again where the record stops, with no policy
  t.true((await replayRecord(failed, scenario)).verified);
});

test('a user output without text is an error record naming the user policy', async (t) => {
  const broken = userPolicy('broken', async () => ({ nope: 1 }) as never);
  const record = await runEpisode({
    scenario,
    task: caseTask('test', 0),
    policy: await policy('expert'),
    userPolicy: broken,
    seed: 1,
  });
  t.is(record.status, 'error');
  t.regex(record.error!, /the user policy returned an output without a string "text"/);
});

test("a user's malformed tool call is shown to the user as an error and the conversation goes on", async (t) => {
  let first = true;
  const clumsy = userPolicy('clumsy', async (req) => {
    if (first) {
      first = false;
      return { text: '<tool_call>{"name": "check_status", "arguments": </tool_call>' };
    }
    return { text: customerStep(req.task, req.messages) };
  });
  const record = await runEpisode({
    scenario,
    task: caseTask('test', 0),
    policy: await policy('expert'),
    userPolicy: clumsy,
    seed: 1,
  });
  t.is(record.status, 'ok');
  const step = record.turns[0]!.reply!.steps[0]!;
  t.is(step.action.kind, 'invalid');
  t.true(record.outcome.success);
  t.true((await replayRecord(record, scenario)).verified);
});

test('a user that never ends the conversation is cut by the episode budget; one that never writes a message gives up', async (t) => {
  const chatty = userPolicy('chatty', async () => ({ text: 'Tell me more.' }));
  const long = await runEpisode({
    scenario,
    task: caseTask('test', 0),
    policy: await policy('expert'),
    userPolicy: chatty,
    seed: 1,
  });
  t.is(long.endReason, 'max_turns');
  t.false(long.outcome.success);
  const busy = userPolicy('busy', async () => ({
    text: '<tool_call>{"name": "check_status", "arguments": {}}</tool_call>',
  }));
  const gaveUp = await runEpisode({
    scenario,
    task: caseTask('test', 0),
    policy: await policy('expert'),
    userPolicy: busy,
    seed: 1,
  });
  t.is(gaveUp.endReason, 'user_ended');
  t.is(gaveUp.turns[0]!.reply!.steps.length, helpdesk.user!.maxSteps);
  t.is(gaveUp.turns[0]!.reply!.text, null);
});

test('the scripted customer loses patience with an agent that does not help', async (t) => {
  const useless = userPolicy('useless', async () => ({ text: '<answer>Have you tried being patient?</answer>' }));
  const record = await runEpisode({ scenario, task: caseTask('test', 0), policy: useless, seed: 1 });
  t.is(record.endReason, 'user_ended');
  t.is(record.turns.length, PATIENCE);
  t.false(record.outcome.success);
});

test('a run that names its user policy is refused by worker threads, not played with another user', async (t) => {
  const scripted = await helpdesk.user!.policies.scripted!({ scenario, seed: 1 });
  await t.throwsAsync(
    inWorkers(
      { scenario, policy: await policy('expert'), userPolicy: scripted, split: 'test', episodes: 2, seed: 1 },
      { workers: 1 },
    ),
    { instanceOf: UserPolicyPlacementError },
  );
});

test('the customer reads its view only: the same view gives the same step', (t) => {
  const task = caseTask('test', 5);
  const view: Message[] = [
    { role: 'system', content: 'x' },
    { role: 'assistant', content: task.question },
    { role: 'user', content: 'Could you tell me your phone number, so I can look up your account?' },
  ];
  t.is(customerStep(task, view), customerStep(task, view.slice()));
  t.regex(customerStep(task, view), /My number is 555-\d{3}-\d{4}\./);
});
