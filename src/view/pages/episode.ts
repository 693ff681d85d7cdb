import type { EpisodeRecord, Json, ReplyRecord, TurnRecord } from '../../core/types.ts';
import { shownContexts, type ShownContext } from '../../record/step-context.ts';
import type { ReplayResult } from '../../replay/replay.ts';
import { canonicalJson } from '../../core/canonical-json.ts';
import { pathMarks, renderDiagram } from '../diagram-svg.ts';
import { fmtNumber, html, type Html } from '../html.ts';
import type { MachineGraph } from '../machine-graph.ts';
import { renderTokens, type TokenDecoder } from '../tokens.ts';

export interface EpisodeView {
  record: EpisodeRecord;
  episodeGraph: MachineGraph;
  worldGraph?: MachineGraph;
  /** The replay verdict, or why there is none. */
  replay?: ReplayResult | { error: string };
  decode?: TokenDecoder;
  /** Link to the GRPO compare page of this episode's group. */
  groupHref?: string;
  /** Heading level shift for embedding (the report shows several episodes on one page). */
  compact?: boolean;
}

/** Every state the episode machine went through, turn after turn. */
export function episodePath(record: Pick<EpisodeRecord, 'turns'>): string[] {
  return record.turns.flatMap((t) => t.states);
}

/**
 * The world machine's states this episode saw: string values of `status` / `state` fields in the
 * tools' structured results and the ToolEnv's step info that name a state of the world machine, in
 * the order they appear. (Records hold what tools returned, not world snapshots.)
 */
export function worldPath(record: Pick<EpisodeRecord, 'turns'>, graph: MachineGraph): string[] {
  const names = new Set(graph.nodes.flatMap((n) => [n.key, n.id]));
  const out: string[] = [];
  const walk = (v: Json | undefined, key?: string) => {
    if (typeof v === 'string') {
      if ((key === 'status' || key === 'state' || key === 'worldState') && names.has(v)) out.push(v);
    } else if (Array.isArray(v)) v.forEach((x) => walk(x, key));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
  };
  for (const t of record.turns) {
    for (const r of t.results) walk(r.data);
    walk(t.info as Json | undefined);
  }
  return out;
}

const pretty = (v: unknown) => JSON.stringify(v, null, 2);

/**
 * What a step-level turn was shown: collapsed to a line when it is just the previous context plus
 * the last turn; otherwise each message, the ones that concatenation would not have shown marked.
 */
function contextView(turn: TurnRecord, shown: ShownContext | undefined): Html {
  const c = turn.context;
  if (!c || !shown) return html``;
  if (c.messages.length === 0 && (c.keepTokens === undefined || (c.tokens?.length ?? 0) === 0))
    return html`<div class="context muted" data-context="extends">context: the previous one plus the last turn (${shown.messages.length} messages)</div>`;
  return html`<details class="context" data-context="new"><summary>context the ToolEnv showed (${shown.messages.length} messages: ${c.keep} kept, ${c.messages.length} new${shown.tokens ? `, ${shown.tokens.length} tokens` : ''})</summary>
    ${shown.messages.map((m, i) => html`<div class="muted">${m.role}${i >= c.keep ? html` <span class="badge">new</span>` : ''}</div><pre class="context-message">${m.content}</pre>`)}</details>`;
}

