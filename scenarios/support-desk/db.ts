import { createHash } from 'node:crypto';
import type Database from 'better-sqlite3';
import { createActor } from 'xstate';
import { canonicalJson, createRng, importOptional, type Rng, type Json } from 'agent-r1-ts';
import { orderMachine, type OrderEvent, type OrderStatus } from './order-machine.ts';

/**
 * The store's database: customers, payment methods, orders, order items and refunds, generated
 * once from a fixed seed (the world is the same for every task; tasks differ in what they ask).
 * Each episode opens its own in-memory copy from the serialized image, so concurrent episodes never
 * see each other's writes.
 */

export type Db = Database.Database;

// SQLite is an optional dependency of agent-r1-ts (this scenario is the one that needs it): one not
// installed fails the scenario's load, naming it.
const Sqlite = (await importOptional('better-sqlite3', 'the support-desk scenario', () => import('better-sqlite3')))
  .default;

/** "Today" in the store's world: the reference date for the return window. */
export const TODAY = '2026-03-01';
export const TODAY_DAY = dayNumber(TODAY);
const WORLD_SEED = 20260301;
/** The world's customers by default; a larger world (the `customers` option) starts with the same ones. */
export const DEFAULT_CUSTOMERS = 60;

export function dayNumber(isoDate: string): number {
  return Math.round(Date.parse(`${isoDate}T00:00:00Z`) / 86_400_000);
}

export function isoDate(day: number): string {
  return new Date(day * 86_400_000).toISOString().slice(0, 10);
}

const SCHEMA = `
CREATE TABLE customers (
  id TEXT PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL, email TEXT NOT NULL UNIQUE,
  street TEXT NOT NULL, city TEXT NOT NULL, zip TEXT NOT NULL
);
CREATE TABLE payment_methods (
  id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers(id), kind TEXT NOT NULL, label TEXT NOT NULL
);
CREATE TABLE orders (
  id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers(id), status TEXT NOT NULL,
  placed_on TEXT NOT NULL, delivered_on TEXT, street TEXT NOT NULL, city TEXT NOT NULL, zip TEXT NOT NULL,
  payment_method_id TEXT NOT NULL REFERENCES payment_methods(id)
);
CREATE TABLE order_items (
  id TEXT PRIMARY KEY, order_id TEXT NOT NULL REFERENCES orders(id), product TEXT NOT NULL,
  price_cents INTEGER NOT NULL, returned INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE refunds (
  id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL REFERENCES orders(id),
  payment_method_id TEXT NOT NULL REFERENCES payment_methods(id), amount_cents INTEGER NOT NULL, reason TEXT NOT NULL
);
`;

const FIRST = [
  'Ava',
  'Ben',
  'Chloe',
  'Daniel',
  'Elena',
  'Farid',
  'Grace',
  'Hugo',
  'Ines',
  'Jonas',
  'Keiko',
  'Liam',
  'Maya',
  'Noah',
  'Olga',
  'Pablo',
  'Quinn',
  'Rosa',
  'Sami',
  'Tara',
];
const LAST = [
  'Adams',
  'Brooks',
  'Castro',
  'Dubois',
  'Evans',
  'Fischer',
  'Garcia',
  'Hansen',
  'Ito',
  'Jensen',
  'Kowalski',
  'Lopez',
  'Moreau',
  'Nakamura',
  'Okafor',
  'Petrov',
];
/** Each customer's first + last name is unique, so the world holds at most one per pair. */
export const MAX_CUSTOMERS = FIRST.length * LAST.length;
const CITIES: Array<[string, string]> = [
  ['Springfield', '62701'],
  ['Riverton', '82501'],
  ['Lakewood', '80226'],
  ['Fairview', '97024'],
  ['Greenville', '29601'],
  ['Madison', '53703'],
  ['Salem', '97301'],
  ['Georgetown', '78626'],
];
const STREETS = ['Oak St', 'Maple Ave', 'Cedar Ln', 'Pine Rd', 'Elm St', 'Birch Way', 'Willow Dr', 'Lake Blvd'];
export const PRODUCTS: Array<[string, number]> = [
  ['Desk Lamp', 3499],
  ['Wireless Mouse', 2599],
  ['Mechanical Keyboard', 8999],
  ['USB-C Hub', 4599],
  ['Water Bottle', 1899],
  ['Backpack', 6499],
  ['Notebook Set', 1299],
  ['Headphones', 12999],
  ['Phone Case', 1999],
  ['Yoga Mat', 2999],
  ['Coffee Grinder', 5499],
  ['Running Shoes', 9499],
  ['Throw Blanket', 3999],
  ['Plant Pot', 1599],
  ['Bluetooth Speaker', 7999],
];
const PAYMENT_KINDS: Array<[string, (rng: Rng) => string]> = [
  ['credit_card', (rng) => `Visa ending in ${rng.int(1000, 9999)}`],
  ['paypal', () => 'PayPal account'],
  ['gift_card', (rng) => `Gift card ${rng.int(100000, 999999)}`],
];

