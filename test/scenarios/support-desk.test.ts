import { createHash } from 'node:crypto';
import test from 'ava';
import Database from 'better-sqlite3';
import { createActor } from 'xstate';
import { createRng } from '../../src/core/rng.ts';
import type { EpisodeRecord, Json, Message, Task } from '../../src/core/types.ts';
import type { Policy } from '../../src/policy/policy.ts';
import { parseRecordLine, serializeRecord } from '../../src/record/record.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { runEpisode } from '../../src/episode/run-episode.ts';
import { ToolRunner } from '../../src/tools/runner.ts';
import { supportDesk } from '../../scenarios/support-desk/index.ts';
import {
  baseImage,
  cancelOrder,
  changeAddress,
  digestDb,
  dumpDb,
  getOrder,
  MAX_CUSTOMERS,
  openCopy,
} from '../../scenarios/support-desk/db.ts';
import { canonicalJson } from '../../src/core/canonical-json.ts';
import { VIOLATION_PENALTY } from '../../scenarios/support-desk/env.ts';
import { orderMachine } from '../../scenarios/support-desk/order-machine.ts';
import { expertAction } from '../../scenarios/support-desk/policies.ts';
import { generateTasks } from '../../scenarios/support-desk/tasks.ts';
import { builtinScenarios } from '../../scenarios/index.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { toOpenAITool } from '../../src/tools/tool.ts';
import { createDeskState, disposeDeskState, type DeskState } from '../../scenarios/support-desk/world.ts';

const scenario = supportDesk;
// rollout() hands records on through onRecord; always pass one (see the report on rollout.ts).
const sink = () => {};

function runner() {
  return new ToolRunner(scenario.tools, { timeoutMs: 1000, maxOutputChars: 4096 });
}

async function callTool(state: DeskState, name: string, args: { [k: string]: Json }, task?: Task) {
  return runner().run(
    { name, arguments: args },
    { task: task ?? ({ id: 't', split: 'dev', question: '' } as Task), rng: createRng(1), state },
  );
}

function firstTask(type: string, split = 'dev'): Task {
  const task = generateTasks(split, 1, 200).find((t) => t.type === type);
  if (!task) throw new Error(`no ${type} task`);
  return task;
}

test('the order machine allows cancelling only before shipping and returns only within 30 days', (t) => {
  const actor = createActor(orderMachine, { input: {} }).start();
  t.true(actor.getSnapshot().can({ type: 'CANCEL' }));
  t.true(actor.getSnapshot().can({ type: 'CHANGE_ADDRESS' }));
  actor.send({ type: 'PROCESS' });
  actor.send({ type: 'SHIP' });
  t.is(actor.getSnapshot().value, 'shipped');
  t.false(actor.getSnapshot().can({ type: 'CANCEL' }));
  t.false(actor.getSnapshot().can({ type: 'CHANGE_ADDRESS' }));
  actor.send({ type: 'DELIVER', day: 100 });
  t.true(actor.getSnapshot().can({ type: 'RETURN', today: 130 }));
  t.false(actor.getSnapshot().can({ type: 'RETURN', today: 131 }));
  actor.send({ type: 'RETURN', today: 131 });
  t.is(actor.getSnapshot().value, 'delivered', 'a late return does not happen');
  actor.send({ type: 'RETURN', today: 110 });
  t.is(actor.getSnapshot().value, 'returned');
  t.is(actor.getSnapshot().status, 'done');
});

test('the database is generated deterministically and each copy is private', (t) => {
  const a = openCopy();
  const b = openCopy();
  t.is(digestDb(a), digestDb(b));
  const counts = a.prepare('SELECT status, COUNT(*) AS n FROM orders GROUP BY status').all() as Array<{
    status: string;
    n: number;
  }>;
  t.deepEqual(counts.map((c) => c.status).sort(), [
    'cancelled',
    'delivered',
    'pending',
    'processed',
    'returned',
    'shipped',
  ]);
  a.prepare("UPDATE orders SET status = 'cancelled'").run();
  t.not(digestDb(a), digestDb(b));
  t.is(getOrder(a, '#W1000')!.status, 'cancelled');
  t.true((b.prepare("SELECT COUNT(*) AS n FROM orders WHERE status != 'cancelled'").get() as { n: number }).n > 0);
  a.close();
  b.close();
});

