/**
 * JSON with object keys sorted, so equal values give equal bytes whatever order their fields were
 * built in. Used for record lines, checksums and cache keys. Same output as
 * `JSON.stringify` of a key-sorted copy (undefined fields dropped, non-finite numbers as null),
 * written directly, without building the copy. A value already in canonical order (see
 * inCanonicalOrder: records are built so, and a canonical line parses back so) is written by
 * JSON.stringify itself, twice as fast as the writer here.
 */
export function canonicalJson(value: unknown): string {
  return fieldJson(value) ?? 'null';
}

/**
 * The canonical JSON of an object field's value, or undefined where JSON leaves the field out
 * (undefined, a function, a symbol, or a toJSON that gives one of those).
 */
export function fieldJson(value: unknown): string | undefined {
  if (stringifiesCanonically(value)) return JSON.stringify(value);
  const parts: string[] = [];
  return write(value, parts, true) ? parts.join('') : undefined;
}

/**
 * Whether JSON.stringify writes `value` exactly as canonicalJson does: it holds plain objects and
 * arrays only, each object's keys already in sorted order (as JSON.stringify enumerates them), and
 * neither a toJSON nor a bigint. Cheaper than writing it: nothing is built.
 */
export function inCanonicalOrder(value: object): boolean {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!leafOrInOrder(value[i])) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false; // a Date, a boxed value, a Map, a class
  let previous: string | undefined;
  for (const key in value) {
    if ((previous !== undefined && !(previous < key)) || key === 'toJSON') return false;
    if (!leafOrInOrder((value as Record<string, unknown>)[key])) return false;
    previous = key;
  }
  return true;
}

const leafOrInOrder = (v: unknown) =>
  typeof v === 'object' ? v === null || inCanonicalOrder(v) : typeof v !== 'bigint';

/** An object or array that JSON.stringify writes as canonicalJson would. */
const stringifiesCanonically = (value: unknown): value is object =>
  typeof value === 'object' && value !== null && inCanonicalOrder(value);

/**
 * A copy of `value` in canonical order (plain objects' keys inserted sorted, at every depth), or
 * `value` itself where it already is. For what enters a record from outside (a tool's output, a
 * ToolEnv's info), so that the record is written by JSON.stringify. Only plain objects and arrays are
 * copied; anything else is kept as it is (and written by the canonical writer).
 */
export function inCanonicalOrderCopy<T>(value: T): T {
  if (typeof value !== 'object' || value === null || inCanonicalOrder(value)) return value;
  return sortedCopy(value) as T;
}

/**
 * Copies of values frozen through, by value: neither can change (a tool's shared cached output is
 * copied once, not on every call that returns it).
 */
const frozenCopies = new WeakMap<object, unknown>();
/** Whether the value being copied, so far, holds a plain object or array that is not frozen. */
let copyHoldsMutable = false;

function sortedCopy(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const proto = Object.getPrototypeOf(value);
  const plain = Array.isArray(value) || proto === Object.prototype || proto === null;
  if (!plain) return value; // kept as it is (a Date, a Map, a class): shared, not copied
  const frozen = Object.isFrozen(value);
  if (frozen) {
    const known = frozenCopies.get(value);
    if (known !== undefined) return known;
  }
  const outer = copyHoldsMutable;
  copyHoldsMutable = !frozen;
  let copy: unknown[] | Record<string, unknown>;
  if (Array.isArray(value)) copy = value.map((v) => sortedCopy(v));
  else {
    copy = proto === null ? Object.create(null) : {};
    for (const key of Object.keys(value).sort()) {
      const inner = sortedCopy((value as Record<string, unknown>)[key]);
      // A "__proto__" key stays a field (assigned, it would set the copy's prototype).
      if (key === '__proto__')
        Object.defineProperty(copy, key, { value: inner, enumerable: true, writable: true, configurable: true });
      else (copy as Record<string, unknown>)[key] = inner;
    }
  }
  if (frozen) Object.freeze(copy);
  if (frozen && !copyHoldsMutable) frozenCopies.set(value, copy);
  copyHoldsMutable ||= outer;
  return copy;
}

