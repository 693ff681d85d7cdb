import { z } from 'zod';
import { AgentR1Error } from 'agent-r1-ts';
import type { QaTask } from '../multihop-qa/env.ts';
import type { QaDocument } from '../multihop-qa/search.ts';

/** One dataset item as the QA environment uses it: the task, and the paragraphs it searches. */
export interface DatasetItem {
  task: QaTask;
  documents: QaDocument[];
}

export type DatasetName = 'hotpotqa' | '2wiki' | 'musique';

/** A dataset file that cannot be read as the dataset it claims to be. */
export class DatasetFormatError extends AgentR1Error {}

const paragraphPairs = z.array(z.tuple([z.string(), z.array(z.string())]));
const supportingFacts = z.array(z.tuple([z.string(), z.number().int()]));

/** HotpotQA, distractor setting (hotpot_train_v1.1.json / hotpot_dev_distractor_v1.json). */
const hotpotItem = z.looseObject({
  _id: z.string(),
  question: z.string(),
  answer: z.string(),
  type: z.string().optional(),
  level: z.string().optional(),
  supporting_facts: supportingFacts,
  context: paragraphPairs,
});

/** 2WikiMultihopQA (dev.json / train.json). */
const twoWikiItem = z.looseObject({
  _id: z.string(),
  question: z.string(),
  answer: z.string(),
  type: z.string().optional(),
  supporting_facts: supportingFacts,
  context: paragraphPairs,
  evidences: z.array(z.array(z.string())).optional(),
});

/** MuSiQue-Ans (musique_ans_v1.0_dev.jsonl and friends). */
const musiqueItem = z.looseObject({
  id: z.string(),
  question: z.string(),
  answer: z.string(),
  answer_aliases: z.array(z.string()).optional(),
  answerable: z.boolean().optional(),
  paragraphs: z.array(
    z.looseObject({
      idx: z.number().int(),
      title: z.string(),
      paragraph_text: z.string(),
      is_supporting: z.boolean().optional(),
    }),
  ),
  question_decomposition: z
    .array(
      z.looseObject({ question: z.string(), answer: z.string(), paragraph_support_idx: z.number().int().nullable() }),
    )
    .min(1),
});

/** The items of a JSON array file or a JSONL file (one JSON object per line). */
export function parseJsonOrJsonl(text: string, source: string): unknown[] {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('[')) {
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch (err) {
      throw new DatasetFormatError(`${source}: not valid JSON: ${(err as Error).message}`);
    }
    return value as unknown[];
  }
  const items: unknown[] = [];
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    try {
      items.push(JSON.parse(line));
    } catch (err) {
      throw new DatasetFormatError(`${source}: line ${i + 1} is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (items.length === 0) throw new DatasetFormatError(`${source}: no items (expected a JSON array or JSONL lines)`);
  return items;
}

function check<T>(schema: z.ZodType<T>, item: unknown, dataset: string, index: number): T {
  const parsed = schema.safeParse(item);
  if (!parsed.success) {
    throw new DatasetFormatError(`${dataset} item ${index}: not a ${dataset} item: ${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}

/** Titles of the supporting facts, each once, in the order the facts name them. */
function supportingTitles(facts: ReadonlyArray<readonly [string, number]>): string[] {
  return [...new Set(facts.map(([title]) => title))];
}

/** Paragraph documents from [title, sentences] pairs; gold = the first paragraph of each supporting title. */
function fromContext(
  dataset: DatasetName,
  id: string,
  context: ReadonlyArray<readonly [string, readonly string[]]>,
  facts: ReadonlyArray<readonly [string, number]>,
  joiner: string,
): { documents: QaDocument[]; gold: string[]; chain: string[] } {
  const documents = context.map(([title, sentences], i) => ({
    id: `p${i}`,
    title,
    text: sentences.join(joiner).trim(),
  }));
  const chain = supportingTitles(facts);
  const gold = chain.map((title) => {
    const doc = documents.find((d) => d.title === title);
    if (!doc)
      throw new DatasetFormatError(`${dataset} item ${id}: supporting fact title "${title}" is not in its context`);
    return doc.id;
  });
  return { documents, gold, chain };
}

export function hotpotqaItems(raw: readonly unknown[]): DatasetItem[] {
  return raw.map((value, i) => {
    const item = check(hotpotItem, value, 'hotpotqa', i);
    // HotpotQA sentences carry their own leading spaces: joining with '' restores the paragraph.
    const { documents, gold, chain } = fromContext('hotpotqa', item._id, item.context, item.supporting_facts, '');
    return {
      documents,
      task: {
        id: `hotpotqa:${item._id}`,
        split: 'test',
        question: item.question,
        type: item.type ?? 'unknown',
        answer: item.answer,
        meta: {
          gold,
          queries: chain,
          hops: gold.length,
          answers: [item.answer],
          chain,
          ...(item.level ? { level: item.level } : {}),
        },
      },
    };
  });
}

export function twoWikiItems(raw: readonly unknown[]): DatasetItem[] {
  return raw.map((value, i) => {
    const item = check(twoWikiItem, value, '2wiki', i);
    const { documents, gold, chain } = fromContext('2wiki', item._id, item.context, item.supporting_facts, ' ');
    return {
      documents,
      task: {
        id: `2wiki:${item._id}`,
        split: 'test',
        question: item.question,
        type: item.type ?? 'unknown',
        answer: item.answer,
        meta: { gold, queries: chain, hops: gold.length, answers: [item.answer], chain },
      },
    };
  });
}

/**
 * MuSiQue: the chain is the question decomposition; each step's query is its sub-question with
 * "#k" replaced by step k's answer, prefixed by the supporting paragraph's title. Unanswerable
 * items (MuSiQue-Full) have no gold chain and are skipped.
 */
export function musiqueItems(raw: readonly unknown[]): DatasetItem[] {
  const out: DatasetItem[] = [];
  raw.forEach((value, i) => {
    const item = check(musiqueItem, value, 'musique', i);
    if (item.answerable === false) return;
    const documents = item.paragraphs.map((p) => ({ id: `p${p.idx}`, title: p.title, text: p.paragraph_text }));
    const steps = item.question_decomposition;
    const answers = steps.map((s) => s.answer);
    const gold: string[] = [];
    const queries: string[] = [];
    const chain: string[] = [];
    for (const step of steps) {
      const doc = documents.find((d) => d.id === `p${step.paragraph_support_idx}`);
      if (!doc)
        throw new DatasetFormatError(
          `musique item ${item.id}: paragraph_support_idx ${step.paragraph_support_idx} is not a paragraph`,
        );
      const sub = step.question.replace(/#(\d+)/g, (m, k: string) => answers[Number(k) - 1] ?? m);
      if (!gold.includes(doc.id)) gold.push(doc.id);
      queries.push(`${doc.title} ${sub}`);
      chain.push(doc.title);
    }
    out.push({
      documents,
      task: {
        id: `musique:${item.id}`,
        split: 'test',
        question: item.question,
        type: `${steps.length}-hop`,
        answer: item.answer,
        meta: { gold, queries, hops: steps.length, answers: [item.answer, ...(item.answer_aliases ?? [])], chain },
      },
    });
  });
  return out;
}

export const DATASET_LOADERS: Record<DatasetName, (raw: readonly unknown[]) => DatasetItem[]> = {
  hotpotqa: hotpotqaItems,
  '2wiki': twoWikiItems,
  musique: musiqueItems,
};
