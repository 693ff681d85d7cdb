import test from 'ava';
import { exactMatch, f1Detail, f1Score, normalizeAnswer, qaScores } from '../../src/env/qa-metrics.ts';

// [prediction, gold, normalize(prediction), EM, F1]; the expected values were computed with the
// official hotpot_evaluate_v1.py functions under Python 3 (and a 5,000-pair random fuzz agreed).
const CASES: Array<[string, string, string, number, number]> = [
  ['The Theatre', 'theatre', 'theatre', 1, 1], // "theatre" keeps its "the"
  ['the-man', 'theman', 'theman', 1, 1], // punctuation is deleted, not replaced by a space
  ['A Man, a plan', 'man plan', 'man plan', 1, 1],
  ['Yes', 'yes.', 'yes', 1, 1],
  ['yes', 'no', 'yes', 0, 0],
  ['no answer', 'noanswer', 'no answer', 0, 0],
  ['noanswer', 'unknown', 'noanswer', 0, 0],
  ['Bob the builder', 'bob builder', 'bob builder', 1, 1],
  ['Ünter the Straße', 'ünter straße', 'ünter straße', 1, 1],
  ['éthe the', 'éthe', 'éthe', 1, 1], // Unicode-aware \b: "éthe" is one word
  ['the_a', 'a', 'thea', 0, 0], // "_" is punctuation, removed before the articles
  ['x\u00a0the\u2003y', 'x y', 'x y', 1, 1],
  ['', '', '', 1, 0], // EM 1 but F1 0, as in the official script
  ['the', '', '', 1, 0],
  ['1the 2', '1the 2', '1the 2', 1, 1],
  ['Paris, France', 'France', 'paris france', 0, 2 / 3],
  ['new york new york', 'new york', 'new york new york', 0, 2 / 3],
  ['x\u001ey', 'x y', 'x y', 1, 1], // Python's split() treats \x1e as whitespace
  ['x\ufeffy', 'x y', 'x\ufeffy', 0, 0], // …and U+FEFF not
  ['Über the bridge', 'uber bridge', 'über bridge', 0, 0.5],
  ['an apple an', 'apple', 'apple', 1, 1],
  ['don’t', 'dont', 'don’t', 0, 0], // only ASCII punctuation is removed
  ['2 March 1900', 'March 2, 1900', '2 march 1900', 0, 1],
  ['the\u0301', '\u0301', '\u0301', 1, 1], // a combining mark is not a word character
];

for (const [pred, gold, norm, em, f1] of CASES) {
  test(`metrics: ${JSON.stringify(pred)} vs ${JSON.stringify(gold)}`, (t) => {
    t.is(normalizeAnswer(pred), norm);
    t.is(exactMatch(pred, gold), em);
    t.true(Math.abs(f1Score(pred, gold) - f1) < 1e-12, `f1 ${f1Score(pred, gold)} != ${f1}`);
  });
}

test('f1Detail gives precision and recall', (t) => {
  t.deepEqual(f1Detail('the big red dog', 'red dog'), { f1: 0.8, precision: 2 / 3, recall: 1 });
});

test('qaScores takes the best reference, and 0 for none', (t) => {
  t.deepEqual(qaScores('leading actress', ['for Best Actress in Ondine', 'leading actress']), { em: 1, f1: 1 });
  t.deepEqual(qaScores('x', []), { em: 0, f1: 0 });
});
