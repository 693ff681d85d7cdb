import { z } from 'zod';
import {
  qaScores,
  type Json,
  type Message,
  type StepResult,
  type Task,
  type ToolResult,
  type TurnRecord,
  type ToolEnv,
  type OpenAITool,
} from 'agent-r1-ts';
import { DEFAULT_TOP_K, type SearchCorpus } from './search.ts';
import type { QaState, SearchOutput } from './search-tool.ts';

/** What a QA task carries in `meta` (plain JSON). */
export interface QaMeta {
  /** Ids of the gold supporting documents, in the order the reasoning chain visits them. */
  gold: string[];
  /** The expert's search plan: one query per hop, in order. */
  queries: string[];
  /** Hops of the reasoning chain (documents that must be read). */
  hops: number;
  /** Every accepted answer (answer + aliases); defaults to [task.answer]. */
  answers?: string[];
  /** Titles along the chain, for people reading records. */
  chain?: string[];
  /** A plausible wrong answer of the right kind (a distractor's value), for imperfect demonstrations. */
  distractor?: string;
  [key: string]: Json | undefined;
}

export type QaTask = Task & { answer: string; meta: QaMeta };

/**
 * Every reward weight of the QA scenarios, in one place. Total episode reward = outcome + the sum
 * of the process terms.
 *
 * - outcome = `exactMatch` × EM + `f1` × F1 (EM/F1 as HotpotQA's evaluation, best over accepted answers);
 *   an episode without an answer scores EM = F1 = 0;
 * - `wellFormedCall`: once per turn whose tool calls were all well formed (known tool, valid
 *   arguments) — per turn, not per call, so writing many calls in one turn earns nothing more;
 * - `goldDocument`: for each gold supporting document, the first time a search returns it;
 * - `repeatedSearch` (a penalty): for each search identical to an earlier one in the episode
 *   (same query up to case and spacing, same k);
 * - `malformedAction` (a penalty): once per turn whose text is not a valid action, or that calls an
 *   unknown tool or passes invalid arguments. A tool that fails or times out is not the agent's fault.
 */
export interface QaRewardConfig {
  exactMatch: number;
  f1: number;
  wellFormedCall: number;
  goldDocument: number;
  repeatedSearch: number;
  malformedAction: number;
}

export const DEFAULT_QA_REWARDS: Readonly<QaRewardConfig> = Object.freeze({
  exactMatch: 1,
  f1: 0,
  wellFormedCall: 0.05,
  goldDocument: 0.1,
  repeatedSearch: -0.1,
  malformedAction: -0.2,
});

const rewardOverrides = z
  .object({
    exactMatch: z.number(),
    f1: z.number(),
    wellFormedCall: z.number(),
    goldDocument: z.number(),
    repeatedSearch: z.number(),
    malformedAction: z.number(),
  })
  .partial()
  .strict();

/** Reads the `rewards` scenario option: a JSON object overriding some of the default weights. */
export function parseRewardOption(text: string | undefined): QaRewardConfig {
  if (text === undefined || text === '') return { ...DEFAULT_QA_REWARDS };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`option rewards must be a JSON object of weights: ${(err as Error).message}`);
  }
  const parsed = rewardOverrides.safeParse(raw);
  if (!parsed.success) throw new Error(`option rewards: ${z.prettifyError(parsed.error)}`);
  return { ...DEFAULT_QA_REWARDS, ...parsed.data };
}

/** The answers a task accepts. */
export function acceptedAnswers(task: QaTask): string[] {
  return task.meta.answers && task.meta.answers.length > 0 ? task.meta.answers : [task.answer];
}

/** Two searches are the same search when their queries differ only in case and spacing and k is equal. */
export function searchKey(query: string, k: number): string {
  return `${k}\u0000${query.toLowerCase().split(/\s+/).filter(Boolean).join(' ')}`;
}

