import { createRng, deriveSeed, ScenarioError, type Json, type Task } from 'agent-r1-ts';
import {
  DEFAULT_CUSTOMERS,
  digestDb,
  getItems,
  getOrder,
  openCopy,
  TODAY_DAY,
  dayNumber,
  type Db,
  type OrderRow,
} from './db.ts';
import { RETURN_WINDOW_DAYS } from './order-machine.ts';
import { applyEffect, createDeskState, disposeDeskState, type DeskEffect } from './world.ts';

/**
 * Seeded customer requests. Every task names what the customer said (`meta.request`, the same
 * facts as the question text) and the database state the store should end in (`meta.expected`:
 * the touched order's row, items and refunds, plus `meta.expectedDigest` over the whole database).
 * Requests the policy forbids expect the database unchanged: the agent must decline.
 */

export const SPLITS = ['train', 'dev', 'test'] as const;
export type Split = (typeof SPLITS)[number];

export type RequestKind = 'cancel' | 'return' | 'address';

export interface DeskRequest {
  [key: string]: Json;
  kind: RequestKind;
  order_id: string;
  identify: { email: string } | { first_name: string; last_name: string; zip: string };
  /** return: the products to return, by name as the customer says them. */
  products: string[];
  /** cancel: the customer's reason. */
  reason: string;
  /** address: the new shipping address. */
  address: { street: string; city: string; zip: string } | null;
}

/** Customers belong to one split each (by number), so no customer's orders leak across splits. */
function splitOf(customerId: string): Split {
  const n = Number(customerId.slice(1)) % 5;
  return n < 3 ? 'train' : n === 3 ? 'dev' : 'test';
}

interface Customer {
  id: string;
  first_name: string;
  last_name: string;
  email: string;
  zip: string;
}

const NEW_STREETS = ['12 Harbor View', '480 Summit Ave', '77 Orchard Ln', '905 Mill Rd', '31 Quarry St', '218 Bay Ct'];
const NEW_CITIES: Array<[string, string]> = [
  ['Portland', '97205'],
  ['Austin', '78701'],
  ['Denver', '80202'],
  ['Boston', '02108'],
];
const REASONS = ['ordered by mistake', 'no longer needed'] as const;

/** One candidate per (order, kind the order's status makes interesting); variants come from the seed. */
function candidates(
  db: Db,
  split: Split,
): Array<{ order: OrderRow; customer: Customer; kind: RequestKind; allowed: boolean }> {
  const orders = db.prepare('SELECT * FROM orders ORDER BY id').all() as OrderRow[];
  const customers = new Map((db.prepare('SELECT * FROM customers').all() as Customer[]).map((c) => [c.id, c]));
  const out: Array<{ order: OrderRow; customer: Customer; kind: RequestKind; allowed: boolean }> = [];
  for (const order of orders) {
    if (splitOf(order.customer_id) !== split) continue;
    const customer = customers.get(order.customer_id)!;
    const early = order.status === 'pending' || order.status === 'processed';
    if (early) {
      out.push({ order, customer, kind: 'cancel', allowed: true });
      out.push({ order, customer, kind: 'address', allowed: true });
    } else if (order.status === 'shipped') {
      out.push({ order, customer, kind: 'cancel', allowed: false });
      out.push({ order, customer, kind: 'address', allowed: false });
    } else if (order.status === 'delivered') {
      const age = TODAY_DAY - dayNumber(order.delivered_on!);
      out.push({ order, customer, kind: 'return', allowed: age <= RETURN_WINDOW_DAYS });
    }
  }
  return out;
}

function question(req: DeskRequest, customer: Customer): string {
  const who =
    'email' in req.identify
      ? `Hi, my email is ${req.identify.email}.`
      : `Hi, this is ${customer.first_name} ${customer.last_name}, zip code ${customer.zip}.`;
  switch (req.kind) {
    case 'cancel':
      return `${who} Please cancel my order ${req.order_id}, ${req.reason === 'ordered by mistake' ? 'I ordered it by mistake' : 'I no longer need it'}.`;
    case 'return':
      return `${who} I'd like to return the ${req.products.join(' and the ')} from order ${req.order_id}.`;
    case 'address':
      return `${who} Please ship order ${req.order_id} to ${req.address!.street}, ${req.address!.city} ${req.address!.zip} instead.`;
  }
}

