import { z } from 'zod';
import type { EpisodeFilter, EpisodeIndex, EpisodeSummary, Facets } from '../episode-index.ts';
import { ViewRequestError } from '../errors.ts';
import { fmtNumber, html, type Html } from '../html.ts';
import type { Chart } from '../charts.ts';
import type { EvalRow, RunInfo } from '../run-dir.ts';
import { queryString, valueTables } from './layout.ts';

export const PAGE_SIZE = 50;

const text = z.string().max(500).optional();
const num = z
  .string()
  .optional()
  .transform((s, ctx) => {
    if (s === undefined) return undefined;
    const n = Number(s);
    if (!Number.isFinite(n)) {
      ctx.addIssue({ code: 'custom', message: `expected a number, got "${s}"` });
      return z.NEVER;
    }
    return n;
  });

const querySchema = z.strictObject({
  split: text,
  type: text,
  status: text,
  endReason: text,
  policy: text,
  success: z.enum(['yes', 'no']).optional(),
  minReward: num,
  maxReward: num,
  q: text,
  page: z
    .string()
    .regex(/^[1-9]\d{0,6}$/, 'expected a page number ≥ 1')
    .optional()
    .transform((s) => (s === undefined ? 1 : Number(s))),
});

export type EpisodeQuery = EpisodeFilter & { page: number };

/** Parses the episodes table's query string (empty fields are absent); bad input is a 400 with the reason. */
export function parseEpisodeQuery(params: URLSearchParams): EpisodeQuery {
  const raw: Record<string, string> = {};
  for (const [k, v] of params) if (v !== '') raw[k] = v;
  const parsed = querySchema.safeParse(raw);
  if (!parsed.success) throw new ViewRequestError(`bad episodes query: ${z.prettifyError(parsed.error)}`);
  const { success, ...rest } = parsed.data;
  return { ...rest, success: success === undefined ? undefined : success === 'yes' };
}

function queryParams(q: EpisodeQuery, page?: number): Record<string, string | number | undefined> {
  return {
    split: q.split,
    type: q.type,
    status: q.status,
    endReason: q.endReason,
    policy: q.policy,
    success: q.success === undefined ? undefined : q.success ? 'yes' : 'no',
    minReward: q.minReward,
    maxReward: q.maxReward,
    q: q.q,
    page: page && page > 1 ? page : undefined,
  };
}

function select(name: string, label: string, options: readonly string[], value: string | undefined): Html {
  return html`<label>${label}<select name="${name}"><option value="">any</option>${options.map((o) => html`<option value="${o}"${o === value ? ' selected' : ''}>${o || '(none)'}</option>`)}</select></label>`;
}

export interface EpisodesTableData {
  base: string;
  facets: Facets;
  query: EpisodeQuery;
  rows: EpisodeSummary[];
  total: number;
  all: number;
  ms: number;
}

