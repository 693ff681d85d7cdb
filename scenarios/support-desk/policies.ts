import { createRng, deriveSeed, type Json, type Message, type Task, type Policy } from 'agent-r1-ts';
import { RETURN_WINDOW_DAYS } from './order-machine.ts';
import type { DeskRequest } from './tasks.ts';

/**
 * Reference policies. The expert reads only what the customer said (`task.meta.request`, the facts
 * of the question text) and what the tools answered; it never looks at the expected state.
 */

const call = (name: string, args: { [key: string]: Json }) => ({
  text: `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`,
});
const answer = (text: string) => ({ text: `<answer>${text}</answer>` });

const WRITES = ['cancel_order', 'return_items', 'change_shipping_address'];

/** Tool results seen so far, parsed from the observations (`[tool] {json}` lines). */
export function seenResults(messages: readonly Message[]): Array<{ name: string; data: { [key: string]: Json } }> {
  const out: Array<{ name: string; data: { [key: string]: Json } }> = [];
  // Tool results, and the state card (a user message of the same lines) where the step is shown one.
  for (const m of messages) {
    if (m.role !== 'tool' && !m.content.startsWith('Known so far:')) continue;
    for (const line of m.content.split('\n')) {
      const match = /^\[([a-z_]+)\] (\{.*\})$/.exec(line);
      if (!match) continue;
      try {
        out.push({ name: match[1]!, data: JSON.parse(match[2]!) });
      } catch {
        // Not JSON: an error line, nothing to learn from it.
      }
    }
  }
  return out;
}

function requestOf(task: Task): DeskRequest {
  const req = task.meta?.['request'];
  if (!req || typeof req !== 'object') throw new Error(`task ${task.id} has no meta.request`);
  return req as unknown as DeskRequest;
}

/** Identify, read the order, apply the store's policy, act or decline, answer. */
export function expertAction(task: Task, messages: readonly Message[]): { text: string } {
  const req = requestOf(task);
  const seen = seenResults(messages);
  const identify = seen.find((r) => r.name.startsWith('find_customer'));
  if (!identify) {
    return 'email' in req.identify
      ? call('find_customer_by_email', { email: req.identify.email })
      : call('find_customer_by_name_zip', { ...req.identify });
  }
  if (identify.data['found'] !== true) return answer('Sorry, I could not find your account with those details.');
  const order = seen.find((r) => r.name === 'get_order_details' && r.data['order_id'] === req.order_id)?.data;
  if (!order) return call('get_order_details', { order_id: req.order_id });
  const write = seen.find((r) => WRITES.includes(r.name));
  if (write) {
    return write.data['refused'] === true || write.data['error'] !== undefined
      ? answer(`Sorry, that could not be done: ${String(write.data['message'] ?? write.data['error'])}`)
      : answer(`Done: your request for order ${req.order_id} has been handled.`);
  }
  const status = String(order['status']);
  const early = status === 'pending' || status === 'processed';
  switch (req.kind) {
    case 'cancel':
      return early
        ? call('cancel_order', { order_id: req.order_id, reason: req.reason })
        : answer(`Order ${req.order_id} is already ${status}, so it can no longer be cancelled.`);
    case 'address':
      return early
        ? call('change_shipping_address', { order_id: req.order_id, ...req.address! })
        : answer(`Order ${req.order_id} is already ${status}, so its address can no longer be changed.`);
    case 'return': {
      const age = Number(order['days_since_delivery']);
      if (status !== 'delivered')
        return answer(`Order ${req.order_id} is ${status}; only delivered orders can be returned.`);
      if (!(age <= RETURN_WINDOW_DAYS)) {
        return answer(
          `Order ${req.order_id} was delivered ${age} days ago, past the ${RETURN_WINDOW_DAYS}-day return window.`,
        );
      }
      const items = (order['items'] as Array<{ item_id: string; product: string; returned: boolean }>).filter(
        (i) => req.products.includes(i.product) && !i.returned,
      );
      if (items.length === 0) return answer('None of those items can be returned from this order.');
      return call('return_items', { order_id: req.order_id, item_ids: items.map((i) => i.item_id) });
    }
  }
}

