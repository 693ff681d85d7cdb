import test from 'ava';
import { createMultihopQaScenario } from '../../scenarios/multihop-qa/index.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import { stallDeadlineMs, workerThreads } from '../../src/rollout/worker-threads.ts';
import { rollout, type RolloutOptions } from '../../src/rollout/rollout.ts';
import { SummarizerError, TaskDrawMismatchError } from '../../src/core/errors.ts';
import type { FinishedEpisode } from '../../src/rollout/finished-episode.ts';
import { bytes, call, FAULTY, faulty, inWorkers } from '../helpers/worker-threads.ts';

// The slower ones (the 1/2/4-worker bytes, a long run, the crash recoveries, a summarizer given records) are in
// worker-threads.slow.test.ts.

/** Counts the calls of JSON.parse on a record's line in this thread while `run` runs. */
async function recordParses<T>(run: () => Promise<T>): Promise<{ result: T; parses: number }> {
  const parse = JSON.parse;
  let parses = 0;
  JSON.parse = (text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    if (typeof text === 'string' && text.includes('"checksum":"')) parses++;
    return parse(text, reviver);
  };
  try {
    return { result: await run(), parses };
  } finally {
    JSON.parse = parse;
  }
}

// Serial (AVA runs these before the others), so that no other test's parsing is counted.
test.serial(
  "through workers each record's line arrives as bytes and is handed on unparsed, with the lines and summary of a run in this thread",
  async (t) => {
    const scenario = createMultihopQaScenario();
    const policy = await referencePolicy(scenario, 'noisy-expert', 7);
    const options = { scenario, policy, split: 'train', episodes: 40, seed: 11, keepRecords: false };
    const play = async (workers: number) => {
      const lines: string[] = [];
      let asBytes = 0;
      const onEpisode = (e: FinishedEpisode) => {
        if (e.line instanceof Uint8Array) asBytes++;
        lines.push(e.text);
      };
      const run = () =>
        workers === 0
          ? rollout({ ...options, onEpisode })
          : inWorkers({ ...options, onEpisode }, { workers, scenarioSource: 'multihop-qa' });
      const { result, parses } = await recordParses(run);
      return { lines, asBytes, summary: result.summary, parses };
    };
    const here = await play(0);
    t.is(here.lines.length, 40);
    for (const workers of [1, 2]) {
      const there = await play(workers);
      t.is(there.asBytes, 40, `${workers} workers`);
      t.is(there.parses, 0, 'no record line parsed on this thread');
      t.deepEqual(there.lines, here.lines);
      // The scenario's own metrics (em, f1, by question type) folded from the workers' digests, to the bit.
      t.deepEqual(there.summary, here.summary);
    }
  },
);

test('a scenario summarizer that throws fails the run with a SummarizerError naming the episode, in this thread and in workers', async (t) => {
  const scenario = await faulty([['<answer>ok</answer>']], { summarizer: 'throws' });
  const policy = await scenario.policies.script!({ scenario, seed: 0 });
  const options = { scenario, policy, split: 'train', episodes: 12, seed: 3 };
  const message = 'scenario faulty: its summarizer threw on episode 2: no summary for f-2';
  await t.throwsAsync(rollout(options), { instanceOf: SummarizerError, message });
  const executor = workerThreads({ workers: 2, scenarioSource: FAULTY });
  try {
    await t.throwsAsync(rollout({ ...options, executor }), { instanceOf: SummarizerError, message });
    // The pool plays on afterwards.
    const ok = await faulty([['<answer>ok</answer>']], { summarizer: 'digest' });
    const { summary } = await rollout({ ...options, scenario: ok, executor });
    t.is(summary.episodes, 12);
  } finally {
    await executor.close();
  }
  // A digest that cannot be sent between threads is the summarizer's error too.
  const uncloneable = await faulty([['<answer>ok</answer>']], { summarizer: 'uncloneable' });
  const err = await t.throwsAsync(
    inWorkers({ ...options, scenario: uncloneable }, { workers: 1, scenarioSource: FAULTY }),
    { instanceOf: SummarizerError },
  );
  t.regex(err!.message, /summarizer threw on episode 2: its digest cannot be sent to another thread/);
});

