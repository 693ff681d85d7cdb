import { episodeMachine } from '../../machines/episode.ts';
import { UsageError } from '../core/errors.ts';
import type { EpisodeRecord } from '../core/types.ts';
import { replayRecord, type ReplayResult } from '../replay/replay.ts';
import { isAgentRecord } from '../record/agent.ts';
import { agentVerdict } from '../gateway/replay-agent.ts';
import { loadRecordScenario, type ScenarioRegistry } from '../scenario/load.ts';
import { metricCharts, rewardHistogram, runSeries } from './charts.ts';
import { EpisodeIndex, type EpisodeSummary } from './episode-index.ts';
import { RunDirError } from './errors.ts';
import { fmtNumber, html, type Html } from './html.ts';
import { machineGraph } from './machine-graph.ts';
import { episodeView } from './pages/episode.ts';
import { page } from './pages/layout.ts';
import { runSections } from './pages/run.ts';
import { readRunDir } from './run-dir.ts';
import { loadTokenDecoder } from './tokens.ts';

export interface ReportOptions {
  /** Replay the example episodes and show the verdict (default true). */
  replay?: boolean;
  /** The scenarios records may name, to replay episodes and draw world machines (the CLI: the built-in ones). */
  scenarios?: ScenarioRegistry;
  /**
   * The scenario folders (or built-in names) the user trusts: a record's scenario is loaded from one
   * of these or the registry, never from the folder the record names unless it is one of these.
   */
  scenario?: string | readonly string[];
  /** Hears what the report could not do and the user can fix (a scenario folder not named), once each. */
  onWarning?: (line: string) => void;
}

/** Best, median and worst episodes by total reward (ties broken by file order), without repeats. */
export function pickExamples(episodes: readonly EpisodeSummary[]): { label: string; ordinal: number }[] {
  if (episodes.length === 0) return [];
  const sorted = [...episodes].sort((a, b) => b.totalReward - a.totalReward || a.ordinal - b.ordinal);
  const picks = [
    { label: 'best', ordinal: sorted[0]!.ordinal },
    { label: 'median', ordinal: sorted[Math.floor((sorted.length - 1) / 2)]!.ordinal },
    { label: 'worst', ordinal: sorted[sorted.length - 1]!.ordinal },
  ];
  const seen = new Set<number>();
  return picks.filter((p) => !seen.has(p.ordinal) && seen.add(p.ordinal));
}

function countTable(title: string, episodes: readonly EpisodeSummary[], key: (e: EpisodeSummary) => string): Html {
  const groups = new Map<string, EpisodeSummary[]>();
  for (const e of episodes) {
    const k = key(e);
    groups.set(k, [...(groups.get(k) ?? []), e]);
  }
  if (groups.size === 0) return html``;
  return html`<table class="values"><tr><th>${title}</th><th class="num">episodes</th><th class="num">success rate</th><th class="num">mean reward</th><th class="num">mean turns</th></tr>
  ${[...groups]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, es]) => {
      const mean = (f: (e: EpisodeSummary) => number) => es.reduce((s, e) => s + f(e), 0) / es.length;
      return html`<tr><th>${k || '(none)'}</th><td class="num">${es.length}</td><td class="num">${fmtNumber(mean((e) => (e.success ? 1 : 0)))}</td><td class="num">${fmtNumber(mean((e) => e.totalReward))}</td><td class="num">${fmtNumber(mean((e) => e.turns))}</td></tr>`;
    })}</table>`;
}

/**
 * One self-contained HTML file for sharing a run: summary and eval tables, the training curves as
 * inline SVG (Vega-Lite, rendered here), results by split / type / end reason, and the best, median
 * and worst episodes in full. No script, no external resource: it opens offline from a file.
 */
export async function buildReport(dir: string, options: ReportOptions = {}): Promise<string> {
  const info = readRunDir(dir);
  const index = info.episodesPath ? EpisodeIndex.open(info.episodesPath) : undefined;
  if (!index && info.metrics.length === 0 && info.trainingEvals.length === 0 && !info.summary)
    throw new RunDirError(`${dir} has nothing to report (no episodes, metrics or summary)`);
  const charts = await metricCharts(runSeries(info));
  const episodes = index?.episodes ?? [];
  const hist = episodes.length
    ? [await rewardHistogram([{ run: info.name, rewards: episodes.map((e) => e.totalReward) }])]
    : [];
  const { decode } = await loadTokenDecoder(info.tokenizerPath);
  const episodeGraph = machineGraph(episodeMachine);
  const examples: Html[] = [];
  const warned = new Set<string>();
  const warn = (line: string) => {
    if (!warned.has(line)) options.onWarning?.(line);
    warned.add(line);
  };
  for (const pick of pickExamples(episodes)) {
    const record = index!.tryRead(pick.ordinal);
    if (!('turns' in record)) {
      examples.push(html`<div class="warn">${pick.label} episode: ${record.message}</div>`);
      continue;
    }
    const { replay, worldGraph } = await replayAndWorld(record, options, warn);
    examples.push(html`<section class="example" data-example="${pick.label}"><h2>${pick.label[0]!.toUpperCase() + pick.label.slice(1)} episode: ${record.episodeId} (total reward ${fmtNumber(record.totalReward)})</h2>
      ${episodeView({ record, episodeGraph, worldGraph, replay, decode, compact: true })}</section>`);
  }
  const body = html`<h1>Run report: ${info.name}</h1>
    <div class="muted">from <code>${info.dir}</code> · ${episodes.length} episodes · ${info.metrics.length} training steps</div>
    ${runSections(info, charts, hist)}
    ${episodes.length ? html`<section class="card results"><h2>Results</h2>${countTable('split', episodes, (e) => e.split)}<br>${countTable('type', episodes, (e) => e.type)}<br>${countTable('end reason', episodes, (e) => e.endReason)}<br>${countTable('policy version', episodes, (e) => e.policyVersion)}</section>` : ''}
    ${index?.corrupt.length ? html`<div class="warn">${index.corrupt.length} corrupt lines in episodes.jsonl were skipped</div>` : ''}
    ${examples.length ? html`<h2>Example episodes</h2>${examples}` : ''}`;
  return page(`report: ${info.name}`, body);
}

async function replayAndWorld(
  record: EpisodeRecord,
  options: ReportOptions,
  warn: (line: string) => void,
): Promise<{ replay?: ReplayResult | { error: string }; worldGraph?: ReturnType<typeof machineGraph> }> {
  const replay = options.replay ?? true;
  if (isAgentRecord(record)) return replay ? { replay: agentVerdict(record) } : {};
  try {
    const scenario = await loadRecordScenario(record.scenario, options.scenarios ?? {}, options.scenario);
    const worldGraph = scenario.worldMachine ? machineGraph(scenario.worldMachine) : undefined;
    if (!replay) return { worldGraph };
    try {
      return { replay: await replayRecord(record, scenario), worldGraph };
    } catch (err) {
      return { replay: { error: err instanceof Error ? err.message : String(err) }, worldGraph };
    }
  } catch (err) {
    if (err instanceof UsageError) warn(err.message);
    return {
      replay: replay
        ? {
            error: `scenario ${record.scenario.id} could not be loaded: ${err instanceof Error ? err.message : String(err)}`,
          }
        : undefined,
    };
  }
}
