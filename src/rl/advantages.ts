import { RlInputError } from './errors.ts';

/**
 * Advantage estimators over multi-turn token sequences `[prompt][action 1][obs 1][action 2]…`.
 * Semantics follow verl's `core_algos.py` so figures carry over, with Agent-R1's multi-turn fix:
 * recursions run over the action tokens as if they were contiguous (observation tokens are skipped,
 * they neither count as steps nor reset anything). Plain numbers, no tensors: this runs once per
 * rollout batch on a few thousand tokens.
 */

export const ADVANTAGE_ESTIMATORS = ['gae', 'grpo', 'rloo', 'reinforce++'] as const;
export type AdvantageEstimator = (typeof ADVANTAGE_ESTIMATORS)[number];

/** One sequence, per token: reward, mask (1 = the agent's own token), value (GAE only), group (GRPO/RLOO). */
export interface AdvantageSequence {
  rewards: readonly number[];
  mask: readonly number[];
  values?: readonly number[];
  group?: string;
  /**
   * Step-level samples (one sequence per step of an episode): the episode's key and the step's
   * index in it. With them, each estimator runs over episodes and their steps (see stepLevel below).
   */
  episode?: string;
  step?: number;
  /** Step-level GAE: the token whose value is the step's state value (the step's last prompt token). */
  valueAt?: number;
}

export interface AdvantageOptions {
  /** Discount (GAE, REINFORCE++). Default 1. */
  gamma?: number;
  /** GAE λ. Default 1. */
  lambda?: number;
  /** GRPO: divide by the group's std (default true); false gives Dr. GRPO's x − mean. */
  normByStd?: boolean;
  /** Whiten GAE / REINFORCE++ advantages over the batch's action tokens (default true, as verl). */
  whiten?: boolean;
}

export interface AdvantageResult {
  /** Per token; 0 on tokens with mask 0. */
  advantages: number[];
  /** Per token (GAE: advantages + values before whitening; REINFORCE++: the return-to-go); 0 off the mask. */
  returns?: number[];
  /** Where the value loss applies, when not on the action tokens (step-level GAE: each step's state token). */
  valueMask?: number[];
}

const GRPO_EPS = 1e-6;
const WHITEN_EPS = 1e-8;

export function computeAdvantages(
  estimator: AdvantageEstimator,
  sequences: readonly AdvantageSequence[],
  options: AdvantageOptions = {},
): AdvantageResult[] {
  if (!(ADVANTAGE_ESTIMATORS as readonly string[]).includes(estimator)) {
    throw new RlInputError(
      `unknown advantage estimator "${String(estimator)}"; valid: ${ADVANTAGE_ESTIMATORS.join(', ')}`,
    );
  }
  if (!Array.isArray(sequences)) throw new RlInputError('sequences must be an array');
  const gamma = checkUnit(options.gamma ?? 1, 'gamma');
  const lambda = checkUnit(options.lambda ?? 1, 'lambda');
  sequences.forEach((s, i) => validateSequence(s, i, estimator));
  if (sequences.some((s) => s.episode !== undefined)) {
    return stepLevel(estimator, sequences, gamma, lambda, options);
  }
  switch (estimator) {
    case 'gae':
      return gae(sequences, gamma, lambda, options.whiten ?? true);
    case 'reinforce++':
      return reinforcePlusPlus(sequences, gamma, options.whiten ?? true);
    case 'grpo':
      return grpo(sequences, options.normByStd ?? true);
    case 'rloo':
      return rloo(sequences);
  }
}

function checkUnit(x: number, name: string): number {
  if (typeof x !== 'number' || !Number.isFinite(x) || x < 0 || x > 1) {
    throw new RlInputError(`${name} must be a number in [0, 1], got ${String(x)}`);
  }
  return x;
}