/** The episodes table: filters, one page of rows, a pager. Works without script (a GET form). */
export function episodesTable(d: EpisodesTableData): Html {
  const q = d.query;
  const pages = Math.max(1, Math.ceil(d.total / PAGE_SIZE));
  const link = (page: number) => `${d.base}${queryString(queryParams(q, page))}#episodes`;
  return html`<section class="card" id="episodes"><h2>Episodes</h2>
  <form class="filters" method="get" action="${d.base}#episodes">
    ${select('split', 'split', d.facets.split, q.split)}
    ${select('type', 'type', d.facets.type, q.type)}
    ${select('status', 'status', d.facets.status, q.status)}
    ${select('endReason', 'end reason', d.facets.endReason, q.endReason)}
    ${select('policy', 'policy version', d.facets.policy, q.policy)}
    ${select('success', 'success', ['yes', 'no'], q.success === undefined ? undefined : q.success ? 'yes' : 'no')}
    <label>reward ≥<input name="minReward" size="6" value="${q.minReward ?? ''}"></label>
    <label>reward ≤<input name="maxReward" size="6" value="${q.maxReward ?? ''}"></label>
    <label>generated text contains<input name="q" size="24" value="${q.q ?? ''}"></label>
    <button type="submit">filter</button> <a href="${d.base}#episodes">clear</a>
  </form>
  <div class="muted episodes-count" data-total="${d.total}">${d.total} of ${d.all} episodes match (${d.ms.toFixed(1)} ms)</div>
  <table class="episodes"><thead><tr><th class="num">#</th><th>episode</th><th>split</th><th>type</th><th>policy</th><th>status</th><th>end</th><th class="num">turns</th><th class="num">reward</th><th>success</th><th>group</th></tr></thead>
  <tbody>${d.rows.map(
    (
      e,
    ) => html`<tr data-ordinal="${e.ordinal}" data-episode="${e.episodeId}"><td class="num">${e.index}</td><td><a class="episode-link" href="${d.base}/episode/${e.ordinal}">${e.episodeId}</a></td>
    <td>${e.split}</td><td>${e.type}</td><td class="muted">${e.policyVersion}</td><td><span class="badge ${e.status}">${e.status}</span></td><td>${e.endReason}</td>
    <td class="num">${e.turns}</td><td class="num reward">${fmtNumber(e.totalReward)}</td><td class="${e.success ? 'ok' : 'fail'}">${e.success ? 'yes' : 'no'}</td>
    <td><a href="${d.base}/group${queryString({ key: e.group, policy: e.policyVersion })}">${e.group}</a></td></tr>`,
  )}</tbody></table>
  <div class="pager">${q.page > 1 ? html`<a class="prev" href="${link(q.page - 1)}">← previous</a>` : ''}<span>page ${q.page} of ${pages}</span>${q.page < pages ? html`<a class="next" href="${link(q.page + 1)}">next →</a>` : ''}</div>
  </section>`;
}

/** Runs the query against the index: the page's rows, how many matched, how long it took. */
export function queryEpisodes(
  index: EpisodeIndex,
  query: EpisodeQuery,
): { rows: EpisodeSummary[]; total: number; ms: number } {
  const t = performance.now();
  const matched = index.filter(query);
  const rows = matched.slice((query.page - 1) * PAGE_SIZE, query.page * PAGE_SIZE);
  return { rows, total: matched.length, ms: performance.now() - t };
}

/** Summary, eval tables, curves and checkpoints of one run. */
export function runSections(info: RunInfo, charts: readonly Chart[], extra: Html[] = []): Html {
  return html`
  ${info.warnings.map((w) => html`<div class="warn">${w}</div>`)}
  ${info.summary ? html`<section class="card summary"><h2>Summary</h2>${valueTables(info.summary)}</section>` : ''}
  ${info.trainingEvals.length ? trainingEvalsTable(info.trainingEvals) : ''}
  ${info.evals.map((e) => html`<section class="card eval"><h2>Eval: ${e.file}</h2>${valueTables(e.data)}</section>`)}
  ${
    charts.length || extra.length
      ? html`<section class="card"><h2>Training curves</h2>${info.metrics.length ? html`<div class="muted">${info.metrics.length} steps from metrics.jsonl</div>` : html`<div class="muted">no metrics.jsonl</div>`}
    <div class="charts">${charts.map((c) => html`<figure class="chart" data-field="${c.field}">${c.svg}</figure>`)}${extra.map((x) => html`<figure class="chart">${x}</figure>`)}</div></section>`
      : ''
  }
  ${info.checkpoints.length ? html`<section class="card"><h2>Checkpoints</h2><ul>${info.checkpoints.map((c) => html`<li><code>${c}</code></li>`)}</ul></section>` : ''}`;
}

/** The trainer's evals (eval lines of metrics.jsonl): one row each, then the last one's summary tables. */
function trainingEvalsTable(evals: readonly EvalRow[]): Html {
  const columns = [...new Set(evals.flatMap((e) => Object.keys(e.values)))];
  const last = evals.at(-1)!;
  return html`<section class="card training-evals"><h2>Evals during training</h2>
  <table class="values"><tr><th class="num">step</th><th>split</th>${columns.map((c) => html`<th class="num">${c}</th>`)}</tr>
  ${evals.map((e) => html`<tr><td class="num">${e.step}</td><td>${e.split}</td>${columns.map((c) => (e.values[c] === undefined ? html`<td class="muted">–</td>` : html`<td class="num">${fmtNumber(e.values[c]!)}</td>`))}</tr>`)}</table>
  ${last.summary ? html`<h3>Last eval (step ${last.step}, ${last.split}): summary</h3>${valueTables(last.summary)}` : ''}</section>`;
}