const ACTION_HELP =
  'Search with <tool_call>{"name": "search", "arguments": {"query": "..."}}</tool_call>, ' +
  'or give the final answer with <answer>...</answer>.';

/** `search(query: string, k?: integer)` from a tool's JSON schema. */
function signature(t: OpenAITool): string {
  const schema = t.function.parameters as { properties?: Record<string, { type?: string }>; required?: string[] };
  const required = new Set(schema.required ?? []);
  const params = Object.entries(schema.properties ?? {}).map(
    ([name, p]) => `${name}${required.has(name) ? '' : '?'}: ${p.type ?? 'any'}`,
  );
  return `${t.function.name}(${params.join(', ')})`;
}

export function qaPrompt(task: Task, tools: readonly OpenAITool[]): Message[] {
  const toolLines = tools.map((t) => `- ${signature(t)}: ${t.function.description}`).join('\n');
  const system =
    'Answer the question. Search for the facts you need, one step at a time, then answer with a short phrase.\n' +
    `Tools:\n${toolLines}\n` +
    `${ACTION_HELP} Call one or more tools per turn.`;
  return [
    { content: system, role: 'system' },
    { content: task.question, role: 'user' },
  ];
}

/** A search result as the agent reads it. */
export function renderSearch(output: SearchOutput): string {
  if (output.results.length === 0) return `No results for "${output.query}".`;
  return output.results.map((r, i) => `[${i + 1}] ${r.title}\n${r.text}`).join('\n');
}

function isSearchOutput(data: Json | undefined): data is Json & SearchOutput {
  return (
    typeof data === 'object' &&
    data !== null &&
    !Array.isArray(data) &&
    Array.isArray((data as { results?: unknown }).results)
  );
}

function earlier(history: readonly TurnRecord[], field: 'retrieved' | 'searches' | 'goldFound'): Set<string> {
  const seen = new Set<string>();
  for (const turn of history) {
    const values = turn.info?.[field];
    if (Array.isArray(values)) for (const v of values) if (typeof v === 'string') seen.add(v);
  }
  return seen;
}

const MALFORMED_KINDS = new Set(['unknown_tool', 'bad_arguments']);

/**
 * The process reward of one turn, and the facts it rests on (kept in the turn's info so the next
 * turns, replay, and people can see them).
 */
export function judgeTurn(
  task: QaTask,
  action: { kind: string; error?: string },
  results: readonly ToolResult[],
  history: readonly TurnRecord[],
  weights: QaRewardConfig,
): StepResult {
  if (action.kind === 'answer') return { observation: null, reward: 0, done: true, info: { answered: true } };
  if (action.kind !== 'tool_calls') {
    const why = action.error ?? 'the action is neither a tool call nor an answer';
    return {
      observation: `Invalid action: ${why}. ${ACTION_HELP}`,
      reward: weights.malformedAction,
      done: false,
      info: { malformed: true, rewards: { malformedAction: weights.malformedAction } },
    };
  }

  const seenSearches = earlier(history, 'searches');
  const seenDocs = earlier(history, 'retrieved');
  const gold = new Set(task.meta.gold);
  const parts: string[] = [];
  const searches: string[] = [];
  const retrieved: string[] = [];
  const goldFound: string[] = [];
  let repeated = 0;
  let malformed = false;

  for (const result of results) {
    if (!result.ok) {
      if (result.error && MALFORMED_KINDS.has(result.error.kind)) malformed = true;
      parts.push(`Error: ${result.content}`);
      continue;
    }
    if (!isSearchOutput(result.data)) {
      parts.push(result.content);
      continue;
    }
    const out = result.data;
    const key = searchKey(out.query, out.k ?? DEFAULT_TOP_K);
    if (seenSearches.has(key)) repeated++;
    seenSearches.add(key);
    searches.push(key);
    for (const hit of out.results) {
      if (!seenDocs.has(hit.id)) {
        seenDocs.add(hit.id);
        retrieved.push(hit.id);
        if (gold.has(hit.id)) goldFound.push(hit.id);
      }
    }
    parts.push(renderSearch(out));
  }

  const rewards: { [key: string]: number } = {};
  if (results.length === 0 || malformed) rewards.malformedAction = weights.malformedAction;
  else rewards.wellFormedCall = weights.wellFormedCall;
  if (goldFound.length > 0) rewards.goldDocument = weights.goldDocument * goldFound.length;
  if (repeated > 0) rewards.repeatedSearch = weights.repeatedSearch * repeated;
  const reward = Object.values(rewards).reduce((a, b) => a + b, 0);
  // The info's fields in canonical (sorted) order, so that the record takes it as it is (the
  // rewards' own order is the order they are summed in, which the reward's last bit depends on).
  const sortedRewards: { [key: string]: number } = {};
  for (const key of Object.keys(rewards).sort()) sortedRewards[key] = rewards[key]!;
  return {
    observation: parts.length > 0 ? parts.join('\n\n') : `No tool was called. ${ACTION_HELP}`,
    reward,
    done: false,
    info: { goldFound, repeatedSearches: repeated, retrieved, rewards: sortedRewards, searches },
  };
}