function validateSequence(s: AdvantageSequence, i: number, estimator: AdvantageEstimator): void {
  const where = `sequence ${i}`;
  if (s === null || typeof s !== 'object') throw new RlInputError(`${where} is not an object`);
  if (!Array.isArray(s.rewards) || !Array.isArray(s.mask)) {
    throw new RlInputError(`${where} needs rewards and mask arrays`);
  }
  if (s.rewards.length !== s.mask.length) {
    throw new RlInputError(`${where}: rewards has ${s.rewards.length} tokens but mask has ${s.mask.length}`);
  }
  for (let t = 0; t < s.mask.length; t++) {
    const m = s.mask[t];
    if (m !== 0 && m !== 1) throw new RlInputError(`${where}: mask[${t}] is ${String(m)}; it must be 0 or 1`);
    const r = s.rewards[t];
    if (typeof r !== 'number' || !Number.isFinite(r)) {
      throw new RlInputError(`${where}: rewards[${t}] is ${String(r)}; it must be a finite number`);
    }
    // A reward on a prompt or observation token would be silently lost by every estimator.
    if (m === 0 && r !== 0) {
      throw new RlInputError(`${where}: reward ${r} at token ${t}, which is not an action token (mask 0)`);
    }
  }
  if (s.episode !== undefined || s.step !== undefined) {
    if (typeof s.episode !== 'string' || !Number.isInteger(s.step) || s.step! < 0)
      throw new RlInputError(
        `${where}: a step-level sample needs an episode key (string) and a step index (integer ≥ 0)`,
      );
    if (estimator === 'gae' && (!Number.isInteger(s.valueAt) || s.valueAt! < 0 || s.valueAt! >= s.mask.length))
      throw new RlInputError(`${where}: step-level gae needs valueAt, the index of the step's last prompt token`);
  }
  if (estimator === 'gae') {
    if (!Array.isArray(s.values)) throw new RlInputError(`${where}: gae needs values`);
    if (s.values.length !== s.mask.length) {
      throw new RlInputError(`${where}: values has ${s.values.length} tokens but mask has ${s.mask.length}`);
    }
    s.values.forEach((v, t) => {
      if (typeof v !== 'number' || !Number.isFinite(v)) {
        throw new RlInputError(`${where}: values[${t}] is ${String(v)}; it must be a finite number`);
      }
    });
  }
  if ((estimator === 'grpo' || estimator === 'rloo') && typeof s.group !== 'string') {
    throw new RlInputError(`${where}: ${estimator} needs a group key (string) on every sequence`);
  }
}

/** Indices of the action tokens, in order. */
function actionIndices(mask: readonly number[]): number[] {
  const out: number[] = [];
  for (let t = 0; t < mask.length; t++) if (mask[t] === 1) out.push(t);
  return out;
}

function gae(seqs: readonly AdvantageSequence[], gamma: number, lambda: number, whiten: boolean): AdvantageResult[] {
  const results = seqs.map((s) => {
    const advantages = new Array<number>(s.mask.length).fill(0);
    const returns = new Array<number>(s.mask.length).fill(0);
    const values = s.values!;
    const idx = actionIndices(s.mask);
    // The value after the last action is 0 (the episode ends there).
    let nextValue = 0;
    let lastGae = 0;
    for (let k = idx.length - 1; k >= 0; k--) {
      const t = idx[k]!;
      const delta = s.rewards[t]! + gamma * nextValue - values[t]!;
      lastGae = delta + gamma * lambda * lastGae;
      advantages[t] = lastGae;
      returns[t] = lastGae + values[t]!;
      nextValue = values[t]!;
    }
    return { advantages, returns };
  });
  if (whiten)
    whitenInPlace(
      results.map((r) => r.advantages),
      seqs.map((s) => s.mask),
    );
  return results;
}

function reinforcePlusPlus(seqs: readonly AdvantageSequence[], gamma: number, whiten: boolean): AdvantageResult[] {
  const results = seqs.map((s) => {
    const returns = new Array<number>(s.mask.length).fill(0);
    const idx = actionIndices(s.mask);
    let running = 0;
    for (let k = idx.length - 1; k >= 0; k--) {
      const t = idx[k]!;
      running = s.rewards[t]! + gamma * running;
      returns[t] = running;
    }
    return { advantages: returns.slice(), returns };
  });
  if (whiten)
    whitenInPlace(
      results.map((r) => r.advantages),
      seqs.map((s) => s.mask),
    );
  return results;
}

/** Sum of a sequence's rewards (they sit on action tokens only; validated above). */
function score(s: AdvantageSequence): number {
  let sum = 0;
  for (const r of s.rewards) sum += r;
  return sum;
}

function groupsOf(seqs: readonly AdvantageSequence[]): Map<string, number[]> {
  const groups = new Map<string, number[]>();
  seqs.forEach((s, i) => {
    const g = groups.get(s.group!);
    if (g) g.push(i);
    else groups.set(s.group!, [i]);
  });
  return groups;
}

