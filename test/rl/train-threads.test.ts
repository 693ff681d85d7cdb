import test from 'ava';
import { GradientError, trainThreadsFor } from '../../src/policy/tfjs/data-parallel.ts';
import { ReplicaError, trainReplicas } from '../../src/rl/train-threads.ts';

// Training on real replica threads (bit-identical weights, a replica that dies): train-threads.slow.test.ts.

test('training threads: wasm and cpu take the number asked for; tfjs-node and webgpu stay on one thread and say why', (t) => {
  t.deepEqual(trainThreadsFor('wasm', 3), { threads: 3 });
  t.deepEqual(trainThreadsFor('cpu', 1), { threads: 1 });
  const node = trainThreadsFor('tensorflow', 2);
  t.is(node.threads, 1);
  t.regex(node.note!, /tensorflow backend's bindings do not load in worker threads/);
  t.deepEqual(trainThreadsFor('webgpu', 4), {
    threads: 1,
    note: 'training on one thread: on webgpu the GPU does the work',
  });
  t.throws(() => trainThreadsFor('wasm', 0), { instanceOf: GradientError, message: /integer ≥ 1, got 0/ });
});

test('training threads are capped at the cores (same weights, said once) and refused past 256', (t) => {
  t.like(trainReplicas('wasm', 8, 2), {
    threads: 2,
    note: 'training on 2 threads: 8 asked, this machine has 2 cores',
  });
  const one = trainReplicas('wasm', 1, 64);
  t.deepEqual(one, { threads: 1 });
  t.throws(() => trainReplicas('wasm', 5000, 64), {
    instanceOf: ReplicaError,
    message: 'training threads must be an integer from 1 to 256, got 5000',
  });
});