test('the digest reads only written tables, and equals the whole dump’s digest after any write', (t) => {
  const whole = (db: ReturnType<typeof openCopy>) =>
    createHash('sha256')
      .update(canonicalJson(dumpDb(db)))
      .digest('hex');
  const base = openCopy(200);
  t.is(digestDb(base), whole(base));
  const writes: Array<[string, (db: ReturnType<typeof openCopy>) => unknown]> = [
    ['nothing', () => {}],
    ['a cancel (orders, refunds)', (db) => cancelOrder(db, '#W1000', 'no longer needed')],
    ['an address (orders)', (db) => changeAddress(db, '#W1001', { street: '1 Elm St', city: 'Oslo', zip: '01234' })],
    ['a customer edited in SQL', (db) => db.prepare("UPDATE customers SET email = 'x@y.z' WHERE rowid = 1").run()],
    ['a payment method deleted', (db) => db.prepare('DELETE FROM payment_methods WHERE rowid = 1').run()],
    [
      'an item inserted and deleted',
      (db) =>
        db.exec(
          "INSERT INTO order_items SELECT 'I99999', order_id, product, price_cents, returned FROM order_items LIMIT 1; DELETE FROM order_items WHERE id = 'I99999';",
        ),
    ],
  ];
  for (const [what, write] of writes) {
    const db = openCopy(200);
    db.pragma('foreign_keys = OFF');
    write(db);
    t.is(digestDb(db), whole(db), what);
    db.close();
  }
  // A database not opened as a copy of a base is read whole.
  const bare = new Database(baseImage(200));
  bare.prepare("UPDATE orders SET status = 'cancelled'").run();
  t.is(digestDb(bare), whole(bare));
  t.not(digestDb(bare), digestDb(base));
  bare.close();
  base.close();
});

test('tasks are seeded, split by customer, and name the expected final state', (t) => {
  const one = generateTasks('train', 5, 40);
  t.deepEqual(generateTasks('train', 5, 40), one);
  t.notDeepEqual(
    generateTasks('train', 6, 40).map((x) => x.id),
    one.map((x) => x.id),
  );
  const customers = (split: string) =>
    new Set(
      generateTasks(split, 1, 100)
        .map((x) => (x.meta!['expected'] as any)?.order?.customer_id)
        .filter(Boolean),
    );
  const train = customers('train');
  for (const c of customers('test')) t.false(train.has(c), `customer ${c} in both train and test`);
  const types = new Set(generateTasks('dev', 1, 200).map((x) => x.type));
  t.deepEqual([...types].sort(), [
    'address',
    'address_refused',
    'cancel',
    'cancel_refused',
    'return',
    'return_refused',
  ]);
  t.regex(String(one[0]!.meta!['expectedDigest']), /^[0-9a-f]{64}$/);
  t.throws(() => generateTasks('nope', 1, 1), { message: /no split "nope"; valid: train, dev, test/ });
  t.throws(() => generateTasks('dev', 1, -1), { message: /non-negative integer/ });
});

