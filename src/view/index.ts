// agent-r1-ts/view: the episode viewer and the HTML report. Both replay episodes with the scenarios
// they are given: `scenarios`, a registry like the CLI's built-in one, and the folders the `scenario`
// option names. A folder a record names (its `scenario.source`) is not loaded unless it is one of
// those: a record does not decide what code runs (see loadRecordScenario).
export { startViewer, ViewerApp } from './server.ts';
export type { Viewer, ViewerOptions } from './server.ts';
export { buildReport } from './report.ts';
export type { ReportOptions } from './report.ts';
export { EpisodeIndex } from './episode-index.ts';
export type { EpisodeSummary, EpisodeFilter } from './episode-index.ts';
export { machineGraph } from './machine-graph.ts';
export type { MachineGraph } from './machine-graph.ts';
export { renderDiagram } from './diagram-svg.ts';
export { readRunDir, parseMetrics } from './run-dir.ts';
export type { RunInfo, MetricRow } from './run-dir.ts';
export { RunDirError, ViewRequestError } from './errors.ts';
