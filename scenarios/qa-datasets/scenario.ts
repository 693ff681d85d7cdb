import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { UnknownNameError, type Scenario } from 'agent-r1-ts';
import { createQaEnv, parseRewardOption, type QaTask } from '../multihop-qa/env.ts';
import { qaPolicies } from '../multihop-qa/policies.ts';
import { sampleTasks } from '../multihop-qa/questions.ts';
import { createCorpus, type SearchCorpus } from '../multihop-qa/search.ts';
import { createSearchTool, type QaState } from '../multihop-qa/search-tool.ts';
import { qaSummarizer } from '../multihop-qa/summarizer.ts';
import {
  DATASET_LOADERS,
  DatasetFormatError,
  parseJsonOrJsonl,
  type DatasetItem,
  type DatasetName,
} from './loaders.ts';

export const QA_DATASETS_VERSION = '1.0.0';

/**
 * The most documents one search may return here. A dataset item has only 10 (HotpotQA, 2Wiki) or
 * 20 (MuSiQue) paragraphs: with k = 10 one search would show them all and there would be no
 * multi-hop retrieval left to learn.
 */
export const DATASET_MAX_TOP_K = 5;
const datasetSearchTool = createSearchTool(DATASET_MAX_TOP_K);

const DESCRIPTIONS: Record<DatasetName, string> = {
  hotpotqa: 'HotpotQA (distractor setting; CC BY-SA 4.0): bridge and comparison questions over 10 paragraphs each',
  '2wiki':
    '2WikiMultihopQA (Apache-2.0): compositional, comparison, inference and bridge-comparison questions over 10 paragraphs each',
  musique: 'MuSiQue-Ans (CC BY 4.0): 2- to 4-hop composed questions over 20 paragraphs each',
};

const optionsSchema = z
  .object({
    data: z
      .string({ error: 'option data (the dataset file, --data PATH) is required' })
      .min(1, 'option data must name a file'),
    /** The split the file is (train/dev/test); the file's items all belong to it. */
    split: z
      .string()
      .regex(/^[\w-]+$/)
      .default('test'),
    rewards: z.string().optional(),
  })
  .strict();

interface LoadedDataset {
  hash: string;
  items: DatasetItem[];
  byId: Map<string, DatasetItem>;
}

const loaded = new Map<string, LoadedDataset>();

/** Reads and converts a dataset file (memoized per dataset, path and content). */
export function loadDataset(dataset: DatasetName, path: string): LoadedDataset {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new DatasetFormatError(`${dataset}: cannot read ${file}: ${(err as Error).message}`);
  }
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 16);
  const key = `${dataset}|${hash}`;
  let data = loaded.get(key);
  if (!data) {
    const items = DATASET_LOADERS[dataset](parseJsonOrJsonl(text, file));
    if (items.length === 0) throw new DatasetFormatError(`${dataset}: ${file} has no usable items`);
    const byId = new Map<string, DatasetItem>();
    for (const item of items) {
      if (byId.has(item.task.id))
        throw new DatasetFormatError(`${dataset}: duplicate item id ${item.task.id} in ${file}`);
      byId.set(item.task.id, item);
    }
    data = { hash, items, byId };
    loaded.set(key, data);
  }
  return data;
}

/**
 * A real multi-hop QA dataset as a scenario: each item is a task whose search corpus is its own
 * paragraphs (BM25 over them), with the supporting paragraphs as gold documents. The file is one
 * split (option `split`, default `test`).
 */
export function createDatasetScenario(
  dataset: DatasetName,
  options: { [key: string]: string },
): Scenario<QaTask, QaState> {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) throw new DatasetFormatError(`${dataset} options: ${z.prettifyError(parsed.error)}`);
  const opts = parsed.data;
  const data = loadDataset(dataset, opts.data);
  const pool = data.items.map((item) => ({ ...item.task, split: opts.split }));
  // One small index per task, built on first use; the search results have their own cache.
  const corpora = new LRUCache<string, SearchCorpus>({ max: 1024 });
  const corpusFor = (task: QaTask): SearchCorpus => {
    let corpus = corpora.get(task.id);
    if (!corpus) {
      const item = data.byId.get(task.id);
      if (!item) throw new DatasetFormatError(`${dataset}: task ${task.id} is not in this dataset file`);
      corpus = createCorpus(`${dataset}:${data.hash}:${task.id}`, item.documents);
      corpora.set(task.id, corpus);
    }
    return corpus;
  };
  const recorded: { [key: string]: string } = { data: opts.data, split: opts.split };
  if (opts.rewards !== undefined) recorded.rewards = opts.rewards;
  const poolOf = (split: string) => {
    if (split !== opts.split) throw new UnknownNameError('split', split, [opts.split]);
    return pool;
  };
  return {
    id: dataset,
    version: `${QA_DATASETS_VERSION}+data.${data.hash}`,
    description: `${DESCRIPTIONS[dataset]}; ${pool.length} items from ${opts.data} (sha256 ${data.hash}) as split ${opts.split}.`,
    splits: [opts.split],
    options: recorded,
    tasks: ({ split, seed, count }) => sampleTasks(poolOf(split), seed, count, `${dataset}:${split}`),
    taskCount: (split) => poolOf(split).length,
    tools: [datasetSearchTool],
    env: createQaEnv({ corpusFor, rewards: parseRewardOption(opts.rewards) }),
    policies: qaPolicies(corpusFor),
    episode: { maxTurns: 8, maxToolOutputChars: 4096 },
    summarizer: qaSummarizer,
  };
}
