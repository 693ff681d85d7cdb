// The entry every Piscina worker thread loads: compiled, dist/workers/entry.js, with no loader; from
// the sources, workers/bootstrap.mjs registers tsx first and delegates here. One task kind: play a
// share of a run's episodes (workers/rollout.ts).
export { default } from './rollout.ts';
