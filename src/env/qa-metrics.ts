/**
 * Answer metrics exactly as HotpotQA's official evaluation (`hotpot_evaluate_v1.py`) computes them,
 * so figures on the real datasets are comparable with published ones:
 *
 *   normalize = white_space_fix(remove_articles(remove_punc(lower(s))))
 *
 * - lower: `str.lower()`;
 * - remove_punc: delete (not replace) every character of Python's `string.punctuation` (ASCII only);
 * - remove_articles: `re.sub(r'\b(a|an|the)\b', ' ', text)`; Python 3's `\b` is Unicode-aware, so the
 *   word characters here are letters, numbers and `_` of any script (JS's `\b` is ASCII-only);
 * - white_space_fix: `' '.join(text.split())`, with Python's notion of whitespace.
 *
 * EM: the normalized strings are equal. F1: token overlap of the normalized strings, except that a
 * yes / no / noanswer on either side that differs from the other side scores 0.
 */

const PUNCTUATION = new Set('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~');

// Python's str.split() whitespace (str.isspace): includes the ASCII separators \x1c-\x1f and NEL,
// excludes U+FEFF (which JS's \s includes).
// biome-ignore lint/suspicious/noControlCharactersInRegex: Python counts \x1c-\x1f as whitespace
const PY_WHITESPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

// `\b(a|an|the)\b` with Unicode word characters (Python's \w: alphanumerics of any script, and _).
const ARTICLES = /(?<![\p{L}\p{N}_])(?:a|an|the)(?![\p{L}\p{N}_])/gu;

const SPECIAL = new Set(['yes', 'no', 'noanswer']);

function splitWords(text: string): string[] {
  return text.split(PY_WHITESPACE).filter((w) => w.length > 0);
}

/** HotpotQA's `normalize_answer`. */
export function normalizeAnswer(text: string): string {
  const lower = text.toLowerCase();
  let noPunc = '';
  for (const ch of lower) if (!PUNCTUATION.has(ch)) noPunc += ch;
  return splitWords(noPunc.replace(ARTICLES, ' ')).join(' ');
}

/** HotpotQA's `exact_match_score`: 1 when the normalized strings are equal, else 0. */
export function exactMatch(prediction: string, groundTruth: string): number {
  return normalizeAnswer(prediction) === normalizeAnswer(groundTruth) ? 1 : 0;
}

export interface F1Detail {
  f1: number;
  precision: number;
  recall: number;
}

/** HotpotQA's `f1_score`, with precision and recall. */
export function f1Detail(prediction: string, groundTruth: string): F1Detail {
  const zero: F1Detail = { f1: 0, precision: 0, recall: 0 };
  const pred = normalizeAnswer(prediction);
  const gold = normalizeAnswer(groundTruth);
  if (SPECIAL.has(pred) && pred !== gold) return zero;
  if (SPECIAL.has(gold) && pred !== gold) return zero;
  const predTokens = splitWords(pred);
  const goldTokens = splitWords(gold);
  const goldCounts = new Map<string, number>();
  for (const t of goldTokens) goldCounts.set(t, (goldCounts.get(t) ?? 0) + 1);
  let same = 0;
  for (const t of predTokens) {
    const left = goldCounts.get(t) ?? 0;
    if (left > 0) {
      same++;
      goldCounts.set(t, left - 1);
    }
  }
  if (same === 0) return zero;
  const precision = same / predTokens.length;
  const recall = same / goldTokens.length;
  return { f1: (2 * precision * recall) / (precision + recall), precision, recall };
}

/** HotpotQA's `f1_score` (the F1 part). */
export function f1Score(prediction: string, groundTruth: string): number {
  return f1Detail(prediction, groundTruth).f1;
}

/**
 * EM and F1 against several accepted answers (MuSiQue's answer + aliases), each the maximum over
 * the references, as the SQuAD/MuSiQue evaluators do. An empty reference list scores 0.
 */
export function qaScores(prediction: string, references: readonly string[]): { em: number; f1: number } {
  let em = 0;
  let f1 = 0;
  for (const ref of references) {
    em = Math.max(em, exactMatch(prediction, ref));
    f1 = Math.max(f1, f1Score(prediction, ref));
  }
  return { em, f1 };
}