function turnView(turn: TurnRecord, decode: TokenDecoder | undefined, shown?: ShownContext): Html {
  const a = turn.action;
  const action =
    a.kind === 'tool_calls'
      ? html`<div class="calls">${a.calls.map(
          (
            c,
            i,
          ) => html`<div class="call" data-call="${i}"><div><span class="badge">call ${i + 1}</span> <b class="call-name">${c.name}</b></div><pre class="call-args">${pretty(c.arguments)}</pre>
          ${turn.results[i] ? resultView(turn.results[i]!) : html`<div class="muted">no result</div>`}</div>`,
        )}</div>`
      : a.kind === 'answer'
        ? html`<div><span class="badge ok">answer</span> <pre class="answer-text">${a.text}</pre></div>`
        : html`<div><span class="badge invalid">invalid action</span> <span class="action-error">${a.error}</span></div>`;
  // Results beyond the parsed calls cannot happen in a valid record, but show them rather than hide them.
  const extra = a.kind === 'tool_calls' ? turn.results.slice(a.calls.length) : turn.results;
  return html`<section class="card turn" data-turn="${turn.index}">
    <h3>Turn ${turn.index + 1} <span class="path">${turn.states.join(' → ')}</span></h3>
    ${contextView(turn, shown)}
    <div class="muted">generated text (${turn.tokenCount} tokens)</div>
    <pre class="generated">${turn.text}</pre>
    ${turn.tokens ? html`<details open><summary>action tokens${turn.logprobs ? ', coloured by probability' : ''}</summary>${renderTokens(turn.tokens, turn.logprobs, decode)}</details>` : ''}
    ${action}
    ${extra.map(resultView)}
    ${turn.reply ? replyView(turn.reply) : ''}
    <div class="muted">observation</div>
    ${turn.observation === null ? html`<div class="observation muted" data-null="true">(none)</div>` : html`<pre class="observation">${turn.observation}</pre>`}
    <div>process reward <b class="turn-reward" data-value="${turn.reward}">${fmtNumber(turn.reward)}</b>${turn.done ? html` <span class="badge">done</span>` : ''}</div>
    ${turn.info ? html`<details><summary>step info</summary><pre>${pretty(turn.info)}</pre></details>` : ''}
  </section>`;
}

/** The other role's reply to the turn's message: each of its steps (its own tool calls and results), then its message. */
function replyView(reply: ReplyRecord): Html {
  return html`<details open class="reply" data-role="${reply.role}"><summary>the ${reply.role}'s reply: ${reply.steps.length} step${reply.steps.length === 1 ? '' : 's'}${reply.ended ? html` <span class="badge">ended the conversation</span>` : ''}</summary>
    ${reply.steps.map(
      (
        step,
        k,
      ) => html`<div class="reply-step" data-step="${k}"><div class="muted">${reply.role}, step ${k + 1}${step.tokens ? ` (${step.tokens.length} tokens)` : ''}</div><pre class="reply-text">${step.text}</pre>
      ${step.action.kind === 'tool_calls' ? step.action.calls.map((c, i) => html`<div class="call"><span class="badge">call</span> <b class="call-name">${c.name}</b> <code>${pretty(c.arguments)}</code>${step.results[i] ? resultView(step.results[i]!) : ''}</div>`) : ''}
      ${step.action.kind === 'invalid' ? html`<span class="badge invalid">invalid</span> <span class="action-error">${step.action.error}</span>` : ''}</div>`,
    )}</details>`;
}

function resultView(r: EpisodeRecord['turns'][number]['results'][number]): Html {
  return html`<div class="result" data-ok="${String(r.ok)}"><div class="muted">result of <b>${r.name}</b>: <span class="badge ${r.ok ? 'ok' : 'error'}">${r.ok ? 'ok' : (r.error?.kind ?? 'failed')}</span>${r.truncated ? ' (truncated)' : ''}</div>
    <pre class="result-content">${r.content}</pre>${r.error && r.error.message !== r.content ? html`<div class="muted result-error">${r.error.message}</div>` : ''}</div>`;
}

function replayView(replay: EpisodeView['replay']): Html {
  if (!replay) return html``;
  if ('error' in replay)
    return html`<div class="replay"><span class="badge">replay not available</span> ${replay.error}</div>`;
  if (replay.verified)
    return html`<div class="replay" data-verified="true"><span class="badge verified">replay verified</span> every state, observation and reward re-derived from the record matches it</div>`;
  const d = replay.divergence!;
  return html`<div class="replay" data-verified="false"><span class="badge error">replay diverged</span> at ${d.turn === null ? 'episode level' : `turn ${d.turn + 1}`}, field <b>${d.field}</b>
    <div class="kv"><div>expected</div><pre>${canonicalJson(d.expected)}</pre><div>actual</div><pre>${canonicalJson(d.actual)}</pre></div></div>`;
}

