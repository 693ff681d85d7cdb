import test from 'ava';
import fc from 'fast-check';
import { canonicalJson, inCanonicalOrder, inCanonicalOrderCopy } from '../../src/core/canonical-json.ts';
import { deepFreeze } from '../../src/core/deep-freeze.ts';

test('keys are sorted at every depth, whatever order the object was built in', (t) => {
  t.is(canonicalJson({ b: 1, a: { d: [1, { z: 0, y: 1 }], c: null } }), '{"a":{"c":null,"d":[1,{"y":1,"z":0}]},"b":1}');
  // Integer-like keys sort as strings too (JS objects would put them first).
  t.is(canonicalJson({ b: 1, '10': 2, '': 3, '2': 4 }), '{"":3,"10":2,"2":4,"b":1}');
});

test('undefined fields are dropped, non-finite numbers and -0 written as JSON writes them', (t) => {
  t.is(canonicalJson({ a: undefined, b: NaN, c: -0, d: [undefined, Infinity] }), '{"b":null,"c":0,"d":[null,null]}');
  t.is(canonicalJson(undefined), 'null');
});

test('equal values give equal bytes, and the output reads back to itself', (t) => {
  fc.assert(
    fc.property(fc.jsonValue(), (v) => {
      const s = canonicalJson(v);
      return canonicalJson(JSON.parse(s)) === s && canonicalJson(structuredClone(v)) === s;
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

/** The definition: JSON.stringify of a copy whose objects have their keys inserted in sorted order. */
function reference(value: unknown): string {
  const sorted = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    const withJson = v as { toJSON?: () => unknown };
    if (typeof withJson.toJSON === 'function') return sorted(withJson.toJSON());
    if (Array.isArray(v)) return Array.from(v, sorted); // holes become undefined
    const copy: Record<string, unknown> = Object.create(null); // so that a "__proto__" key is a field
    for (const key of Object.keys(v).sort()) copy[key] = sorted((v as Record<string, unknown>)[key]);
    return copy;
  };
  // A plain object with integer-like keys would enumerate them first: write it field by field.
  const out = (v: unknown): string | undefined => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) {
      if (Array.isArray(v)) return `[${Array.from(v, (x) => out(x) ?? 'null').join(',')}]`;
      return JSON.stringify(v);
    }
    const fields = Object.keys(v)
      .sort()
      .flatMap((k) => {
        const json = out((v as Record<string, unknown>)[k]);
        return json === undefined ? [] : [`${JSON.stringify(k)}:${json}`];
      });
    return `{${fields.join(',')}}`;
  };
  return out(sorted(value)) ?? 'null';
}

/** Any value, odd ones included: boxed values, null prototypes, sparse arrays, dates, maps. */
const oddValues = (maxKeys: number) =>
  fc.anything({
    withBoxedValues: true,
    withNullPrototype: true,
    withSparseArray: true,
    withDate: true,
    withMap: true,
    withObjectString: true,
    maxKeys,
  });

test('matches JSON.stringify of a key-sorted copy for any value, frozen or not: long key lists, odd keys, dates, boxed values, sparse arrays', (t) => {
  const anything = oddValues(24);
  fc.assert(
    fc.property(anything, (v) => {
      if (canonicalJson(v) !== reference(v)) return false;
      deepFreeze(v); // written, then remembered, then taken from memory
      return canonicalJson(v) === reference(v) && canonicalJson(v) === reference(v);
    }),
    { numRuns: 3000 },
  );
  t.pass();
});

test('a frozen value written again gives its JSON as it is now: a mutable object inside a frozen one is written anew', (t) => {
  const inner = { n: 1 };
  const shell = Object.freeze({ inner, list: Object.freeze([1, 2]) });
  t.is(canonicalJson(shell), '{"inner":{"n":1},"list":[1,2]}');
  inner.n = 2;
  t.is(canonicalJson(shell), '{"inner":{"n":2},"list":[1,2]}');
  const date = Object.freeze(new Date(0));
  const holder = Object.freeze({ at: date });
  t.is(canonicalJson(holder), '{"at":"1970-01-01T00:00:00.000Z"}');
  date.setTime(1000); // freezing a Date does not fix its time
  t.is(canonicalJson(holder), '{"at":"1970-01-01T00:00:01.000Z"}');
});

test('a value frozen through (deepFreeze) is written the same inside any record, and inside mutable objects', (t) => {
  const shared = deepFreeze({ b: [{ y: 1, x: 'é"' }], a: null });
  const first = canonicalJson({ z: shared, k: [shared] });
  t.is(first, '{"k":[{"a":null,"b":[{"x":"é\\"","y":1}]}],"z":{"a":null,"b":[{"x":"é\\"","y":1}]}}');
  t.is(canonicalJson({ k: [shared], z: shared }), first);
  t.throws(
    () => {
      (shared.b[0] as { y: number }).y = 2;
    },
    { instanceOf: TypeError },
  );
});

test('a value already in canonical order is written by JSON.stringify, with the same bytes as the writer, for any value', (t) => {
  const anything = oddValues(12);
  let fast = 0;
  fc.assert(
    fc.property(anything, (v) => {
      // Put in canonical order where it can be (plain objects, non-integer keys), then written either way.
      const ordered = inCanonicalOrderCopy(v);
      if (typeof ordered === 'object' && ordered !== null && inCanonicalOrder(ordered)) fast++;
      return canonicalJson(ordered) === reference(v) && canonicalJson(ordered) === canonicalJson(v);
    }),
    { numRuns: 3000 },
  );
  t.true(fast > 100, `only ${fast} values took the JSON.stringify path`);
});

test('in canonical order: plain objects with sorted keys and arrays only; anything JSON.stringify would write otherwise is not', (t) => {
  t.true(inCanonicalOrder({ a: 1, b: { c: [1, { d: null, e: 'x' }] } }));
  t.true(inCanonicalOrder(Object.assign(Object.create(null), { a: 1, b: 2 })));
  t.true(inCanonicalOrder([]));
  t.false(inCanonicalOrder({ b: 1, a: 2 }));
  t.false(inCanonicalOrder({ a: [{ y: 1, x: 2 }] }), 'unsorted deep inside');
  t.false(inCanonicalOrder({ '10': 1, '9': 2 }), 'integer keys enumerate in numeric order, not sorted as strings');
  t.false(inCanonicalOrder({ a: new Date(0) }), 'a Date writes its toJSON');
  t.false(inCanonicalOrder({ toJSON: () => 1 }));
  t.false(inCanonicalOrder({ a: Object(1) }), 'a boxed number');
  t.false(inCanonicalOrder({ a: 1n }), 'a bigint');
  t.false(inCanonicalOrder(new Map()));
  t.throws(() => canonicalJson({ a: 1n }), { instanceOf: TypeError }, 'a bigint still throws');
});

test('a canonical-order copy sorts plain objects at every depth, keeps what is in order as it is, and keeps frozen levels frozen', (t) => {
  const inOrder = { a: 1, b: [{ c: 2 }] };
  t.is(inCanonicalOrderCopy(inOrder), inOrder, 'nothing copied');
  const shared = deepFreeze({ z: 1, y: { b: 2, a: 1 } });
  const copy = inCanonicalOrderCopy({ k: shared, date: new Date(0) });
  t.deepEqual(Object.keys(copy), ['date', 'k']);
  t.deepEqual(Object.keys(copy.k), ['y', 'z']);
  t.deepEqual(Object.keys(copy.k.y), ['a', 'b']);
  t.true(Object.isFrozen(copy.k) && Object.isFrozen(copy.k.y));
  t.true(copy.date instanceof Date, 'not a plain object: kept');
  const proto = JSON.parse('{"__proto__": {"x": 1}, "a": 2}');
  const copied = inCanonicalOrderCopy({ z: 0, ...proto });
  t.is(canonicalJson(copied), '{"__proto__":{"x":1},"a":2,"z":0}', 'a "__proto__" key stays a field');
  t.is(Object.getPrototypeOf(copied), Object.prototype);
});

test('a value frozen through is copied into canonical order once; a frozen one holding a mutable object is copied anew', (t) => {
  const shared = deepFreeze({ results: [{ title: 'T', id: 'd1', text: 'x' }], query: 'q' });
  const first = inCanonicalOrderCopy(shared);
  t.is(inCanonicalOrderCopy(shared), first, 'the same copy: nothing in it can change');
  t.is(canonicalJson(first), '{"query":"q","results":[{"id":"d1","text":"x","title":"T"}]}');
  const inner = { b: 1, a: 1 };
  const shell = Object.freeze({ z: inner, y: 0 });
  t.is(canonicalJson(inCanonicalOrderCopy(shell)), '{"y":0,"z":{"a":1,"b":1}}');
  inner.a = 2;
  t.is(canonicalJson(inCanonicalOrderCopy(shell)), '{"y":0,"z":{"a":2,"b":1}}');
});