/**
 * The share of the gold supporting documents the agent's searches returned: with EM it tells a
 * search failure (recall < 1) from a reading failure (recall 1, wrong answer). Not a reward.
 */
export function goldRecall(task: QaTask, history: readonly TurnRecord[]): number {
  if (task.meta.gold.length === 0) return 0;
  const found = earlier(history, 'goldFound');
  return task.meta.gold.filter((g) => found.has(g)).length / task.meta.gold.length;
}

/** The most documents the state card lists: the newest ones, so a card's size does not grow with the episode. */
export const CARD_DOCUMENTS = 6;

/**
 * The state card: the searches made so far and the newest documents they found (each once), in
 * place of the transcript, so that an agent that searched many times still sees what it learned.
 */
export function qaCard(history: readonly TurnRecord[]): string {
  const searches: string[] = [];
  const documents = new Map<string, string>();
  for (const turn of history) {
    for (const result of turn.results) {
      if (!result.ok || !isSearchOutput(result.data)) continue;
      searches.push(result.data.query);
      for (const hit of result.data.results) {
        documents.delete(hit.id); // a document found again moves to the end: it is among the newest
        documents.set(hit.id, `${hit.title}\n${hit.text}`);
      }
    }
  }
  const newest = [...documents.values()].slice(-CARD_DOCUMENTS);
  return [
    `Searches so far (${searches.length}): ${searches.length > 0 ? searches.slice(-CARD_DOCUMENTS).join('; ') : 'none'}.`,
    ...(newest.length > 0
      ? ['Documents found:', ...newest.map((d, i) => `[${i + 1}] ${d}`)]
      : ['No documents found yet.']),
  ].join('\n');
}

export interface QaEnvOptions {
  /** The corpus a task searches: the world's (one for all tasks), or the task's own paragraphs. */
  corpusFor(task: QaTask): SearchCorpus;
  rewards?: QaRewardConfig;
}

export function createQaEnv(options: QaEnvOptions): ToolEnv<QaTask, QaState> {
  const weights = options.rewards ?? { ...DEFAULT_QA_REWARDS };
  return {
    init: (task) => ({ corpus: options.corpusFor(task) }),
    prompt: qaPrompt,
    step: ({ task, action, results, history }) => judgeTurn(task, action, results, history, weights),
    card: ({ history }) => qaCard(history),
    outcome({ task, answer, history }) {
      const { em, f1 } = answer === null ? { em: 0, f1: 0 } : qaScores(answer, acceptedAnswers(task));
      return {
        metrics: { em, f1, recall: goldRecall(task, history) },
        reward: weights.exactMatch * em + weights.f1 * f1,
        success: em === 1,
      };
    },
  };
}