export const expert: Policy = {
  id: 'expert',
  version: 'support-desk-expert-1',
  act: async ({ task, messages }) => expertAction(task, messages),
};

/**
 * Does what the customer asks without checking anything: no identification, no status check. Its
 * writes are refused whenever the store's policy says no, which is what it is for (tests, and a
 * baseline that shows what the penalties cost).
 */
export const reckless: Policy = {
  id: 'reckless',
  version: 'support-desk-reckless-1',
  act: async ({ task, messages }) => {
    const req = requestOf(task);
    if (seenResults(messages).length > 0 || messages.some((m) => m.role === 'tool')) return answer('Done.');
    switch (req.kind) {
      case 'cancel':
        return call('cancel_order', { order_id: req.order_id, reason: req.reason });
      case 'address':
        return call('change_shipping_address', { order_id: req.order_id, ...req.address! });
      case 'return':
        return call('return_items', { order_id: req.order_id, item_ids: ['I00001'] });
    }
  },
};

/** How often the noisy expert errs, per episode: a share of its episodes go wrong in one of two ways. */
export const DEFAULT_NOISY_SKIP = 0.7;

export type DeskNoisyMode = 'clean' | 'no-identify' | 'early';

/** Which errors the noisy expert makes: either, half each (the default), or only one of them. */
export type DeskNoisyKind = 'both' | Exclude<DeskNoisyMode, 'clean'>;
export const DESK_NOISY_KINDS: readonly DeskNoisyKind[] = ['both', 'no-identify', 'early'];

/** The noisy expert's mode for one episode: a pure function of (policy seed, episode id). */
export function deskNoisyMode(
  seed: number,
  episodeId: string,
  rate: number,
  kind: DeskNoisyKind = 'both',
): DeskNoisyMode {
  const rng = createRng(deriveSeed('noisy-expert', seed, episodeId));
  if (rng.next() >= rate) return 'clean';
  if (kind !== 'both') return kind;
  return rng.next() < 0.5 ? 'no-identify' : 'early';
}

/**
 * The noisy expert errs the way a weak agent does, in a share `rate` of its episodes (drawn per
 * episode, so records replay), of the `kind` asked (by default half each way): it breaks the first
 * rule (acts without identifying the customer: its reads and writes are refused) or it answers
 * early (reads the order, then tells the customer it is handled without making the change). The
 * rest are expert episodes.
 */
export function noisyExpert(seed: number, rate = DEFAULT_NOISY_SKIP, kind: DeskNoisyKind = 'both'): Policy {
  return {
    id: 'noisy-expert',
    // The version of the default kind is the one records have always carried.
    version: `support-desk-noisy-expert-1:${rate}${kind === 'both' ? '' : `:${kind}`}`,
    act: async ({ task, messages, episodeId }) => {
      const mode = deskNoisyMode(seed, episodeId, rate, kind);
      const expertMove = expertAction(task, messages);
      if (mode === 'clean') return expertMove;
      const req = requestOf(task);
      const seen = seenResults(messages);
      if (mode === 'early') {
        const write = /"name":"(cancel_order|return_items|change_shipping_address)"/.test(expertMove.text);
        return write ? answer(`Thank you: your request for order ${req.order_id} has been passed on.`) : expertMove;
      }
      // no-identify: straight to the order (refused), then straight to the change, then the answer.
      if (!seen.some((r) => r.name === 'get_order_details'))
        return call('get_order_details', { order_id: req.order_id });
      if (seen.some((r) => WRITES.includes(r.name))) return answer('Done: your request has been handled.');
      switch (req.kind) {
        case 'cancel':
          return call('cancel_order', { order_id: req.order_id, reason: req.reason });
        case 'address':
          return call('change_shipping_address', { order_id: req.order_id, ...req.address! });
        case 'return':
          return answer('Done: your return has been registered.');
      }
    },
  };
}
