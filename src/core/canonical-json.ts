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
      const keys = Object.keys(value).sort();
      let out = '{';
      let first = true;
      for (const key of keys) {
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
