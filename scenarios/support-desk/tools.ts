import { z } from 'zod';
import { commitEffect, tool, type Json, type ToolContext } from 'agent-r1-ts';
import { getItems, getOrder, TODAY, TODAY_DAY, dayNumber, type OrderRow } from './db.ts';
import { RETURN_WINDOW_DAYS } from './order-machine.ts';
import { applyEffect, orderAllows, type DeskEffect, type DeskState } from './world.ts';

/**
 * The support desk's tools. Reads and writes go to the episode's own database copy. A request that
 * breaks a rule of the store's policy is refused: nothing is written, and the result says which
 * rule (`{refused: true, rule, message}`); the ToolEnv turns that into a penalty.
 */

type Ctx = ToolContext<DeskState>;

/** The rules of the store's policy, by the names refusals use. */
export const RULES = {
  identify_first:
    'The customer must be identified (find_customer_by_email or find_customer_by_name_zip) before any order or account is read or changed.',
  own_orders_only: "Only the identified customer's own account and orders may be read or changed.",
  cancel_before_shipping: 'An order can be cancelled only while it is pending or processed (not once shipped).',
  return_delivered_only: 'Items can be returned only from a delivered order, once per order.',
  return_window: `Items can be returned within ${RETURN_WINDOW_DAYS} days of delivery.`,
  address_before_shipping: 'A shipping address can be changed only while the order is pending or processed.',
} as const;

export type RuleName = keyof typeof RULES;

function refuse(rule: RuleName, detail: string): Json {
  return { refused: true, rule, message: `Refused (${rule}): ${detail} Policy: ${RULES[rule]}` };
}

function commit(ctx: Ctx, effect: DeskEffect): Json {
  return commitEffect(ctx.state, effect, (e) => applyEffect(ctx.state, e)) as Json;
}

/** The order, if the identified customer may act on it; otherwise the refusal or error to return. */
function ownOrder(ctx: Ctx, orderId: string): { order: OrderRow } | { result: Json } {
  if (!ctx.state.identified) return { result: refuse('identify_first', 'no customer has been identified yet.') };
  const order = getOrder(ctx.state.db, orderId);
  if (!order) return { result: { error: `no order with id ${orderId}` } };
  if (order.customer_id !== ctx.state.identified) {
    return { result: refuse('own_orders_only', `order ${orderId} does not belong to the identified customer.`) };
  }
  return { order };
}

function orderView(ctx: Ctx, order: OrderRow): Json {
  const items = getItems(ctx.state.db, order.id).map((i) => ({
    item_id: i.id,
    product: i.product,
    price: i.price_cents / 100,
    returned: i.returned === 1,
  }));
  const view: { [key: string]: Json } = {
    order_id: order.id,
    status: order.status,
    placed_on: order.placed_on,
    delivered_on: order.delivered_on,
    shipping_address: { street: order.street, city: order.city, zip: order.zip },
    payment_method_id: order.payment_method_id,
    items,
  };
  if (order.delivered_on) view['days_since_delivery'] = TODAY_DAY - dayNumber(order.delivered_on);
  return view;
}

const orderId = z.string().min(1).describe('The order id, e.g. "#W1042".');

export const findCustomerByEmail = tool({
  name: 'find_customer_by_email',
  description: 'Identify the customer by the email address on their account. Returns the customer id.',
  parameters: z.object({ email: z.string().min(3).describe("The customer's email address.") }),
  execute: ({ email }, ctx: Ctx): Json => {
    const row = ctx.state.db
      .prepare('SELECT id, first_name, last_name FROM customers WHERE email = ? COLLATE NOCASE')
      .get(email.trim()) as { id: string; first_name: string; last_name: string } | undefined;
    if (!row) return { found: false, message: `no customer with email ${email}` };
    return {
      found: true,
      customer_id: row.id,
      name: `${row.first_name} ${row.last_name}`,
      effects: [commit(ctx, { op: 'identify', customer_id: row.id })],
    };
  },
});

export const findCustomerByNameZip = tool({
  name: 'find_customer_by_name_zip',
  description: 'Identify the customer by first name, last name and zip code. Returns the customer id.',
  parameters: z.object({
    first_name: z.string().min(1),
    last_name: z.string().min(1),
    zip: z.string().regex(/^\d{5}$/, 'a 5-digit zip code'),
  }),
  execute: ({ first_name, last_name, zip }, ctx: Ctx): Json => {
    const row = ctx.state.db
      .prepare(
        'SELECT id, first_name, last_name FROM customers WHERE first_name = ? COLLATE NOCASE AND last_name = ? COLLATE NOCASE AND zip = ?',
      )
      .get(first_name.trim(), last_name.trim(), zip) as
      | { id: string; first_name: string; last_name: string }
      | undefined;
    if (!row) return { found: false, message: `no customer named ${first_name} ${last_name} with zip ${zip}` };
    return {
      found: true,
      customer_id: row.id,
      name: `${row.first_name} ${row.last_name}`,
      effects: [commit(ctx, { op: 'identify', customer_id: row.id })],
    };
  },
});

