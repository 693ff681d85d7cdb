/**
 * JSON with object keys sorted, so equal values give equal bytes whatever order their fields were
 * built in. Used for record lines, checksums and cache keys. Same output as
 * `JSON.stringify` of a key-sorted copy (undefined fields dropped, non-finite numbers as null),
 * written directly, without building the copy.
 */
export function canonicalJson(value: unknown): string {
  const parts: string[] = [];
  return write(value, parts) ? parts.join('') : 'null';
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
function write(value: unknown, parts: string[]): boolean {
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
      const written = writeObject(value, parts);
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

function writeObject(value: object, parts: string[]): boolean {
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
    if (write((value as Record<string, unknown>)[keys[i]!], parts)) first = false;
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

/** An object's fields in canonical order, each as [key, canonical JSON of its value] (undefined ones dropped). */
export function canonicalFields(value: object): Array<[key: string, json: string]> {
  const fields: Array<[string, string]> = [];
  const parts: string[] = [];
  for (const key of sortedKeys(value)) {
    if (write((value as Record<string, unknown>)[key], parts)) fields.push([key, parts.join('')]);
    parts.length = 0;
  }
  return fields;
}

/** The canonical JSON object of fields already in canonical order. */
export function joinFields(fields: ReadonlyArray<readonly [key: string, json: string]>): string {
  let out = '{';
  for (let i = 0; i < fields.length; i++) out += (i ? ',' : '') + quoteKey(fields[i]![0]) + ':' + fields[i]![1];
  return out + '}';
}
