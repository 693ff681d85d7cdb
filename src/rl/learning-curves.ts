import type * as vegaLite from 'vega-lite';
import { importOptional } from '../core/optional-import.ts';

/** One point of a learning curve: a series (algorithm), a step and a value (EM). */
export interface CurvePoint {
  series: string;
  step: number;
  value: number;
  /** Spread (e.g. std over seeds), drawn as a band when present. */
  spread?: number;
}

/**
 * Learning curves as an SVG, rendered headless with Vega-Lite → Vega (no browser, no canvas):
 * lines per series, with a ±spread band where given.
 */
export async function learningCurvesSvg(
  points: readonly CurvePoint[],
  options: { title: string; yTitle: string; xTitle?: string },
): Promise<string> {
  const values = points.map((p) => ({ ...p, lo: p.value - (p.spread ?? 0), hi: p.value + (p.spread ?? 0) }));
  const spec: vegaLite.TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: options.title,
    width: 560,
    height: 320,
    data: { values },
    encoding: {
      x: { field: 'step', type: 'quantitative', title: options.xTitle ?? 'RL step' },
      color: { field: 'series', type: 'nominal', title: 'algorithm' },
    },
    layer: [
      {
        mark: { type: 'area', opacity: 0.15 },
        encoding: { y: { field: 'lo', type: 'quantitative', title: options.yTitle }, y2: { field: 'hi' } },
      },
      {
        mark: { type: 'line', point: true },
        encoding: { y: { field: 'value', type: 'quantitative', title: options.yTitle } },
      },
    ],
  };
  // Optional dependencies (the viewer's charts use them too), loaded on use.
  const vega = await importOptional('vega', 'learningCurvesSvg', () => import('vega'));
  const { compile } = await importOptional('vega-lite', 'learningCurvesSvg', () => import('vega-lite'));
  const compiled = compile(spec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