/**
 * The JSON of frozen objects already written. Values shared by many records (a pool's tasks, cached
 * tool results: see deepFreeze) are then serialized once, not once per record. Only an object frozen
 * through is remembered: one with a mutable object inside could change under its entry. (Plain data
 * is assumed: a getter's value is taken as fixed.)
 */
const frozenJson = new WeakMap<object, string>();
/** Whether the object being written, so far, holds a mutable object (or one with toJSON). */
let holdsMutable = false;

/**
 * Appends the JSON of `value` to `parts`; false (nothing appended) where JSON drops the value.
 * Pieces are joined once at the end: a string built by `+=` is a rope of thousands of small
 * strings, and flattening it (to hash or write it) cost more than writing it.
 */
function write(value: unknown, parts: string[], top = false): boolean {
  switch (typeof value) {
    case 'string':
      parts.push(JSON.stringify(value));
      return true;
    case 'number':
      // A finite number's JSON is its string form (-0 included: both write 0).
      parts.push(Number.isFinite(value) ? `${value}` : 'null');
      return true;
    case 'boolean':
      parts.push(value ? 'true' : 'false');
      return true;
    case 'object': {
      if (value === null) {
        parts.push('null');
        return true;
      }
      const frozen = Object.isFrozen(value);
      if (frozen) {
        const known = frozenJson.get(value);
        if (known !== undefined) {
          parts.push(known);
          return true;
        }
      }
      const outer = holdsMutable;
      holdsMutable = !frozen;
      const from = parts.length;
      // Out of order at the top only (a record built in another order), each field that is in
      // order is written by JSON.stringify. (Not in a frozen one, whose JSON may be remembered.)
      const written = writeObject(value, parts, top && !frozen);
      if (!holdsMutable && written) {
        const json = parts.splice(from).join('');
        parts.push(json);
        frozenJson.set(value, json);
      }
      holdsMutable ||= outer;
      return written;
    }
    case 'bigint':
      throw new TypeError('canonicalJson: a bigint is not JSON');
    default:
      return false; // undefined, functions, symbols: dropped, as JSON.stringify does
  }
}

function writeObject(value: object, parts: string[], fieldsByStringify: boolean): boolean {
  if (Array.isArray(value)) {
    parts.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i) parts.push(',');
      if (!write(value[i], parts)) parts.push('null');
    }
    parts.push(']');
    return true;
  }
  const withJson = value as { toJSON?: () => unknown };
  if (typeof withJson.toJSON === 'function') {
    holdsMutable = true; // what toJSON returns may change (a Date's time can be set when frozen)
    return write(withJson.toJSON(), parts);
  }
  const keys = sortedKeys(value);
  parts.push('{');
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const mark = parts.length;
    parts.push(first ? quoteKey(keys[i]!) : ',' + quoteKey(keys[i]!), ':');
    const field = (value as Record<string, unknown>)[keys[i]!];
    if (fieldsByStringify && stringifiesCanonically(field)) {
      parts.push(JSON.stringify(field));
      first = false;
    } else if (write(field, parts)) first = false;
    else parts.length = mark;
  }
  parts.push('}');
  return true;
}

/**
 * An object's own keys in sorted order. Short lists are insertion-sorted in place: Array#sort
 * allocates a work copy per call, and a record has a sort per object.
 */
function sortedKeys(value: object): string[] {
  const keys = Object.keys(value);
  if (keys.length > 16) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    for (; j >= 0 && keys[j]! > key; j--) keys[j + 1] = keys[j]!;
    keys[j + 1] = key;
  }
  return keys;
}

/** Keys as JSON strings, remembered: the same few keys recur in every record. */
const quotedKeys = new Map<string, string>();

function quoteKey(key: string): string {
  let quoted = quotedKeys.get(key);
  if (quoted === undefined) {
    quoted = JSON.stringify(key);
    if (quotedKeys.size < 10_000) quotedKeys.set(key, quoted);
  }
  return quoted;
}