test("writes before identification, and on another customer's order, are refused", async (t) => {
  const state = createDeskState();
  try {
    const before = digestDb(state.db);
    const early = await callTool(state, 'cancel_order', { order_id: '#W1000', reason: 'other' });
    t.like(early.data as object, { refused: true, rule: 'identify_first' });
    const who = await callTool(state, 'find_customer_by_email', { email: 'nobody@example.com' });
    t.like(who.data as object, { found: false });
    const task = firstTask('cancel');
    const req = task.meta!['request'] as any;
    const owner = getOrder(state.db, req.order_id)!.customer_id;
    const other = state.db.prepare('SELECT * FROM customers WHERE id != ? LIMIT 1').get(owner) as any;
    const found = await callTool(state, 'find_customer_by_name_zip', {
      first_name: other.first_name,
      last_name: other.last_name,
      zip: other.zip,
    });
    t.like(found.data as object, { found: true, customer_id: other.id });
    const foreign = await callTool(state, 'cancel_order', { order_id: req.order_id, reason: 'other' });
    t.like(foreign.data as object, { refused: true, rule: 'own_orders_only' });
    const details = await callTool(state, 'get_customer_details', { customer_id: owner });
    t.like(details.data as object, { refused: true, rule: 'own_orders_only' });
    t.is(digestDb(state.db), before, 'nothing was written');
  } finally {
    disposeDeskState(state);
  }
});

test('malformed tool arguments are rejected with a clear error and nothing is written', async (t) => {
  const state = createDeskState();
  try {
    const before = digestDb(state.db);
    const zip = await callTool(state, 'find_customer_by_name_zip', { first_name: 'A', last_name: 'B', zip: '12' });
    t.false(zip.ok);
    t.is(zip.error?.kind, 'bad_arguments');
    t.regex(zip.content, /5-digit zip/);
    const reason = await callTool(state, 'cancel_order', { order_id: '#W1000', reason: 'because' });
    t.is(reason.error?.kind, 'bad_arguments');
    const items = await callTool(state, 'return_items', { order_id: '#W1000', item_ids: [] });
    t.is(items.error?.kind, 'bad_arguments');
    t.is(digestDb(state.db), before);
  } finally {
    disposeDeskState(state);
  }
});

test('the expert solves at least 99% of 240 dev requests through rollout()', async (t) => {
  const policy = await scenario.policies['expert']!({ scenario, seed: 1 });
  const { records, summary } = await rollout({
    scenario,
    policy,
    split: 'dev',
    episodes: 240,
    seed: 11,
    onRecord: sink,
  });
  t.is(records.length, 240);
  t.true(summary.successRate >= 0.99, `expert success ${summary.successRate}`);
  t.is((summary as any).violationsPerEpisode, 0);
  t.is((summary as any).identifiedFirstRate, 1);
  t.log(
    `expert dev success ${summary.successRate}, mean reward ${summary.meanReward}, mean turns ${summary.meanTurns}`,
  );
});

test('a rule violation is refused, penalized and recorded, and the database is unchanged', async (t) => {
  const task = firstTask('cancel_refused');
  const policy = await scenario.policies['reckless']!({ scenario, seed: 1 });
  const record = await runEpisode({ scenario, task, policy, seed: 3 });
  const turn = record.turns[0]!;
  t.like(turn.results[0]!.data as object, { refused: true, rule: 'identify_first' });
  t.deepEqual(turn.info?.['violations'], [{ tool: 'cancel_order', rule: 'identify_first' }]);
  t.is(turn.reward, -VIOLATION_PENALTY);
  t.regex(turn.observation!, /Refused \(identify_first\)/);
  t.is(record.outcome.metrics?.['violations'], 1);
  t.true(record.outcome.success, 'the forbidden write did not happen, so the database is as expected');
  t.is(record.totalReward, 1 - VIOLATION_PENALTY);

  // Identified, but the order has shipped: the world machine says no.
  const state = createDeskState();
  try {
    const req = task.meta!['request'] as any;
    await callTool(
      state,
      Object.keys(req.identify).includes('email') ? 'find_customer_by_email' : 'find_customer_by_name_zip',
      req.identify,
    );
    const refused = await callTool(state, 'cancel_order', { order_id: req.order_id, reason: 'other' });
    t.like(refused.data as object, { refused: true, rule: 'cancel_before_shipping' });
  } finally {
    disposeDeskState(state);
  }
});

