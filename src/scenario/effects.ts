import type { Json, ToolResult } from '../core/types.ts';
import { ScenarioError } from '../core/errors.ts';

/**
 * Event sourcing for a scenario's per-episode world (a database copy, a world actor).
 *
 * A tool that changes the world does it through `commitEffect`, which applies the change and
 * returns it numbered; the tool puts the numbered effects in its result (`data.effects`). The
 * ToolEnv's step calls `syncEffects` with the turn's results: live, every effect is already
 * applied and nothing happens; in replay, where tools are not run and their recorded results are
 * fed back, the recorded effects are applied here, so the world (and the outcome computed from it)
 * is the same as it was live. Stochastic draws happen in the tools only and their result is part of
 * the effect, so replay never draws.
 */

export interface EffectLog {
  /** How many effects the world has seen. */
  applied: number;
}

export type Effect = { seq: number; [key: string]: Json };

export function commitEffect<E extends { [key: string]: Json }>(
  log: EffectLog,
  effect: E,
  apply: (effect: E) => void,
): E & { seq: number } {
  apply(effect);
  const numbered = { ...effect, seq: log.applied };
  log.applied += 1;
  return numbered;
}

/** The effects a tool result carries, in order; `E`: the scenario's effect type (what its tools commit). */
export function effectsOf<E extends { [key: string]: Json } = Effect>(result: ToolResult): Array<E & { seq: number }> {
  const data = result.data;
  if (!result.ok || data === null || typeof data !== 'object' || Array.isArray(data)) return [];
  const effects = data['effects'];
  return Array.isArray(effects) ? (effects as unknown as Array<E & { seq: number }>) : [];
}

/**
 * Applies the effects of `results` the world has not seen yet (replay); returns how many it applied.
 * `E` is the scenario's own effect type (a union of plain object types), inferred from `apply`:
 * `syncEffects(state, results, (e: MyEffect) => applyEffect(state, e))`.
 */
export function syncEffects<E extends { [key: string]: Json }>(
  log: EffectLog,
  results: readonly ToolResult[],
  apply: (effect: E) => void,
): number {
  let count = 0;
  for (const result of results) {
    for (const effect of effectsOf(result)) {
      if (typeof effect.seq !== 'number')
        throw new ScenarioError(`effect without a sequence number in ${result.name}'s result`);
      if (effect.seq < log.applied) continue;
      if (effect.seq > log.applied) {
        throw new ScenarioError(
          `effect ${effect.seq} of ${result.name} arrived before effect ${log.applied}: the record is incomplete`,
        );
      }
      apply(effect as unknown as E);
      log.applied += 1;
      count += 1;
    }
  }
  return count;
}

/** A result's data without its effects: what the agent is shown. */
export function withoutEffects(data: Json | undefined): Json | undefined {
  if (data === null || data === undefined || typeof data !== 'object' || Array.isArray(data)) return data;
  const { effects: _effects, ...rest } = data;
  return rest;
}