function broadcast(value: number, mask: readonly number[]): number[] {
  // `+ 0` turns −0 into 0, so results compare and serialize cleanly.
  return mask.map((m) => (m === 1 ? value + 0 : 0));
}

/** GRPO's normalization of scores within their groups (one score per episode). */
function groupNormalized(scores: readonly number[], groups: Map<string, number[]>, normByStd: boolean): number[] {
  const normalized = new Array<number>(scores.length).fill(0);
  for (const members of groups.values()) {
    const xs = members.map((i) => scores[i]!);
    // verl: a group of one gets mean 0 and std 1 (its score passes through unchanged).
    const mean = xs.length === 1 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
    const std = xs.length === 1 ? 1 : Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (xs.length - 1));
    members.forEach((i, k) => {
      normalized[i] = normByStd ? (xs[k]! - mean) / (std + GRPO_EPS) : xs[k]! - mean;
    });
  }
  return normalized;
}

/** RLOO's baseline: each score minus the mean of the others in its group. */
function leaveOneOut(scores: readonly number[], groups: Map<string, number[]>): number[] {
  const out = new Array<number>(scores.length).fill(0);
  for (const members of groups.values()) {
    const n = members.length;
    if (n === 1) {
      // verl: with no other member the baseline is 0.
      out[members[0]!] = scores[members[0]!]!;
      continue;
    }
    const sum = members.reduce((a, i) => a + scores[i]!, 0);
    for (const i of members) out[i] = scores[i]! - (sum - scores[i]!) / (n - 1);
  }
  return out;
}

function grpo(seqs: readonly AdvantageSequence[], normByStd: boolean): AdvantageResult[] {
  const normalized = groupNormalized(seqs.map(score), groupsOf(seqs), normByStd);
  return seqs.map((s, i) => ({ advantages: broadcast(normalized[i]!, s.mask) }));
}

function rloo(seqs: readonly AdvantageSequence[]): AdvantageResult[] {
  const out = leaveOneOut(seqs.map(score), groupsOf(seqs));
  return seqs.map((s, i) => ({ advantages: broadcast(out[i]!, s.mask) }));
}

/**
 * The step-level MDP (Agent-R1 v0.1): each sequence is one step of an episode, and a step is the
 * unit of time. A step's reward is the sum of its token rewards (its process reward; the outcome
 * on the last step).
 * - GRPO, RLOO: the episode's score (the sum of its steps' rewards) is normalized within its group,
 *   as the paper's form does it, and every step's action tokens get it.
 * - REINFORCE++: each step's discounted return over the steps, G_k = r_k + γ·G_{k+1}.
 * - GAE: over steps, with the critic's value of each step's state (the token at `valueAt`, the
 *   step's last prompt token): δ_k = r_k + γ·V_{k+1} − V_k, A_k = δ_k + γλ·A_{k+1}; the value
 *   target R_k = A_k + V_k sits on that token.
 * Whitening (REINFORCE++, GAE) is over steps, each once, not over tokens: a step's advantage is
 * repeated on every token of its action, and long actions would otherwise weigh more.
 */
