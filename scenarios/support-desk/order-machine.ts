import { assign, setup } from 'xstate';

/**
 * The world machine of the support desk: one order's lifecycle. The database generator drives
 * every order through it (so stored statuses are reachable ones), and the write tools ask it
 * whether a request is allowed (`snapshot.can(event)`) before they touch the database, so the
 * store's rules live in one place.
 */

export type OrderStatus = 'pending' | 'processed' | 'shipped' | 'delivered' | 'cancelled' | 'returned';

export const ORDER_STATUSES: readonly OrderStatus[] = [
  'pending',
  'processed',
  'shipped',
  'delivered',
  'cancelled',
  'returned',
];

/** Days after delivery during which items may be returned. */
export const RETURN_WINDOW_DAYS = 30;

export interface OrderContext {
  /** Day number (days since 1970-01-01) the order was delivered, once it was. */
  deliveredDay: number | null;
  /** Address changes so far (a targetless transition needs an action for `snapshot.can` to see it). */
  addressChanges: number;
}

export type OrderEvent =
  | { type: 'PROCESS' }
  | { type: 'SHIP' }
  | { type: 'DELIVER'; day: number }
  | { type: 'CANCEL' }
  | { type: 'CHANGE_ADDRESS' }
  | { type: 'RETURN'; today: number };

export const orderMachine = setup({
  types: {
    context: {} as OrderContext,
    events: {} as OrderEvent,
    input: {} as { deliveredDay?: number | null },
  },
  actions: {
    countAddressChange: assign({ addressChanges: ({ context }) => context.addressChanges + 1 }),
  },
  guards: {
    withinReturnWindow: ({ context, event }) =>
      event.type === 'RETURN' &&
      context.deliveredDay !== null &&
      event.today - context.deliveredDay <= RETURN_WINDOW_DAYS,
  },
}).createMachine({
  id: 'order',
  context: ({ input }) => ({ deliveredDay: input?.deliveredDay ?? null, addressChanges: 0 }),
  initial: 'pending',
  states: {
    pending: {
      on: { PROCESS: 'processed', CANCEL: 'cancelled', CHANGE_ADDRESS: { actions: 'countAddressChange' } },
    },
    processed: {
      on: { SHIP: 'shipped', CANCEL: 'cancelled', CHANGE_ADDRESS: { actions: 'countAddressChange' } },
    },
    shipped: {
      on: {
        DELIVER: { target: 'delivered', actions: assign({ deliveredDay: ({ event }) => event.day }) },
      },
    },
    delivered: {
      on: { RETURN: { guard: 'withinReturnWindow', target: 'returned' } },
    },
    cancelled: { type: 'final' },
    returned: { type: 'final' },
  },
});

export type OrderMachine = typeof orderMachine;
