import test from 'ava';
import { taskChunks } from '../../src/rollout/task-chunks.ts';

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

test('scripted episodes go in about four chunks per worker, in plan order, none over 256', (t) => {
  const chunks = taskChunks(range(1200), 2, 'scripted');
  t.deepEqual(
    chunks.map((c) => c.length),
    [150, 150, 150, 150, 150, 150, 150, 150],
  );
  t.deepEqual(chunks.flat(), range(1200));
  const large = taskChunks(range(32000), 2, 'scripted');
  t.is(large.length, 125);
  t.true(large.every((c) => c.length === 256));
  t.deepEqual(
    taskChunks(range(10), 4, 'scripted').map((c) => c.length),
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
  );
});

test('a model policy gets one chunk per worker, so its rows batch together', (t) => {
  t.deepEqual(
    taskChunks(range(10), 3, 'model').map((c) => c.length),
    [4, 4, 2],
  );
  t.deepEqual(taskChunks(range(1), 3, 'model'), [[0]]);
});

test('no episodes, no chunks', (t) => {
  t.deepEqual(taskChunks([], 2, 'scripted'), []);
  t.deepEqual(taskChunks([], 2, 'model'), []);
});