function stepLevel(
  estimator: AdvantageEstimator,
  seqs: readonly AdvantageSequence[],
  gamma: number,
  lambda: number,
  options: AdvantageOptions,
): AdvantageResult[] {
  const episodes = episodesOf(seqs);
  const stepReward = seqs.map(score);
  const perStep = new Array<number>(seqs.length).fill(0);
  if (estimator === 'grpo' || estimator === 'rloo') {
    const keys = [...episodes.keys()];
    const scores = keys.map((e) => episodes.get(e)!.reduce((a, i) => a + stepReward[i]!, 0));
    const groups = new Map<string, number[]>();
    keys.forEach((e, k) => {
      const group = seqs[episodes.get(e)![0]!]!.group!;
      const members = groups.get(group);
      if (members) members.push(k);
      else groups.set(group, [k]);
    });
    const value =
      estimator === 'grpo' ? groupNormalized(scores, groups, options.normByStd ?? true) : leaveOneOut(scores, groups);
    keys.forEach((e, k) => {
      for (const i of episodes.get(e)!) perStep[i] = value[k]!;
    });
    return seqs.map((s, i) => ({ advantages: broadcast(perStep[i]!, s.mask) }));
  }
  const returns = new Array<number>(seqs.length).fill(0);
  for (const steps of episodes.values()) {
    let next = 0; // G_{k+1} (REINFORCE++) or A_{k+1} (GAE)
    let nextValue = 0;
    for (let k = steps.length - 1; k >= 0; k--) {
      const i = steps[k]!;
      if (estimator === 'reinforce++') {
        next = stepReward[i]! + gamma * next;
        perStep[i] = next;
        returns[i] = next;
      } else {
        const s = seqs[i]!;
        const value = s.values![s.valueAt!]!;
        next = stepReward[i]! + gamma * nextValue - value + gamma * lambda * next;
        perStep[i] = next;
        returns[i] = next + value;
        nextValue = value;
      }
    }
  }
  if (options.whiten ?? true) whitenSteps(perStep, seqs);
  return seqs.map((s, i) => {
    const result: AdvantageResult = { advantages: broadcast(perStep[i]!, s.mask) };
    if (estimator === 'reinforce++') result.returns = broadcast(returns[i]!, s.mask);
    else {
      result.returns = s.mask.map((_, t) => (t === s.valueAt ? returns[i]! : 0));
      result.valueMask = s.mask.map((_, t) => (t === s.valueAt ? 1 : 0));
    }
    return result;
  });
}

/** Each episode's sequences, in step order. */
function episodesOf(seqs: readonly AdvantageSequence[]): Map<string, number[]> {
  const episodes = new Map<string, number[]>();
  seqs.forEach((s, i) => {
    if (s.episode === undefined)
      throw new RlInputError(`sequence ${i} has no episode key, but others are step-level samples: mix none`);
    const steps = episodes.get(s.episode);
    if (steps) steps.push(i);
    else episodes.set(s.episode, [i]);
  });
  for (const [episode, steps] of episodes) {
    steps.sort((a, b) => seqs[a]!.step! - seqs[b]!.step!);
    for (let k = 1; k < steps.length; k++) {
      if (seqs[steps[k]!]!.step === seqs[steps[k - 1]!]!.step)
        throw new RlInputError(`episode ${episode} has two samples of step ${seqs[steps[k]!]!.step}`);
      if (seqs[steps[k]!]!.group !== seqs[steps[0]!]!.group)
        throw new RlInputError(`episode ${episode} has steps in different groups`);
    }
  }
  return episodes;
}

/** Whitening over steps: (x − mean)·rsqrt(var + 1e-8) with each step (with any action token) counted once. */
function whitenSteps(perStep: number[], seqs: readonly AdvantageSequence[]): void {
  const counted = seqs.flatMap((s, i) => (s.mask.includes(1) ? [i] : []));
  if (counted.length < 2) {
    throw new RlInputError(`whitening needs at least 2 steps in the batch, got ${counted.length} (pass whiten: false)`);
  }
  const mean = counted.reduce((a, i) => a + perStep[i]!, 0) / counted.length;
  const ss = counted.reduce((a, i) => a + (perStep[i]! - mean) ** 2, 0);
  const scale = 1 / Math.sqrt(ss / (counted.length - 1) + WHITEN_EPS);
  for (const i of counted) perStep[i] = (perStep[i]! - mean) * scale;
}

/**
 * verl's `masked_whiten`: (x − mean) / sqrt(var + 1e-8) over every masked position of the batch,
 * with the unbiased (Bessel-corrected) variance. Unmasked positions stay 0.
 */
function whitenInPlace(xs: number[][], masks: readonly (readonly number[])[]): void {
  let n = 0;
  let sum = 0;
  xs.forEach((x, i) =>
    x.forEach((v, t) => {
      if (masks[i]![t] === 1) {
        n++;
        sum += v;
      }
    }),
  );
  if (n < 2) {
    throw new RlInputError(`whitening needs at least 2 action tokens in the batch, got ${n} (pass whiten: false)`);
  }
  const mean = sum / n;
  let ss = 0;
  xs.forEach((x, i) =>
    x.forEach((v, t) => {
      if (masks[i]![t] === 1) ss += (v - mean) ** 2;
    }),
  );
  const scale = 1 / Math.sqrt(ss / (n - 1) + WHITEN_EPS);
  xs.forEach((x, i) => {
    for (let t = 0; t < x.length; t++) x[t] = masks[i]![t] === 1 ? (x[t]! - mean) * scale : 0;
  });
}
