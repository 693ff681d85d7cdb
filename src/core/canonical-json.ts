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
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
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
      let out = '{';
      let first = true;
      for (const key of Object.keys(value).sort()) {
        const v = write((value as Record<string, unknown>)[key]);
        if (v === undefined) continue;
        out += (first ? '' : ',') + JSON.stringify(key) + ':' + v;
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

/** An object's fields in canonical order, each as [key, canonical JSON of its value] (undefined ones dropped). */
export function canonicalFields(value: object): Array<[key: string, json: string]> {
  const fields: Array<[string, string]> = [];
  for (const key of Object.keys(value).sort()) {
    const v = write((value as Record<string, unknown>)[key]);
    if (v !== undefined) fields.push([key, v]);
  }
  return fields;
}

/** The canonical JSON object of fields already in canonical order. */
export function joinFields(fields: ReadonlyArray<readonly [key: string, json: string]>): string {
  let out = '{';
  for (let i = 0; i < fields.length; i++) out += (i ? ',' : '') + JSON.stringify(fields[i]![0]) + ':' + fields[i]![1];
  return out + '}';
}
