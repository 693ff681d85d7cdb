import { canonicalJson } from '../core/canonical-json.ts';
import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import { parseRecordLine, serializeRecord } from '../record/record.ts';
import { firstDivergence, replayRecord, type Divergence } from '../replay/replay.ts';
import type { RolloutExecutor } from '../rollout/executor.ts';
import { inThread } from '../rollout/in-thread.ts';
import { rollout } from '../rollout/rollout.ts';
import { workerThreads } from '../rollout/worker-threads.ts';
import { referencePolicy } from '../scenario/reference-policy.ts';
import type { PolicyFactory, Scenario } from '../scenario/scenario.ts';

/**
 * The part of `scenario check` that proves the project's main promise for a scenario: the same
 * seed gives the same records, and every record replays. Each reference policy plays a few
 * episodes of every split twice (in this thread, then in a fresh worker thread that loads the
 * scenario from its folder, so no module state is shared), the records are compared byte for
 * byte, and the first run's records are replayed from their recorded tool results and with live
 * tools. Each difference is reported at its episode, turn and field, with the likely cause.
 */

export interface Finding {
  kind: 'nondeterminism' | 'replay' | 'expert' | 'policy';
  where: string;
  message: string;
}

export interface DeterminismOptions {
  seed: number;
  config?: Partial<EpisodeConfig>;
  /** The most time one episode may take (ms); a run of n episodes gets n times this. */
  episodeTimeoutMs: number;
  /** Episodes each policy plays per split (default 2). */
  episodesPerSplit?: number;
  /** The scenario's folder: the second run loads it there in a fresh worker thread (else: this thread again). */
  source?: string;
  /** The reference expert's success rate below which it is a warning (default 1: every episode). */
  expertSuccess?: number;
  /** Told each policy's name before its episodes are played. */
  onPolicy?: (name: string) => void;
}

export interface DeterminismReport {
  problems: Finding[];
  warnings: Finding[];
  checked: string[];
}

const clip = (v: unknown, n = 160) => {
  const s = v === undefined ? '(absent)' : canonicalJson(v);
  return s.length > n ? `${s.slice(0, n)}…` : s;
};

/** Turn fields produced by the policy, by the tools, and everything else (the ToolEnv). */
const POLICY_FIELDS = new Set(['text', 'tokens', 'logprobs', 'tokenCount']);
const TASK_FIELDS = new Set(['task', 'prompt', 'promptTokens']);

/** Where nondeterminism shows up says where it comes from. */
export function likelyCause(field: string): string {
  if (POLICY_FIELDS.has(field))
    return (
      'the policy acts differently on the same input: Math.random or Date.now in the reference policy ' +
      '(draw from createRng(seed) with the seed each act() call is given)'
    );
  if (field === 'results')
    return (
      'a tool returns something else for the same call and seed: Math.random or Date.now in a tool ' +
      "(draw from ctx.rng, the episode's world stream), or a tool reads state kept across episodes " +
      '(module-level variables; make per-episode state in env.init)'
    );
  if (TASK_FIELDS.has(field))
    return (
      'the task or its prompt differ: Math.random or Date.now in tasks() or env.prompt ' +
      '(draw from createRng(deriveSeed(split, seed)))'
    );
  return (
    'the ToolEnv computes something else from the same results: Math.random or Date.now in env.init, ' +
    'env.step or env.outcome, or state kept across episodes (module-level variables; make per-episode ' +
    'state in env.init)'
  );
}

const KEY_ORDER =
  "a tool's result depends on the order of an object's keys: a record stores objects with their keys " +
  'sorted, so what the tool is given back from the file (task.meta, recorded state) has another key ' +
  'order than when it was made; build results in an order of your own (name each field, or sort the ' +
  'keys), not by copying or iterating such an object';

/** Whether two texts are the same JSON value written with the keys in another order. */
function onlyKeyOrderDiffers(a: unknown, b: unknown): boolean {
  if (typeof a !== 'string' || typeof b !== 'string' || a === b) return false;
  try {
    return canonicalJson(JSON.parse(a)) === canonicalJson(JSON.parse(b));
  } catch {
    return false;
  }
}

const EFFECTS_NOT_SYNCED =
  'the world the tools changed is not rebuilt when replay feeds their recorded results back (tools do ' +
  'not run there): change the world only with commitEffect in a tool, put the effects in its result, and ' +
  'call syncEffects(state, results, apply) first thing in env.step';

/** The first difference between two records of one episode: a turn field, an episode field, or any other key. */
export function recordDifference(a: EpisodeRecord, b: EpisodeRecord): Divergence | undefined {
  const found = firstDivergence(a, b);
  if (found && found.field !== 'checksum') return found;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  keys.delete('checksum');
  for (const key of keys) {
    const x = (a as unknown as Record<string, unknown>)[key];
    const y = (b as unknown as Record<string, unknown>)[key];
    if (canonicalJson(x ?? null) !== canonicalJson(y ?? null))
      return { episodeId: a.episodeId, turn: null, field: key, expected: x, actual: y };
  }
  return found;
}