test("workers draw a run's tasks themselves (none is sent) and refuse a scenario whose draw differs there", async (t) => {
  const scripts = [['<answer>ok</answer>']];
  const options = { split: 'train', episodes: 6, seed: 3 };
  const steady = await faulty(scripts);
  const unsteady = await faulty(scripts, { ids: 'thread' });
  const policy = await steady.policies.script!({ scenario: steady, seed: 0 });
  const executor = workerThreads({ workers: 1, scenarioSource: FAULTY });
  try {
    const here = await rollout({ ...options, scenario: steady, policy });
    const there = await rollout({ ...options, scenario: steady, policy, executor });
    t.is(bytes(there.records), bytes(here.records));

    const err = await t.throwsAsync(rollout({ ...options, scenario: unsteady, policy, executor }), {
      instanceOf: TaskDrawMismatchError,
    });
    // Every episode's draw differs; the first chunk to finish names its own (which one is a race).
    const { index } = err!;
    t.like(err, { scenario: 'faulty', expected: `f-${index}@0` });
    t.regex(
      err!.message,
      new RegExp(
        `drew task f-${index}@\\d+ for episode ${index} in a worker thread, and f-${index}@0 in the main thread`,
      ),
    );
    // Tasks handed to the run (a trainer's batch) are sent as they are: nothing to draw, nothing to differ.
    const tasks = await unsteady.tasks({ split: 'train', seed: 3, count: 6 });
    const sent = await rollout({ ...options, scenario: unsteady, policy, tasks, executor });
    t.deepEqual(
      sent.records.map((r) => r.task.id),
      tasks.map((task) => task.id),
    );
  } finally {
    await executor.close();
  }
});

test('a hanging tool times out without holding up the other episodes', async (t) => {
  const scripts = Array.from({ length: 8 }, (_, i) =>
    i === 0 ? [call('hang'), '<answer>ok</answer>'] : ['<answer>ok</answer>'],
  );
  // A 5 s timeout: the seven others finish well within it, even on a loaded machine.
  const scenario = await faulty(scripts, { hangMs: '5000' });
  const policy = await scenario.policies.script!({ scenario, seed: 0 });
  // Progress reports come after each finished episode; records are emitted in index order, so the
  // hanging episode (index 0) is emitted the moment it finishes.
  let finished = 0;
  let finishedBeforeHang = -1;
  const options: RolloutOptions = {
    scenario,
    policy,
    split: 'train',
    episodes: 8,
    seed: 1,
    concurrency: 8,
    onProgress: (p) => (finished = p.done),
    onRecord: (r) => {
      if (r.index === 0) finishedBeforeHang = finished;
    },
  };
  const result = await inWorkers(options, { workers: 1, scenarioSource: FAULTY });
  const hang = result.records[0]!;
  t.is(hang.turns[0]!.results[0]!.error!.kind, 'timeout');
  t.true(hang.outcome.success);
  // The seven others finished while the hanging one waited out its timeout.
  t.is(finishedBeforeHang, 7);
});

test.serial(
  'a tool that never yields: its thread is terminated past the deadline, that episode is an error that says so, the run goes on',
  async (t) => {
    const scripts = [
      ['<answer>ok</answer>'],
      [call('echo', { text: 'a' }), call('spin'), '<answer>ok</answer>'],
      [call('echo', { text: 'b' }), '<answer>ok</answer>'],
      ['<answer>ok</answer>'],
    ];
    const scenario = await faulty(scripts);
    const policy = await scenario.policies.script!({ scenario, seed: 0 });
    const options = { scenario, policy, split: 'train', episodes: 8, seed: 3 };
    const started = performance.now();
    const result = await inWorkers(options, { workers: 1, scenarioSource: FAULTY, stallTimeoutMs: 1000 });
    const seconds = (performance.now() - started) / 1000;
    t.is(result.records.length, 8);
    const stuck = result.records.filter((r) => r.status === 'error');
    t.deepEqual(
      stuck.map((r) => r.task.id),
      ['f-1', 'f-5'],
    );
    t.is(
      stuck[0]!.error,
      'its worker thread was busy for over 1 s without yielding (scenario code that never returns, e.g. a loop in a tool) and was terminated',
    );
    t.true(result.records.filter((r) => r.status === 'ok').every((r) => r.outcome.success));
    t.true(result.throughput.crashes >= 1);
    // One deadline for the pool's thread, then one for each stuck episode played alone (in parallel up
    // to the pool's size), and no more.
    t.true(seconds < 20, `${seconds.toFixed(1)} s`);
    t.is(stallDeadlineMs({ toolTimeoutMs: 5000 }), 15_000);
    t.is(stallDeadlineMs({ toolTimeoutMs: 20_000 }), 45_000);
  },
);