/** The status each generated order ends in, with weights: every kind of request finds orders. */
const STATUS_WEIGHTS: Array<[OrderStatus, number]> = [
  ['pending', 3],
  ['processed', 2],
  ['shipped', 3],
  ['delivered', 6],
  ['cancelled', 1],
  ['returned', 1],
];

/** The events that lead a new order to `status`: the generator replays them through the world machine. */
function lifecycle(status: OrderStatus, deliveredDay: number): OrderEvent[] {
  const deliver: OrderEvent[] = [{ type: 'PROCESS' }, { type: 'SHIP' }, { type: 'DELIVER', day: deliveredDay }];
  switch (status) {
    case 'pending':
      return [];
    case 'processed':
      return [{ type: 'PROCESS' }];
    case 'shipped':
      return [{ type: 'PROCESS' }, { type: 'SHIP' }];
    case 'delivered':
      return deliver;
    case 'cancelled':
      return [{ type: 'CANCEL' }];
    case 'returned':
      return [...deliver, { type: 'RETURN', today: deliveredDay + 3 }];
  }
}

function weighted<T>(rng: Rng, items: Array<[T, number]>): T {
  const total = items.reduce((s, [, w]) => s + w, 0);
  let r = rng.next() * total;
  for (const [item, w] of items) {
    if ((r -= w) < 0) return item;
  }
  return items[items.length - 1]![0];
}

