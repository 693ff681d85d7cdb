import test from 'ava';
import fc from 'fast-check';
import { canonicalJson } from '../../src/core/canonical-json.ts';

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