/** The first place inside two JSON values where they differ: its path below the field and both leaves. */
export function innerDifference(a: unknown, b: unknown, path = ''): { path: string; a: unknown; b: unknown } {
  const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object';
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++)
      if (canonicalJson(a[i] ?? null) !== canonicalJson(b[i] ?? null))
        return innerDifference(a[i], b[i], `${path}[${i}]`);
  } else if (isObject(a) && isObject(b) && !Array.isArray(a) && !Array.isArray(b)) {
    // A tool result's `content` is its `data` as text: the data names the differing part better.
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort(
      (x, y) => +(x === 'content') - +(y === 'content'),
    );
    for (const key of keys) {
      if (canonicalJson((a[key] ?? null) as never) !== canonicalJson((b[key] ?? null) as never))
        return innerDifference(a[key], b[key], `${path}.${key}`);
    }
  }
  return { path, a, b };
}

/** Where two records differ and what each holds there, e.g. `episode e#0, turn 0, field results[0].data.luck (…)`. */
function describe(d: Divergence, first: string, second: string): string {
  const inner = innerDifference(d.expected, d.actual);
  const call = d.call === undefined ? '' : `[${d.call}]`;
  const where = `episode ${d.episodeId}, ${d.turn === null ? 'end' : `turn ${d.turn + 1}`}, field ${d.field}${call}${inner.path}`;
  return `${where} differs (${first}: ${clip(inner.a)}; ${second}: ${clip(inner.b)})`;
}

class Timeout extends Error {}