test('the identify-first process reward is paid only when the customer is identified before acting', async (t) => {
  const task = firstTask('cancel');
  const expert = await runEpisode({
    scenario,
    task,
    policy: await scenario.policies['expert']!({ scenario, seed: 1 }),
    seed: 1,
  });
  t.is(expert.turns[0]!.info?.['identified_first'], true);
  t.true(expert.turns[0]!.reward > 0);
  t.is(expert.outcome.metrics?.['identified_first'], 1);
  const reckless = await runEpisode({
    scenario,
    task,
    policy: await scenario.policies['reckless']!({ scenario, seed: 1 }),
    seed: 1,
  });
  t.is(reckless.outcome.metrics?.['identified_first'], 0);
  t.false(reckless.outcome.success);
});

/**
 * Two episodes on the same order, interleaved: each writes, waits for the other to write, then
 * reads the order again. Each must see its own write and not the other's.
 */
test('two concurrent episodes writing the same order see only their own writes', async (t) => {
  const cancel = generateTasks('dev', 1, 300).find((x) => x.type === 'cancel')!;
  const orderId = (cancel.meta!['request'] as any).order_id;
  const address = generateTasks('dev', 1, 300).find(
    (x) => x.type === 'address' && (x.meta!['request'] as any).order_id === orderId,
  )!;
  t.truthy(address, 'an address task on the same order');
  let release!: () => void;
  const bothWrote = new Promise<void>((r) => (release = r));
  let writes = 0;
  const interleaved: Policy = {
    id: 'interleaved',
    version: '1',
    act: async ({ task, messages }) => {
      const rereads = messages.filter(
        (m: Message) => m.role === 'tool' && m.content.startsWith('[get_order_details]'),
      ).length;
      const wrote = messages.some(
        (m: Message) => m.role === 'tool' && /^\[(cancel_order|change_shipping_address)\]/.test(m.content),
      );
      if (wrote && rereads === 1) {
        if (++writes === 2) release();
        await bothWrote;
        return {
          text: `<tool_call>${JSON.stringify({ name: 'get_order_details', arguments: { order_id: orderId } })}</tool_call>`,
        };
      }
      if (rereads === 2) return { text: '<answer>done</answer>' };
      return expertAction(task, messages);
    },
  };
  const { records } = await rollout({
    scenario,
    policy: interleaved,
    split: 'dev',
    episodes: 2,
    seed: 1,
    concurrency: 2,
    tasks: [cancel, address],
    onRecord: sink,
  });
  const [a, b] = records as [EpisodeRecord, EpisodeRecord];
  const lastOrder = (r: EpisodeRecord) =>
    JSON.parse(r.turns.at(-2)!.observation!.replace(/^\[get_order_details\] /, ''));
  const newAddress = (address.meta!['request'] as any).address;
  t.is(lastOrder(a).status, 'cancelled');
  t.notDeepEqual(lastOrder(a).shipping_address, newAddress, 'the cancelling episode does not see the address change');
  t.not(lastOrder(b).status, 'cancelled', 'the address episode does not see the cancellation');
  t.deepEqual(lastOrder(b).shipping_address, newAddress);
  t.true(a.outcome.success);
  t.true(b.outcome.success);
});

test('support-desk records replay exactly, with the writes re-applied from the record', async (t) => {
  const policy = await scenario.policies['expert']!({ scenario, seed: 1 });
  const { records } = await rollout({ scenario, policy, split: 'test', episodes: 30, seed: 5, onRecord: sink });
  const reckless = await scenario.policies['reckless']!({ scenario, seed: 1 });
  const more = await rollout({ scenario, policy: reckless, split: 'test', episodes: 10, seed: 5, onRecord: sink });
  for (const live of [...records, ...more.records]) {
    // Through the JSONL line format, as `agent-r1 replay FILE` reads it (canonical JSON: keys sorted).
    const record = parseRecordLine(serializeRecord(live));
    const result = await replayRecord(record, scenario);
    t.true(result.verified, `${record.episodeId}: ${JSON.stringify(result.divergence)}`);
  }
  // A tampered write (a different order cancelled in the record) is caught by the outcome.
  const write = records.find((r) => r.task.type === 'cancel')!;
  const tampered = structuredClone(write);
  const turn = tampered.turns.find((x) => x.results[0]?.name === 'cancel_order')!;
  (turn.results[0]!.data as any).effects[0].order_id = '#W1000';
  const result = await replayRecord(tampered, scenario);
  t.false(result.verified);
});

