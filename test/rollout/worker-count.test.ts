import test from 'ava';
import { capWorkers } from '../../src/rollout/worker-count.ts';

test('workers are capped by the episodes and the cores, with the reason', (t) => {
  t.deepEqual(capWorkers(4, 100, 8), { workers: 4 });
  t.deepEqual(capWorkers(0, 100, 8), { workers: 0 });
  t.deepEqual(capWorkers(200, 2, 16), { workers: 2, reason: '200 workers asked, 2 used (2 episodes)' });
  t.deepEqual(capWorkers(200, 100, 16), { workers: 16, reason: '200 workers asked, 16 used (16 cores)' });
  t.deepEqual(capWorkers(3, 1, 16), { workers: 1, reason: '3 workers asked, 1 used (1 episode)' });
});
