import Database from 'better-sqlite3';
import { createActor, setup } from 'xstate';
import { z } from 'zod';
import {
  canonicalJson, createRng, deriveSeed, formatInvalidAction, toolsSystemPrompt, defineScenario, tool,
  commitEffect, syncEffects, withoutEffects, type EffectLog, // the effects log: what makes replay exact
  type Json, type Task, type ToolEnv, type Policy, type ToolContext,
} from 'agent-r1-ts';

// 1. The world machine: an order's lifecycle. The rule "only pending orders can be cancelled" lives here.
export const orderMachine = setup({ types: { events: {} as { type: 'SHIP' } | { type: 'CANCEL' } } }).createMachine({
  id: 'order',
  initial: 'pending',
  states: { pending: { on: { SHIP: 'shipped', CANCEL: 'cancelled' } }, shipped: {}, cancelled: { type: 'final' } },
});
// 2. Per-episode state: a private in-memory database, and the effects log that makes replay exact.
const ORDERS = [['A1', 'pending'], ['A2', 'shipped'], ['A3', 'pending'], ['A4', 'shipped']] as const;
interface State extends EffectLog { db: Database.Database }
type Ctx = ToolContext<State>;
const statusOf = (db: Database.Database, id: string) =>
  (db.prepare('SELECT status FROM orders WHERE id = ?').get(id) as { status: string } | undefined)?.status;
const cancel = (state: State, e: { id: string }) => void state.db.prepare("UPDATE orders SET status = 'cancelled' WHERE id = ?").run(e.id);
// 3. Tools: zod parameters; a forbidden write is refused (nothing written), and the refusal is the result.
const getOrder = tool({
  name: 'get_order',
  description: 'Look up an order by id.',
  parameters: z.object({ id: z.string() }),
  execute: ({ id }, ctx: Ctx) => ({ id, status: statusOf(ctx.state.db, id) ?? 'unknown' }),
});
const cancelOrder = tool({
  name: 'cancel_order',
  description: 'Cancel a pending order.',
  parameters: z.object({ id: z.string() }),
  execute: ({ id }, ctx: Ctx): Json => {
    const status = statusOf(ctx.state.db, id);
    if (!status) return { error: `no order ${id}` };
    const order = orderMachine.resolveState({ value: status, context: {} });
    if (!order.can({ type: 'CANCEL' })) return { refused: true, message: `order ${id} is ${status}: only pending orders can be cancelled` };
    return { id, status: 'cancelled', effects: [commitEffect(ctx.state, { id }, (e) => cancel(ctx.state, e))] };
  },
});
// 4. The ToolEnv: observation, process reward (a refusal costs 0.2), done; outcome = the final database state.
const env: ToolEnv<Task, State> = {
  init: () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)');
    for (const [id, status] of ORDERS) db.prepare('INSERT INTO orders VALUES (?, ?)').run(id, status);
    return { db, applied: 0 };
  },
  dispose: (state) => void state.db.close(),
  prompt: (task, tools) => [
    { role: 'system', content: toolsSystemPrompt('You are a support agent. Only pending orders can be cancelled.', tools) },
    { role: 'user', content: task.question },
  ],
  step: ({ state, action, results }) => {
    syncEffects(state, results, (e: { id: string }) => cancel(state, e)); // replay: re-apply the recorded writes
    if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
    if (action.kind === 'invalid') return { observation: formatInvalidAction(action), reward: -0.1, done: false };
    const refused = results.filter((r) => (r.data as { refused?: boolean } | undefined)?.refused === true).length;
    const shown = results.map((r) => (r.ok ? canonicalJson(withoutEffects(r.data) ?? null) : `Error: ${r.content}`));
    return { observation: shown.join('\n'), reward: -0.2 * refused, done: false, info: { refused } }; // no effects log
  },
  outcome: ({ task, state }) => {
    const success = statusOf(state.db, String(task.meta!['order'])) === task.meta!['expected'];
    return { reward: success ? 1 : 0, success };
  },
};
// 5. Seeded tasks with the expected final state, and a reference policy that reads before it writes.
const tasks = ({ split, seed, count }: { split: string; seed: number; count: number }): Task[] => {
  const rng = createRng(deriveSeed('tiny-desk', split, seed));
  return Array.from({ length: count }, (_, i) => {
    const [order, status] = rng.pick(ORDERS);
    const expected = createActor(orderMachine).start();
    if (status === 'shipped') expected.send({ type: 'SHIP' });
    expected.send({ type: 'CANCEL' }); // what a correct agent leaves behind
    return { id: `${split}-${seed}-${i}`, split, question: `Please cancel order ${order}.`, meta: { order, expected: String(expected.getSnapshot().value) } };
  });
};
const call = (name: string, id: string) => ({ text: `<tool_call>${JSON.stringify({ name, arguments: { id } })}</tool_call>` });
const expert: Policy = {
  id: 'expert',
  version: '1',
  act: async ({ task, messages }) => {
    const seen = messages.filter((m) => m.role === 'tool').map((m) => JSON.parse(m.content));
    const id = String(task.meta!['order']);
    if (seen.length === 0) return call('get_order', id);
    if (seen.length === 1 && seen[0].status === 'pending') return call('cancel_order', id);
    return { text: `<answer>${seen.at(-1).status === 'cancelled' ? 'Cancelled.' : 'Sorry, it has shipped already.'}</answer>` };
  },
};

export default defineScenario({
  id: 'tiny-desk', version: '1', description: 'Cancel orders on a SQLite table, if the order lifecycle allows it.',
  splits: ['train', 'test'], options: {}, tasks, tools: [getOrder, cancelOrder], env,
  policies: { expert: () => expert }, worldMachine: orderMachine, episode: { maxTurns: 4 },
});
