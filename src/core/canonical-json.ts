/**
 * JSON with object keys sorted, so equal values give equal bytes whatever order their fields were
 * built in. Used for record lines, checksums and cache keys. Same output as
 * `JSON.stringify` of a key-sorted copy (undefined fields dropped, non-finite numbers as null),
 * written directly, without building the copy.
 */
export function canonicalJson(value: unknown): string {
  return write(value) ?? 'null';
}

function write(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      // A finite number's JSON is its string form (-0 included: both write 0).
      return Number.isFinite(value) ? `${value}` : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) out += (i ? ',' : '') + (write(value[i]) ?? 'null');
        return out + ']';
      }
      const withJson = value as { toJSON?: () => unknown };
      if (typeof withJson.toJSON === 'function') return write(withJson.toJSON());
      // Written directly (no [key, json] pairs): records hold thousands of small objects.
      const keys = sortedKeys(value);
      let out = '{';
      let first = true;
      for (let i = 0; i < keys.length; i++) {
        const v = write((value as Record<string, unknown>)[keys[i]!]);
        if (v === undefined) continue;
        out += (first ? '' : ',') + quoteKey(keys[i]!) + ':' + v;
        first = false;
      }
      return out + '}';
    }
    case 'bigint':
      throw new TypeError('canonicalJson: a bigint is not JSON');
    default:
      return undefined; // undefined, functions, symbols: dropped, as JSON.stringify does
  }
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
  for (const key of sortedKeys(value)) {
    const v = write((value as Record<string, unknown>)[key]);
    if (v !== undefined) fields.push([key, v]);
  }
  return fields;
}

/** The canonical JSON object of fields already in canonical order. */
export function joinFields(fields: ReadonlyArray<readonly [key: string, json: string]>): string {
  let out = '{';
  for (let i = 0; i < fields.length; i++) out += (i ? ',' : '') + quoteKey(fields[i]![0]) + ':' + fields[i]![1];
  return out + '}';
}