async function within<T>(ms: number, controller: AbortController, work: (signal: AbortSignal) => Promise<T>) {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort(new Timeout());
      reject(new Timeout());
    }, ms);
  });
  const running = work(controller.signal);
  running.catch(() => {}); // a late failure after the timeout must not become unhandled
  try {
    return await Promise.race([running, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** How many tasks of a split the check looks at for their types. */
const TYPE_SAMPLE = 64;

/**
 * Episodes to play in a split: at least `episodesPerSplit`, and as many as it takes for the split's
 * first tasks to include every task type among its first TYPE_SAMPLE (a type first drawn late is
 * checked all the same: two tasks per split once missed a scenario's third kind).
 */
export async function episodesCoveringTypes(
  scenario: Scenario,
  split: string,
  options: Pick<DeterminismOptions, 'seed' | 'episodesPerSplit'>,
): Promise<{ episodes: number; types: string[] }> {
  const n = options.episodesPerSplit ?? 2;
  const sample = await scenario.tasks({ split, seed: options.seed, count: TYPE_SAMPLE });
  const types = new Set(sample.flatMap((t) => (t.type === undefined ? [] : [t.type])));
  const seen = new Set<string>();
  let k = 0;
  while (k < sample.length && seen.size < types.size) {
    const type = sample[k++]!.type;
    if (type !== undefined) seen.add(type);
  }
  return { episodes: Math.max(n, k), types: [...types].sort() };
}

/** One run: every split's episodes, in split order. */
async function play(
  scenario: Scenario,
  policy: Policy,
  executor: RolloutExecutor,
  options: DeterminismOptions,
  episodes: ReadonlyMap<string, number>,
  concurrency?: number,
): Promise<EpisodeRecord[]> {
  const records: EpisodeRecord[] = [];
  for (const split of scenario.splits) {
    const n = episodes.get(split)!;
    const controller = new AbortController();
    const run = await within(options.episodeTimeoutMs * n, controller, (signal) =>
      rollout({
        scenario,
        policy,
        split,
        episodes: n,
        seed: options.seed,
        config: options.config,
        executor,
        signal,
        concurrency,
      }),
    );
    records.push(...run.records);
  }
  return records;
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

export async function checkDeterminism(
  scenario: Scenario,
  policies: ReadonlyArray<{ name: string; factory: PolicyFactory }>,
  options: DeterminismOptions,
): Promise<DeterminismReport> {
  const report: DeterminismReport = { problems: [], warnings: [], checked: [] };
  const episodes = new Map<string, number>();
  const typed: string[] = [];
  for (const split of scenario.splits) {
    // tasks() that throws is reported where the episodes are played.
    const covering = await episodesCoveringTypes(scenario, split, options).catch(() => ({
      episodes: options.episodesPerSplit ?? 2,
      types: [],
    }));
    episodes.set(split, covering.episodes);
    if (covering.types.length > 0) typed.push(`${split} ${covering.episodes} (${covering.types.join(', ')})`);
  }
  if (typed.length > 0)
    report.checked.push(
      `task types: every one among a split's first ${TYPE_SAMPLE} tasks is played: ${typed.join('; ')}`,
    );
  for (const { name, factory } of policies) {
    options.onPolicy?.(name);
    const where = `policies.${name}`;
    const problem = (kind: Finding['kind'], message: string) => report.problems.push({ kind, where, message });
    // A reference policy made by name carries its seed, so a worker thread remakes the same one.
    const policy = Object.hasOwn(scenario.policies, name)
      ? await referencePolicy(scenario, name, options.seed)
      : await factory({ scenario, seed: options.seed });
    // The first run here, several episodes at once; the second in a fresh thread where the policy can
    // be rebuilt there (a reference policy by its own name), else here again, one episode at a time.
    const inWorker = options.source !== undefined && policy.id === name && Object.hasOwn(scenario.policies, name);
    let first: EpisodeRecord[];
    let second: EpisodeRecord[];
    const secondExecutor = inWorker ? workerThreads({ workers: 1, scenarioSource: options.source }) : inThread();
    try {
      first = await play(scenario, policy, inThread(), options, episodes);
      const again = inWorker ? policy : await factory({ scenario, seed: options.seed });
      second = await play(scenario, again, secondExecutor, options, episodes, inWorker ? undefined : 1);
    } catch (err) {
      const total = [...episodes.values()].reduce((a, b) => a + b, 0);
      problem(
        'policy',
        err instanceof Timeout
          ? `the policy did not finish its ${total} check episodes in time (${options.episodeTimeoutMs} ms each)`
          : `playing the check episodes failed: ${errorText(err)}`,
      );
      continue;
    } finally {
      await secondExecutor.close();
    }

    // Played twice: the same bytes.
    let same = first.length === second.length;
    for (let i = 0; same && i < first.length; i++) {
      if (serializeRecord(first[i]!) === serializeRecord(second[i]!)) continue;
      same = false;
      const d = recordDifference(first[i]!, second[i]!)!;
      problem(
        'nondeterminism',
        `played twice with the same seed, ${describe(d, 'first run', 'second run')}; likely cause: ${likelyCause(d.field)}`,
      );
    }
    if (same && first.length !== second.length) {
      problem('nondeterminism', `played twice, the runs gave ${first.length} and ${second.length} episodes`);
    }

    // Replayed from the records as they are read back from a file (objects' keys sorted, as
    // `replay` finds them): recorded tool results fed back, then the tools run again.
    let replayOk = true;
    for (const record of first.map((r) => parseRecordLine(serializeRecord(r)))) {
      const recorded = await replayRecord(record, scenario).catch((err: unknown) => errorText(err));
      const live = await replayRecord(record, scenario, { liveTools: true }).catch((err: unknown) => errorText(err));
      if (typeof recorded === 'string' || !recorded.verified) {
        replayOk = false;
        const liveOk = typeof live !== 'string' && live.verified;
        if (typeof recorded === 'string') {
          problem('replay', `episode ${record.episodeId} cannot be replayed from its record: ${recorded}`);
        } else {
          const d = recorded.divergence!;
          const cause = liveOk ? EFFECTS_NOT_SYNCED : likelyCause(d.field);
          problem(
            'replay',
            `replayed from its record (recorded tool results), ${describe(d, 'recorded', 'replayed')}; likely cause: ${cause}`,
          );
        }
        break;
      }
      // A tool that draws differently shows up here too; it was already named when the runs differed.
      if (same && (typeof live === 'string' || !live.verified)) {
        replayOk = false;
        if (typeof live === 'string')
          problem('replay', `episode ${record.episodeId} cannot be replayed with live tools: ${live}`);
        else {
          const d = live.divergence!;
          const inner = innerDifference(d.expected, d.actual);
          const cause = onlyKeyOrderDiffers(inner.a, inner.b) ? KEY_ORDER : likelyCause(d.field);
          problem('replay', `replayed with live tools, ${describe(d, 'recorded', 'replayed')}; likely cause: ${cause}`);
        }
        break;
      }
    }

    const wins = first.filter((r) => r.outcome.success).length;
    const rate = first.length === 0 ? 1 : wins / first.length;
    if (name === 'expert' && rate < (options.expertSuccess ?? 1)) {
      const failed = first.find((r) => !r.outcome.success)!;
      report.warnings.push({
        kind: 'expert',
        where,
        message:
          `the reference expert succeeded in ${wins} of ${first.length} of its own episodes (${Math.round(rate * 100)}%); ` +
          `e.g. ${failed.episodeId} ended ${failed.endReason} after ${failed.turns.length} turns with outcome ${failed.outcome.reward}`,
      });
    }
    // A pass only: what differs or diverged is a problem above, not a line with a tick.
    const where2 = inWorker ? 'here and in a fresh worker thread' : 'twice in this thread';
    if (same && replayOk)
      report.checked.push(
        `${where}: ${first.length} episodes played ${where2}: identical bytes; ` +
          `replayed (recorded tool results, live tools): verified; success ${wins}/${first.length}`,
      );
  }
  return report;
}
