import test from 'ava';
import fc from 'fast-check';
import {
  Tokenizer,
  TokenizerError,
  trainTokenizer,
  SPECIAL_TOKENS,
  wtf8Decode,
  wtf8Encode,
} from '../../../src/policy/tfjs/tokenizer.ts';

const corpus = [
  'Ava has 12 apples, gets 7 more and then gives away 5. How many apples does Ava have now?',
  '<tool_call>{"name": "calculate", "arguments": {"expression": "12 + 7 - 5"}}</tool_call>',
  '<answer>14</answer>',
  'Solve the word problem. Use the calculate tool for the arithmetic, then give the number as the answer.',
];
const tok = trainTokenizer(corpus.concat(corpus, corpus), { vocabSize: SPECIAL_TOKENS.length + 256 + 80 });

test('round-trips arbitrary strings exactly (any code points, lone surrogates included)', (t) => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ unit: 'binary', maxLength: 60 }),
        fc.string({ unit: 'grapheme', maxLength: 60 }),
        fc.string({ maxLength: 60 }),
      ),
      (s) => {
        const ids = tok.encode(s);
        return tok.decode(ids) === s && ids.every((id) => id >= 0 && id < tok.vocabSize);
      },
    ),
    { numRuns: 1500 },
  );
  for (const s of ['\ud800', 'a\udc00b', '\ud83d\ude00', '\udfff\ud800', '', '<|eos|><tool_call>x</answer>'])
    t.is(tok.decode(tok.encode(s)), s);
});

test('markup tags are single special tokens; control tokens are never produced from text', (t) => {
  const ids = tok.encode('<tool_call>{}</tool_call><answer>1</answer>');
  t.is(ids[0], tok.special('<tool_call>'));
  t.true(ids.includes(tok.special('</tool_call>')));
  t.is(ids.at(-1), tok.special('</answer>'));
  t.false(tok.encode('<|eos|><|end|>').includes(tok.eos));
  t.is(tok.decode([tok.eos, tok.special('<|end|>')]), '');
});

test('training compresses the corpus, is deterministic, and survives JSON', (t) => {
  const text = corpus[0]!;
  t.true(tok.encode(text).length < new TextEncoder().encode(text).length / 2);
  const again = trainTokenizer(corpus.concat(corpus, corpus), { vocabSize: tok.vocabSize });
  t.deepEqual(again.toJSON(), tok.toJSON());
  const loaded = new Tokenizer(JSON.parse(JSON.stringify(tok.toJSON())));
  t.deepEqual(loaded.encode(text), tok.encode(text));
  // Digits are single tokens, so numbers are copied digit by digit.
  t.is(tok.encode('1234').length, 4);
});

test('wtf8 matches UTF-8 on well-formed text and never throws on bad bytes', (t) => {
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (s) =>
      Buffer.from(wtf8Encode(s)).equals(Buffer.from(s, 'utf8')),
    ),
  );
  t.is(wtf8Decode(Uint8Array.of(0xff, 0x41, 0xe2, 0x82)), '\ufffdA\ufffd\ufffd');
});

test('bad input gets clear errors', (t) => {
  t.throws(() => trainTokenizer(corpus, { vocabSize: 100 }), { instanceOf: TokenizerError, message: /vocabSize/ });
  t.throws(() => new Tokenizer({ kind: 'wordpiece' } as never), { instanceOf: TokenizerError });
  t.throws(() => new Tokenizer({ kind: 'byte-bpe', version: 1, specials: ['<a>'], merges: [[5, 999]] }), {
    instanceOf: TokenizerError,
    message: /merge 0/,
  });
  t.throws(() => tok.decode([tok.vocabSize]), { instanceOf: TokenizerError, message: /outside the vocabulary/ });
  t.throws(() => tok.special('<nope>'), { instanceOf: TokenizerError });
  t.throws(() => tok.encode(42 as never), { instanceOf: TokenizerError });
});

test('words chunking: a word is the same tokens after a space, a quote, a newline or a tag, so it can be copied', (t) => {
  const texts = [
    'She was born in Ushan in 1898.',
    '[1] Eva Moreau\nEva Moreau is a novelist.',
    '{"query":"Eva Moreau"}',
    '<answer>Ushan</answer>',
  ];
  const words = trainTokenizer(texts.concat(texts), { vocabSize: SPECIAL_TOKENS.length + 256 + 60, chunking: 'words' });
  t.is(words.chunking, 'words');
  const idsOf = (s: string) => words.encode(s);
  const ushan = idsOf('Ushan');
  const contains = (hay: number[], needle: number[]) => hay.some((_, i) => needle.every((x, j) => hay[i + j] === x));
  for (const s of ['born in Ushan in', '<answer>Ushan</answer>', '"Ushan"', '\nUshan.'])
    t.true(contains(idsOf(s), ushan), s);
  // The first version's chunking keeps the leading space with the word: " Ushan" and "Ushan" differ.
  const legacy = trainTokenizer(texts.concat(texts), { vocabSize: SPECIAL_TOKENS.length + 256 + 60 });
  t.is(legacy.chunking, 'space-words');
  t.false(contains(legacy.encode('born in Ushan in'), legacy.encode('Ushan')));
  // A tokenizer saved without a chunking is the first version's.
  const { chunking: _, ...old } = legacy.toJSON();
  t.is(new Tokenizer(old as never).chunking, 'space-words');
  t.is(words.decode(idsOf(texts.join(' '))), texts.join(' '));
  t.throws(() => new Tokenizer({ ...words.toJSON(), chunking: 'bytes' as never }), {
    instanceOf: TokenizerError,
    message: /unknown chunking "bytes"/,
  });
  t.throws(() => trainTokenizer(texts, { vocabSize: 400, chunking: 'x' as never }), {
    instanceOf: TokenizerError,
    message: /unknown chunking/,
  });
});