export const getCustomerDetails = tool({
  name: 'get_customer_details',
  description: "The identified customer's profile, payment methods and orders (id, status, date).",
  parameters: z.object({ customer_id: z.string().min(1) }),
  execute: ({ customer_id }, ctx: Ctx) => {
    if (!ctx.state.identified) return refuse('identify_first', 'no customer has been identified yet.');
    if (customer_id !== ctx.state.identified)
      return refuse('own_orders_only', `${customer_id} is not the identified customer.`);
    const db = ctx.state.db;
    const customer = db.prepare('SELECT * FROM customers WHERE id = ?').get(customer_id) as Json;
    const payment_methods = db
      .prepare('SELECT id, kind, label FROM payment_methods WHERE customer_id = ? ORDER BY id')
      .all(customer_id) as Json;
    const orders = db
      .prepare('SELECT id AS order_id, status, placed_on FROM orders WHERE customer_id = ? ORDER BY id')
      .all(customer_id) as Json;
    return { customer, payment_methods, orders };
  },
});

export const getOrderDetails = tool({
  name: 'get_order_details',
  description: `An order of the identified customer: status, dates, shipping address, items. Today is ${TODAY}.`,
  parameters: z.object({ order_id: orderId }),
  execute: ({ order_id }, ctx: Ctx) => {
    const found = ownOrder(ctx, order_id);
    return 'result' in found ? found.result : orderView(ctx, found.order);
  },
});

export const cancelOrderTool = tool({
  name: 'cancel_order',
  description: 'Cancel a pending or processed order; the full amount is refunded to the original payment method.',
  parameters: z.object({
    order_id: orderId,
    reason: z.enum(['ordered by mistake', 'no longer needed', 'other']),
  }),
  execute: ({ order_id, reason }, ctx: Ctx) => {
    const found = ownOrder(ctx, order_id);
    if ('result' in found) return found.result;
    if (!orderAllows(ctx.state, found.order, { type: 'CANCEL' })) {
      return refuse('cancel_before_shipping', `order ${order_id} is ${found.order.status}.`);
    }
    const effect = commit(ctx, { op: 'cancel', order_id, reason });
    return { order_id, status: 'cancelled', refunded: refundOf(ctx, order_id), effects: [effect] };
  },
});

export const returnItemsTool = tool({
  name: 'return_items',
  description: `Return items of a delivered order (within ${RETURN_WINDOW_DAYS} days of delivery); their price is refunded to the original payment method.`,
  parameters: z.object({
    order_id: orderId,
    item_ids: z.array(z.string().min(1)).min(1).describe('Ids of the items to return, from get_order_details.'),
  }),
  execute: ({ order_id, item_ids }, ctx: Ctx) => {
    const found = ownOrder(ctx, order_id);
    if ('result' in found) return found.result;
    const { order } = found;
    if (order.status !== 'delivered') return refuse('return_delivered_only', `order ${order_id} is ${order.status}.`);
    if (!orderAllows(ctx.state, order, { type: 'RETURN', today: TODAY_DAY })) {
      return refuse(
        'return_window',
        `order ${order_id} was delivered on ${order.delivered_on}, more than ${RETURN_WINDOW_DAYS} days ago.`,
      );
    }
    const items = new Set(getItems(ctx.state.db, order_id).map((i) => i.id));
    const unknown = item_ids.filter((id) => !items.has(id));
    if (unknown.length > 0) return { error: `not items of order ${order_id}: ${unknown.join(', ')}` };
    const unique = [...new Set(item_ids)].sort();
    const effect = commit(ctx, { op: 'return', order_id, item_ids: unique });
    return {
      order_id,
      status: 'returned',
      returned_items: unique,
      refunded: refundOf(ctx, order_id),
      effects: [effect],
    };
  },
});

export const changeAddressTool = tool({
  name: 'change_shipping_address',
  description: 'Change the shipping address of a pending or processed order.',
  parameters: z.object({
    order_id: orderId,
    street: z.string().min(1),
    city: z.string().min(1),
    zip: z.string().regex(/^\d{5}$/, 'a 5-digit zip code'),
  }),
  execute: ({ order_id, street, city, zip }, ctx: Ctx) => {
    const found = ownOrder(ctx, order_id);
    if ('result' in found) return found.result;
    if (!orderAllows(ctx.state, found.order, { type: 'CHANGE_ADDRESS' })) {
      return refuse('address_before_shipping', `order ${order_id} is ${found.order.status}.`);
    }
    const effect = commit(ctx, { op: 'address', order_id, street, city, zip });
    return { order_id, shipping_address: { street, city, zip }, effects: [effect] };
  },
});

function refundOf(ctx: Ctx, orderId: string): number {
  const row = ctx.state.db
    .prepare('SELECT amount_cents FROM refunds WHERE order_id = ? ORDER BY id DESC LIMIT 1')
    .get(orderId) as { amount_cents: number } | undefined;
  return (row?.amount_cents ?? 0) / 100;
}

export const supportDeskTools = [
  findCustomerByEmail,
  findCustomerByNameZip,
  getCustomerDetails,
  getOrderDetails,
  cancelOrderTool,
  returnItemsTool,
  changeAddressTool,
];

/** Tools that read or change a customer's data: using one before identification is acting too early. */
export const ACTING_TOOLS: ReadonlySet<string> = new Set([
  'get_customer_details',
  'get_order_details',
  'cancel_order',
  'return_items',
  'change_shipping_address',
]);
export const IDENTIFY_TOOLS: ReadonlySet<string> = new Set(['find_customer_by_email', 'find_customer_by_name_zip']);