/** The effect a correct agent applies (none when the policy forbids the request). */
export function expectedEffect(req: DeskRequest, allowed: boolean, db: Db): DeskEffect | null {
  if (!allowed) return null;
  switch (req.kind) {
    case 'cancel':
      return { op: 'cancel', order_id: req.order_id, reason: req.reason };
    case 'return': {
      const ids = getItems(db, req.order_id)
        .filter((i) => req.products.includes(i.product))
        .map((i) => i.id)
        .sort();
      return { op: 'return', order_id: req.order_id, item_ids: ids };
    }
    case 'address':
      return { op: 'address', order_id: req.order_id, ...req.address! };
  }
}

function expectedState(effect: DeskEffect | null, customers: number): { expected: Json; digest: string } {
  const state = createDeskState(customers);
  try {
    if (effect) {
      applyEffect(state, {
        op: 'identify',
        customer_id: getOrder(state.db, (effect as { order_id: string }).order_id)!.customer_id,
      });
      applyEffect(state, effect);
    }
    const orderIdOf = effect && 'order_id' in effect ? effect.order_id : null;
    const expected: Json = orderIdOf
      ? {
          order: getOrder(state.db, orderIdOf) as unknown as Json,
          items: getItems(state.db, orderIdOf) as unknown as Json,
          refunds: state.db.prepare('SELECT * FROM refunds WHERE order_id = ? ORDER BY id').all(orderIdOf) as Json,
        }
      : { unchanged: true };
    return { expected, digest: digestDb(state.db) };
  } finally {
    disposeDeskState(state);
  }
}

const digestCache = new Map<string, { expected: Json; digest: string }>();

/**
 * `count` tasks of `split`, a seeded sample of the split's requests (repeating, with new variants,
 * past the end), in a world of `customers`.
 */
export function generateTasks(split: string, seed: number, count: number, customers = DEFAULT_CUSTOMERS): Task[] {
  if (!(SPLITS as readonly string[]).includes(split))
    throw new ScenarioError(`support-desk has no split "${split}"; valid: ${SPLITS.join(', ')}`);
  if (!Number.isInteger(count) || count < 0)
    throw new ScenarioError(`task count must be a non-negative integer, got ${count}`);
  const db = openCopy(customers);
  try {
    const pool = candidates(db, split as Split);
    const rng = createRng(deriveSeed('support-desk', split, seed));
    const order = rng.shuffle(pool.map((_, i) => i));
    const tasks: Task[] = [];
    for (let n = 0; n < count; n++) {
      const index = order[n % order.length]!;
      const round = Math.floor(n / order.length);
      const { order: row, customer, kind, allowed } = pool[index]!;
      // Round 0 is fixed per request (same id, same text under any seed); later rounds vary with the seed.
      const v = createRng(
        round === 0 ? deriveSeed('support-desk', split, index) : deriveSeed('support-desk', split, index, round, seed),
      );
      const items = getItems(db, row.id);
      const req: DeskRequest = {
        kind,
        order_id: row.id,
        identify: v.chance(0.5)
          ? { email: customer.email }
          : { first_name: customer.first_name, last_name: customer.last_name, zip: customer.zip },
        products:
          kind === 'return'
            ? v
                .shuffle(items)
                .slice(0, v.int(1, items.length))
                .map((i) => i.product)
                .sort()
            : [],
        reason: v.pick(REASONS),
        address: null,
      };
      if (kind === 'address') {
        const [city, zip] = v.pick(NEW_CITIES);
        req.address = { street: v.pick(NEW_STREETS), city, zip };
      }
      const effect = expectedEffect(req, allowed, db);
      const key = `${customers} ${JSON.stringify(effect)}`;
      let exp = digestCache.get(key);
      if (!exp) digestCache.set(key, (exp = expectedState(effect, customers)));
      tasks.push({
        id: `support-${split}-${index}${round ? `-r${round}-s${seed}` : ''}`,
        split,
        question: question(req, customer),
        type: allowed ? kind : `${kind}_refused`,
        meta: { request: req, allowed, expected: exp.expected, expectedDigest: exp.digest },
      });
    }
    return tasks;
  } finally {
    db.close();
  }
}
