/**
 * The queue end to end with real processes (slow: worker processes start, load a model and play):
 * `agent-r1 rollout --queue` on 3 then 1 `agent-r1 worker` processes writes the local run's bytes.
 * The fast checks are queue.test.ts and test/queue/.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { calculator } from '../../scenarios/calculator/index.ts';
import { GPTModel, initBackend, saveCheckpoint, trainTokenizer } from '../../src/policy/tfjs/index.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { cli } from '../helpers/cli.ts';
import { spawnWorker, type WorkerProcess } from '../helpers/queue-worker.ts';
import { startRedis } from '../helpers/redis.ts';

const tmp = () => mkdtempSync(join(tmpdir(), 'agent-r1-queue-cli-'));

/** A small untrained checkpoint on calculator text. */
async function tinyCheckpoint(): Promise<string> {
  await initBackend();
  const calc = calculator as unknown as Scenario;
  const texts = (await calc.tasks({ split: 'train', seed: 0, count: 40 })).map((task) => task.question);
  const tokenizer = trainTokenizer(texts, { vocabSize: 300 });
  const model = new GPTModel(
    { vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, contextLength: 256, dMlp: 32 },
    9,
  );
  const dir = join(tmp(), 'ckpt');
  await saveCheckpoint(dir, model, tokenizer, { sampling: { temperature: 1 } });
  return dir;
}

test.serial(
  'rollout --queue: 3 worker processes, then 1, write the bytes of a local --workers 2 run (scripted and checkpoint)',
  async (t) => {
    t.timeout(5 * 60_000);
    const redis = await startRedis();
    t.teardown(() => redis.dispose());
    const ckpt = await tinyCheckpoint();
    const runs = {
      scripted: ['--scenario', 'calculator', '--policy', 'random', '--episodes', '30', '--group', '2', '--seed', '5'],
      checkpoint: [
        ...['--scenario', 'calculator', '--policy', `ckpt:${ckpt}`, '--episodes', '12', '--group', '3', '--seed', '2'],
        ...['--max-turns', '2', '--max-tokens-per-turn', '12'],
      ],
    };
    const expected: { [kind: string]: string } = {};
    for (const [kind, args] of Object.entries(runs)) {
      const out = join(tmp(), 'local');
      const r = cli(['rollout', ...args, '--workers', '2', '--out', out]);
      t.is(r.code, 0, r.stderr);
      expected[kind] = readFileSync(join(out, 'episodes.jsonl'), 'utf8');
    }
    const cache = tmp();
    const workers: WorkerProcess[] = ['a', 'b', 'c'].map((name) => spawnWorker(redis.url, name, ['--cache', cache]));
    t.teardown(() => Promise.all(workers.map((w) => w.stop('SIGKILL'))).then(() => {}));
    const viaQueue = (kind: keyof typeof runs, names: string[]) => {
      const out = join(tmp(), 'queued');
      const r = cli(['rollout', ...runs[kind], '--queue', redis.url, '--chunk', '3', '--out', out, '--json']);
      t.is(r.code, 0, r.stderr);
      t.is(readFileSync(join(out, 'episodes.jsonl'), 'utf8'), expected[kind], `${kind}, workers ${names}`);
      const { queue } = r.lastJson();
      const counts = queue.workers as { [name: string]: number };
      t.true(
        Object.keys(counts).every((name) => names.includes(name)),
        JSON.stringify(counts),
      );
      t.is(
        Object.values(counts).reduce((a, b) => a + b, 0),
        kind === 'scripted' ? 30 : 12,
      );
      t.is(queue.determinismFaults, 0);
    };
    viaQueue('scripted', ['a', 'b', 'c']);
    viaQueue('checkpoint', ['a', 'b', 'c']);
    // A graceful stop: SIGTERM, nothing in play, exit 0.
    t.deepEqual(await Promise.all([workers[1]!.stop(), workers[2]!.stop()]), [0, 0]);
    t.regex(workers[1]!.log(), /SIGTERM: stopping[\s\S]*worker b \| stopped/);
    viaQueue('scripted', ['a']);
    viaQueue('checkpoint', ['a']);
  },
);
