import { createActor, type Actor } from 'xstate';
import type { EffectLog } from 'agent-r1-ts';
import {
  cancelOrder,
  changeAddress,
  DEFAULT_CUSTOMERS,
  getOrder,
  openCopy,
  returnItems,
  TODAY_DAY,
  dayNumber,
  type Db,
  type OrderRow,
} from './db.ts';
import { orderMachine, type OrderEvent, type OrderMachine } from './order-machine.ts';

/**
 * One episode's world: its private database copy, the customer the agent has identified, and one
 * order-machine actor per order it has touched (restored from the order's stored status). Every
 * change goes through `applyEffect`, live from the tools and in replay from the record.
 */
export interface DeskState extends EffectLog {
  db: Db;
  identified: string | null;
  orders: Map<string, Actor<OrderMachine>>;
}

export type DeskEffect =
  | { op: 'identify'; customer_id: string }
  | { op: 'cancel'; order_id: string; reason: string }
  | { op: 'return'; order_id: string; item_ids: string[] }
  | { op: 'address'; order_id: string; street: string; city: string; zip: string };

export function createDeskState(customers = DEFAULT_CUSTOMERS): DeskState {
  return { db: openCopy(customers), identified: null, orders: new Map(), applied: 0 };
}

export function disposeDeskState(state: DeskState): void {
  for (const actor of state.orders.values()) actor.stop();
  state.orders.clear();
  if (state.db.open) state.db.close();
}

/** The order's lifecycle actor, restored from the database on first use. */
export function orderActor(state: DeskState, order: OrderRow): Actor<OrderMachine> {
  let actor = state.orders.get(order.id);
  if (!actor) {
    const deliveredDay = order.delivered_on ? dayNumber(order.delivered_on) : null;
    const snapshot = orderMachine.resolveState({ value: order.status, context: { deliveredDay, addressChanges: 0 } });
    actor = createActor(orderMachine, { snapshot, input: { deliveredDay } }).start();
    state.orders.set(order.id, actor);
  }
  return actor;
}

/** Whether the order's lifecycle allows the event now (the store's rules, asked of the world machine). */
export function orderAllows(state: DeskState, order: OrderRow, event: OrderEvent): boolean {
  return orderActor(state, order).getSnapshot().can(event);
}

export function applyEffect(state: DeskState, effect: DeskEffect): void {
  if (effect.op === 'identify') {
    state.identified = effect.customer_id;
    return;
  }
  const order = getOrder(state.db, effect.order_id);
  if (!order) throw new Error(`effect on unknown order ${effect.order_id}`);
  const actor = orderActor(state, order);
  switch (effect.op) {
    case 'cancel':
      actor.send({ type: 'CANCEL' });
      cancelOrder(state.db, effect.order_id, effect.reason);
      break;
    case 'return':
      actor.send({ type: 'RETURN', today: TODAY_DAY });
      returnItems(state.db, effect.order_id, effect.item_ids);
      break;
    case 'address':
      actor.send({ type: 'CHANGE_ADDRESS' });
      changeAddress(state.db, effect.order_id, { street: effect.street, city: effect.city, zip: effect.zip });
      break;
  }
  // The database mirrors the machine: a status the machine did not reach is a bug, not a state.
  const status = actor.getSnapshot().value;
  const stored = getOrder(state.db, effect.order_id)!.status;
  if (status !== stored)
    throw new Error(`order ${effect.order_id}: world machine is "${String(status)}" but the database says "${stored}"`);
}