function generate(db: Db, customers: number): void {
  const rng = createRng(WORLD_SEED);
  db.exec(SCHEMA);
  const insertCustomer = db.prepare('INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?)');
  const insertPayment = db.prepare('INSERT INTO payment_methods VALUES (?, ?, ?, ?)');
  const insertOrder = db.prepare('INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
  const insertItem = db.prepare('INSERT INTO order_items VALUES (?, ?, ?, ?, ?)');
  const insertRefund = db.prepare(
    'INSERT INTO refunds (order_id, payment_method_id, amount_cents, reason) VALUES (?, ?, ?, ?)',
  );
  const names = new Set<string>();
  let orderNo = 1000;
  let paymentNo = 1;
  let itemNo = 1;
  for (let c = 0; c < customers; c++) {
    let first: string, last: string;
    do {
      first = rng.pick(FIRST);
      last = rng.pick(LAST);
    } while (names.has(`${first} ${last}`));
    names.add(`${first} ${last}`);
    const [city, zip] = rng.pick(CITIES);
    const id = `C${String(c + 1).padStart(3, '0')}`;
    const street = `${rng.int(1, 999)} ${rng.pick(STREETS)}`;
    insertCustomer.run(
      id,
      first,
      last,
      `${first}.${last}${rng.int(1, 99)}@example.com`.toLowerCase(),
      street,
      city,
      zip,
    );
    const payments: string[] = [];
    for (let p = rng.int(1, 2); p > 0; p--) {
      const [kind, label] = rng.pick(PAYMENT_KINDS);
      const pid = `PM${String(paymentNo++).padStart(4, '0')}`;
      insertPayment.run(pid, id, kind, label(rng));
      payments.push(pid);
    }
    for (let o = rng.int(2, 5); o > 0; o--) {
      const status = weighted(rng, STATUS_WEIGHTS);
      const deliveredDay = TODAY_DAY - rng.int(1, 60);
      const placedDay =
        status === 'pending' || status === 'processed' ? TODAY_DAY - rng.int(0, 3) : deliveredDay - rng.int(3, 9);
      const actor = createActor(orderMachine, { input: {} }).start();
      for (const event of lifecycle(status, deliveredDay)) actor.send(event);
      const reached = actor.getSnapshot().value as OrderStatus;
      actor.stop();
      if (reached !== status) throw new Error(`order generator: ${status} is not reachable (got ${reached})`);
      const orderId = `#W${orderNo++}`;
      const delivered = status === 'delivered' || status === 'returned' ? isoDate(deliveredDay) : null;
      const payment = rng.pick(payments);
      insertOrder.run(orderId, id, status, isoDate(placedDay), delivered, street, city, zip, payment);
      const products = rng.shuffle(PRODUCTS).slice(0, rng.int(1, 4));
      let refund = 0;
      products.forEach(([product, price], i) => {
        const returned = status === 'returned' && i === 0 ? 1 : 0;
        if (returned) refund += price;
        insertItem.run(`I${String(itemNo++).padStart(5, '0')}`, orderId, product, price, returned);
      });
      if (status === 'cancelled') refund = products.reduce((s, [, p]) => s + p, 0);
      if (refund > 0) insertRefund.run(orderId, payment, refund, status === 'cancelled' ? 'cancelled' : 'returned');
    }
  }
}

const TABLES: Array<[string, string]> = [
  ['customers', 'id'],
  ['payment_methods', 'id'],
  ['orders', 'id'],
  ['order_items', 'id'],
  ['refunds', 'id'],
];

/**
 * Triggers that note each table an episode writes to, in the image itself (so a copy costs nothing
 * more): the digest then reads only those tables, and takes the others' JSON from the base.
 */
const WRITTEN_SCHEMA = [
  'CREATE TABLE _written (name TEXT PRIMARY KEY) WITHOUT ROWID;',
  ...TABLES.flatMap(([table]) =>
    ['INSERT', 'UPDATE', 'DELETE'].map(
      (op) =>
        `CREATE TRIGGER _written_${table}_${op.toLowerCase()} AFTER ${op} ON ${table} ` +
        `BEGIN INSERT OR IGNORE INTO _written VALUES ('${table}'); END;`,
    ),
  ),
].join('\n');

interface BaseWorld {
  image: Buffer;
  /** Each table's canonical JSON in the base database. */
  tables: Map<string, string>;
}

const bases = new Map<number, BaseWorld>();
/** The base each open copy was made from. */
const baseOf = new WeakMap<Db, BaseWorld>();

function baseWorld(customers: number): BaseWorld {
  let base = bases.get(customers);
  if (!base) {
    const db = new Sqlite(':memory:');
    generate(db, customers);
    db.exec(WRITTEN_SCHEMA);
    const tables = new Map(TABLES.map(([table]) => [table, tableJson(db, table)]));
    base = { image: db.serialize(), tables };
    db.close();
    bases.set(customers, base);
  }
  return base;
}

/** The serialized base database of a world of `customers` (generated on first use, then shared). */
export function baseImage(customers = DEFAULT_CUSTOMERS): Buffer {
  return baseWorld(customers).image;
}

/** A private in-memory copy of the base database. */
export function openCopy(customers = DEFAULT_CUSTOMERS): Db {
  const base = baseWorld(customers);
  const db = new Sqlite(base.image);
  db.pragma('foreign_keys = ON');
  baseOf.set(db, base);
  return db;
}

/** Every row of every table, ordered by key: the database state that outcomes compare. */
export function dumpDb(db: Db): { [table: string]: Json[] } {
  const out: { [table: string]: Json[] } = {};
  for (const [table] of TABLES) out[table] = tableRows(db, table);
  return out;
}

function tableRows(db: Db, table: string): Json[] {
  const key = TABLES.find(([name]) => name === table)![1];
  return db.prepare(`SELECT * FROM ${table} ORDER BY ${key}`).all() as Json[];
}

function tableJson(db: Db, table: string): string {
  return canonicalJson(tableRows(db, table));
}

/** The tables by name, in the order canonical JSON writes an object's keys. */
const SORTED_TABLES = TABLES.map(([table]) => table).sort();

/**
 * sha256 of the canonical JSON of dumpDb(db), fed to the hash table by table: a table no write has
 * touched is its base's JSON, not read again (reading them all took 12–22 ms an episode at 200
 * customers).
 */
export function digestDb(db: Db): string {
  const base = baseOf.get(db);
  const written = base ? new Set(db.prepare('SELECT name FROM _written').pluck().all() as string[]) : undefined;
  const hash = createHash('sha256');
  SORTED_TABLES.forEach((table, i) => {
    hash.update(`${i === 0 ? '{' : ','}${JSON.stringify(table)}:`);
    hash.update(written && !written.has(table) ? base!.tables.get(table)! : tableJson(db, table));
  });
  return hash.update('}').digest('hex');
}

// ---- rows as the tools show them ----------------------------------------------------------------

export interface OrderRow {
  id: string;
  customer_id: string;
  status: OrderStatus;
  placed_on: string;
  delivered_on: string | null;
  street: string;
  city: string;
  zip: string;
  payment_method_id: string;
}

export interface ItemRow {
  id: string;
  order_id: string;
  product: string;
  price_cents: number;
  returned: number;
}

export function getOrder(db: Db, orderId: string): OrderRow | undefined {
  return db.prepare('SELECT * FROM orders WHERE id = ?').get(orderId) as OrderRow | undefined;
}

export function getItems(db: Db, orderId: string): ItemRow[] {
  return db.prepare('SELECT * FROM order_items WHERE order_id = ? ORDER BY id').all(orderId) as ItemRow[];
}

// ---- writes (the effects of the write tools; checked by the tools before they are applied) ------

export interface Address {
  street: string;
  city: string;
  zip: string;
}

export function cancelOrder(db: Db, orderId: string, reason: string): number {
  return db.transaction(() => {
    const order = getOrder(db, orderId)!;
    const amount = getItems(db, orderId)
      .filter((i) => !i.returned)
      .reduce((s, i) => s + i.price_cents, 0);
    db.prepare("UPDATE orders SET status = 'cancelled' WHERE id = ?").run(orderId);
    db.prepare('INSERT INTO refunds (order_id, payment_method_id, amount_cents, reason) VALUES (?, ?, ?, ?)').run(
      orderId,
      order.payment_method_id,
      amount,
      `cancelled: ${reason}`,
    );
    return amount;
  })();
}

export function returnItems(db: Db, orderId: string, itemIds: readonly string[]): number {
  return db.transaction(() => {
    const order = getOrder(db, orderId)!;
    const items = getItems(db, orderId).filter((i) => itemIds.includes(i.id));
    const amount = items.reduce((s, i) => s + i.price_cents, 0);
    const mark = db.prepare('UPDATE order_items SET returned = 1 WHERE id = ?');
    for (const item of items) mark.run(item.id);
    db.prepare("UPDATE orders SET status = 'returned' WHERE id = ?").run(orderId);
    db.prepare('INSERT INTO refunds (order_id, payment_method_id, amount_cents, reason) VALUES (?, ?, ?, ?)').run(
      orderId,
      order.payment_method_id,
      amount,
      'returned',
    );
    return amount;
  })();
}

export function changeAddress(db: Db, orderId: string, address: Address): void {
  db.prepare('UPDATE orders SET street = ?, city = ?, zip = ? WHERE id = ?').run(
    address.street,
    address.city,
    address.zip,
    orderId,
  );
}