/** The episode, turn by turn, with its machine diagrams, outcome and replay verdict. */
export function episodeView(v: EpisodeView): Html {
  const r = v.record;
  const marks = pathMarks(v.episodeGraph, episodePath(r));
  const world = v.worldGraph
    ? renderDiagram(
        v.worldGraph,
        pathMarks(v.worldGraph, worldPath(r, v.worldGraph)),
        `world machine ${v.worldGraph.id}`,
      )
    : undefined;
  const metrics = r.outcome.metrics ?? {};
  const shown = r.turns.some((t) => t.context) ? shownContexts(r) : [];
  return html`<div class="episode" data-episode="${r.episodeId}">
  <section class="card">
    <div class="kv">
      <div>episode</div><div class="episode-id">${r.episodeId} <span class="muted">(#${r.index}, seed ${r.seed})</span></div>
      <div>task</div><div>${r.task.id} · split ${r.task.split}${r.task.type ? html` · type ${r.task.type}` : ''}</div>
      <div>question</div><div class="question">${r.task.question}</div>
      ${r.task.answer !== undefined ? html`<div>reference answer</div><div class="reference">${r.task.answer}</div>` : ''}
      <div>policy</div><div>${r.policy.id} <span class="muted">${r.policy.version}</span></div>
      <div>group</div><div>${v.groupHref ? html`<a class="group-link" href="${v.groupHref}">${r.group}</a>` : r.group} · sample ${r.sample}</div>
      <div>status</div><div><span class="badge ${r.status}">${r.status}</span> ended: <b class="end-reason">${r.endReason}</b>${r.error ? html` <span class="fail">${r.error}</span>` : ''}</div>
    </div>
    ${replayView(v.replay)}
  </section>
  <div class="episode-grid"><div class="episode-main">
  <details><summary>prompt (${r.prompt.length} messages)</summary>${r.prompt.map((m) => html`<div class="muted">${m.role}</div><pre class="prompt">${m.content}</pre>`)}</details>
  <h2>Turns (${r.turns.length})</h2>
  ${r.turns.map((t, i) => turnView(t, v.decode, shown[i]))}
  <section class="card outcome">
    <h2>Outcome</h2>
    <div class="kv">
      <div>answer</div><div class="final-answer">${r.answer ?? html`<span class="muted">(none)</span>`}</div>
      <div>outcome reward</div><div><b class="outcome-reward" data-value="${r.outcome.reward}">${fmtNumber(r.outcome.reward)}</b> <span class="${r.outcome.success ? 'ok' : 'fail'}">${r.outcome.success ? 'success' : 'failure'}</span></div>
      ${Object.entries(metrics).map(([k, x]) => html`<div>${k}</div><div>${fmtNumber(x)}</div>`)}
      <div>process reward</div><div class="process-reward" data-value="${r.processReward}">${fmtNumber(r.processReward)}</div>
      <div>total reward</div><div><b class="total-reward" data-value="${r.totalReward}">${fmtNumber(r.totalReward)}</b></div>
      <div>tokens</div><div>${r.totalTokens}</div>
      <div>ended because</div><div>${r.endReason}</div>
    </div>
  </section></div>
  <aside class="episode-side">
    <figure class="episode-machine"><figcaption class="muted">episode machine (machines/episode.ts): this episode's path</figcaption>${renderDiagram(v.episodeGraph, marks, 'episode machine')}</figure>
    ${world ? html`<figure class="world-machine"><figcaption class="muted">world machine ${v.worldGraph!.id}: states named in this episode's tool results</figcaption>${world}</figure>` : ''}
  </aside></div></div>`;
}
