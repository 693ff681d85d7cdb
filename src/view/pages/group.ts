import type { EpisodeRecord } from '../../core/types.ts';
import { fmtNumber, html, type Html } from '../html.ts';

export interface GroupMember {
  record: EpisodeRecord;
  advantage: number;
  /** Whether the advantage came from the record (else computed here, GRPO over the group). */
  recorded: boolean;
  href: string;
}

/** The G episodes of one GRPO group side by side: reward, advantage, and what each one did. */
export function groupView(members: readonly GroupMember[]): Html {
  const rewards = members.map((m) => m.record.totalReward);
  const mean = rewards.reduce((a, b) => a + b, 0) / Math.max(1, rewards.length);
  const task = members[0]?.record.task;
  return html`${task ? html`<div class="question">${task.question}${task.answer !== undefined ? html` <span class="muted">(reference answer: ${task.answer})</span>` : ''}</div>` : ''}
  <div class="muted">${members.length} episodes · mean total reward ${fmtNumber(mean)} · advantage = (r − mean) / (std + 1e-6), GRPO over the group's total rewards${members.some((m) => m.recorded) ? ' (recorded where the record has one)' : ''}</div>
  <div class="compare">${members.map(
    (
      m,
    ) => html`<div class="member" data-sample="${m.record.sample}" data-reward="${m.record.totalReward}" data-advantage="${m.advantage}">
      <div><a href="${m.href}">${m.record.episodeId}</a> <span class="muted">sample ${m.record.sample}</span></div>
      <div class="kv"><div>total reward</div><div><b>${fmtNumber(m.record.totalReward)}</b></div>
      <div>advantage</div><div><b class="${m.advantage > 0 ? 'ok' : m.advantage < 0 ? 'fail' : ''}">${fmtNumber(m.advantage)}</b></div>
      <div>outcome</div><div class="${m.record.outcome.success ? 'ok' : 'fail'}">${m.record.outcome.success ? 'success' : 'failure'} · ${m.record.endReason}</div>
      <div>answer</div><div>${m.record.answer ?? '(none)'}</div></div>
      ${m.record.turns.map((t) => html`<div class="muted">turn ${t.index + 1} · reward ${fmtNumber(t.reward)}</div><pre>${t.text}</pre>${t.observation !== null ? html`<pre class="muted">${t.observation}</pre>` : ''}`)}
    </div>`,
  )}</div>`;
}