test('prompt=terse: the policy in a line and every tool by its signature, about half the compact prompt; noisyKind=no-identify errs only that way', async (t) => {
  const load = (options: { [key: string]: string }) => loadScenario('support-desk', builtinScenarios, options);
  const [terse, compact] = await Promise.all([load({ prompt: 'terse' }), load({ prompt: 'compact' })]);
  const task = generateTasks('dev', 1, 1)[0]!;
  const system = (s: typeof terse) => s.env.prompt(task, s.tools.map(toOpenAITool))[0]!.content;
  for (const tool of scenario.tools) t.true(system(terse).includes(`${tool.name}(`), tool.name);
  t.regex(system(terse), /Identify the customer first/);
  t.true(system(terse).length * 1.8 < system(compact).length, `${system(terse).length} vs ${system(compact).length}`);

  const noisy = await load({ prompt: 'terse', noisySkip: '0.6', noisyKind: 'no-identify' });
  const policy = await noisy.policies['noisy-expert']!({ scenario: noisy, seed: 3 });
  const { records } = await rollout({ scenario: noisy, policy, split: 'dev', episodes: 60, seed: 2 });
  const identified = records.filter((r) => r.turns[0]!.text.includes('find_customer'));
  // Every erring episode skips identification, so every one that identifies is an expert episode.
  t.true(identified.length > 10 && identified.length < 40, `${identified.length} of 60 identify`);
  t.true(identified.every((r) => r.outcome.success));
  t.true(records.some((r) => !r.outcome.success));
});

test('customers=N: a larger world keeps the first customers, has more of each split, and plays in its own world', async (t) => {
  const load = (options: { [key: string]: string }) => loadScenario('support-desk', builtinScenarios, options);
  for (const bad of ['abc', '4', '321', '2.5', ''])
    await t.throwsAsync(load({ customers: bad }), { message: /customers must be an integer from 5 to 320/ });
  // The largest world: one customer per first + last name pair (its generation once looped forever
  // past the last pair).
  const largest = openCopy(MAX_CUSTOMERS);
  const names = largest.prepare("SELECT COUNT(DISTINCT first_name || ' ' || last_name) AS n FROM customers").get();
  t.deepEqual(names, { n: MAX_CUSTOMERS });
  largest.close();
  const small = openCopy();
  const large = openCopy(150);
  const rows = (db: typeof small, where: string) => db.prepare(`SELECT * FROM customers ${where} ORDER BY id`).all();
  t.deepEqual(rows(large, "WHERE id <= 'C060'"), rows(small, ''));
  t.is((large.prepare('SELECT COUNT(*) AS n FROM customers').get() as { n: number }).n, 150);
  small.close();
  large.close();

  const scenario = await load({ customers: '150' });
  const tasks = await scenario.tasks({ split: 'dev', seed: 1, count: 400 });
  const distinct = new Set(tasks.map((x) => x.id.replace(/-r\d+-s\d+$/, '')));
  t.true(distinct.size > 2 * new Set(generateTasks('dev', 1, 400).map((x) => x.id.replace(/-r\d+-s\d+$/, ''))).size);
  // Requests of customers only the larger world has, solved by the expert in that world.
  const newcomers = tasks.filter((x) => Number(String((x.meta!['request'] as any).order_id).slice(2)) > 1300);
  t.true(newcomers.length > 20);
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const { records } = await rollout({ scenario, policy, split: 'dev', episodes: 40, seed: 1, onRecord: sink });
  t.true(records.every((r) => r.outcome.success));
  t.true(records.some((r) => Number(/#W(\d+)/.exec(r.task.question)![1]) > 1300));
});
