import type { TopLevelSpec } from 'vega-lite';
import { importOptional } from '../core/optional-import.ts';
import { trusted, type Html } from './html.ts';
import type { MetricRow, RunInfo } from './run-dir.ts';

export interface MetricSeries {
  run: string;
  rows: readonly MetricRow[];
}

export interface Chart {
  field: string;
  svg: Html;
}

/** What needs Vega and Vega-Lite (optional dependencies: only the charts use them), as the messages say. */
const NEEDED_BY = 'chart rendering (agent-r1 view, agent-r1 report)';

/**
 * Vega and Vega-Lite, loaded on first use; the viewer loads them before it listens, so that one
 * not installed is said at once rather than on a page.
 */
export async function chartLibraries(): Promise<{
  vega: Pick<typeof import('vega'), 'View' | 'parse'>;
  vegaLite: Pick<typeof import('vega-lite'), 'compile'>;
}> {
  const vega = await importOptional('vega', NEEDED_BY, () => import('vega'));
  const vegaLite = await importOptional('vega-lite', NEEDED_BY, () => import('vega-lite'));
  return { vega, vegaLite };
}

/** Renders a Vega-Lite spec to an SVG string in Node, headless (no DOM, no canvas, no network). */
async function renderSvg(spec: TopLevelSpec): Promise<Html> {
  const { vega, vegaLite } = await chartLibraries();
  const view = new vega.View(vega.parse(vegaLite.compile(spec).spec), { renderer: 'none' });
  try {
    return trusted(await view.toSVG());
  } finally {
    view.finalize();
  }
}

/** A run's curves: its training steps, and its evals during training as `eval(split).field`. */
export function runSeries(info: Pick<RunInfo, 'name' | 'metrics' | 'trainingEvals'>): MetricSeries[] {
  const evalRows = info.trainingEvals.map((e) => {
    const row: MetricRow = { step: e.step };
    for (const [k, v] of Object.entries(e.values)) row[`eval(${e.split || 'eval'}).${k}`] = v;
    return row;
  });
  return evalRows.length
    ? [
        { run: info.name, rows: info.metrics },
        { run: info.name, rows: evalRows },
      ]
    : [{ run: info.name, rows: info.metrics }];
}

/** Fields shown first when present (the rest follow in first-seen order; nothing is left out). */
const FIRST = [
  'reward',
  'success',
  'successRate',
  'em',
  'outcome.em',
  'outcome.f1',
  'kl',
  'entropy',
  'clipFraction',
  'gradNorm',
  'policyLoss',
  'valueLoss',
  'tokensPerSec',
  'time.tokensPerS',
];

const rank = (field: string) => {
  const bare = field.replace(/^eval\([^)]*\)\./, '');
  const i = FIRST.indexOf(bare);
  // Training curves before eval curves, the headline metrics first in each.
  return (field === bare ? 0 : 100) + (i === -1 ? 50 : i);
};

/** Every numeric field across the runs: the headline metrics first, then the others in first-seen order (the set is the trainer's, not ours). */
export function metricFields(series: readonly MetricSeries[]): string[] {
  const fields: string[] = [];
  const seen = new Set<string>();
  for (const s of series) {
    for (const row of s.rows) {
      for (const k of Object.keys(row)) {
        if (k !== 'step' && !seen.has(k)) {
          seen.add(k);
          fields.push(k);
        }
      }
    }
  }
  return fields
    .map((f, i) => [f, i] as const)
    .sort((a, b) => rank(a[0]) - rank(b[0]) || a[1] - b[1])
    .map(([f]) => f);
}

/** One line chart per metric against step, the runs overlaid in colours when there are several. */
export async function metricCharts(
  series: readonly MetricSeries[],
  options: { width?: number; height?: number } = {},
): Promise<Chart[]> {
  const charts: Chart[] = [];
  for (const field of metricFields(series)) {
    const values = series.flatMap((s) =>
      s.rows.filter((r) => typeof r[field] === 'number').map((r) => ({ run: s.run, step: r.step, value: r[field]! })),
    );
    const multi = new Set(values.map((v) => v.run)).size > 1;
    const spec: TopLevelSpec = {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: { text: field, anchor: 'start', fontSize: 13 },
      width: options.width ?? 300,
      height: options.height ?? 140,
      data: { values },
      mark: { type: 'line', point: values.length <= 60 ? { size: 18 } : false, strokeWidth: 1.8 },
      encoding: {
        x: { field: 'step', type: 'quantitative', title: 'step', axis: { tickMinStep: 1, format: '~r' } },
        y: { field: 'value', type: 'quantitative', title: null, scale: { zero: false }, axis: { format: '~r' } },
        ...(multi ? { color: { field: 'run', type: 'nominal', title: 'run', legend: { orient: 'bottom' } } } : {}),
      },
      config: { background: 'white', view: { stroke: '#dde2e8' } },
    };
    charts.push({ field, svg: await renderSvg(spec) });
  }
  return charts;
}

/**
 * A histogram of episode rewards, one colour per run when there are several. The bins are counted
 * here (Vega's own nice-bin rule), so the chart costs the same for 100 or 100k episodes.
 */
export async function rewardHistogram(series: readonly { run: string; rewards: readonly number[] }[]): Promise<Html> {
  let lo = Infinity;
  let hi = -Infinity;
  for (const s of series) {
    for (const r of s.rewards.filter(Number.isFinite)) {
      lo = Math.min(lo, r);
      hi = Math.max(hi, r);
    }
  }
  if (lo === Infinity) [lo, hi] = [0, 1];
  if (lo === hi) [lo, hi] = [lo - 0.5, hi + 0.5];
  const { vega } = await chartLibraries();
  const { start, step } = (
    vega as unknown as {
      bin(o: { extent: [number, number]; maxbins: number }): { start: number; stop: number; step: number };
    }
  ).bin({ extent: [lo, hi], maxbins: 30 });
  const values: { run: string; start: number; end: number; count: number }[] = [];
  for (const s of series) {
    const counts = new Map<number, number>();
    for (const r of s.rewards) {
      if (!Number.isFinite(r)) continue;
      const k = Math.floor((r - start) / step + 1e-9);
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    for (const [k, count] of [...counts].sort((a, b) => a[0] - b[0]))
      values.push({ run: s.run, start: start + k * step, end: start + (k + 1) * step, count });
  }
  const multi = series.length > 1;
  return renderSvg({
    title: { text: 'episode total reward', anchor: 'start', fontSize: 13 },
    width: 300,
    height: 140,
    data: { values },
    mark: { type: 'bar', opacity: multi ? 0.6 : 1, binSpacing: 1 },
    encoding: {
      x: { field: 'start', type: 'quantitative', bin: { binned: true, step }, title: 'total reward' },
      x2: { field: 'end' },
      y: { field: 'count', type: 'quantitative', title: 'episodes', stack: multi ? null : undefined },
      ...(multi ? { color: { field: 'run', type: 'nominal', legend: { orient: 'bottom' } } } : {}),
    },
    config: { background: 'white', view: { stroke: '#dde2e8' } },
  });
}
