import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { cli } from '../helpers/cli.ts';
import { exampleAgentFolder } from '../helpers/example-agent.ts';

// start --agent on a tasks file without the optional dev split (slow: a whole quick run, ~15 s; the
// agent-cli.slow.test.ts runs one with dev).
const tmp = mkdtempSync(join(tmpdir(), 'agent-r1-start-agent-'));

test('start --agent --quick without dev tasks: no dev evals, the final GRPO checkpoint scored, the footer says so', (t) => {
  t.timeout(5 * 60_000);
  const agent = exampleAgentFolder(join(tmp, 'no-dev'), ['train', 'test'], 3);
  const out = join(tmp, 'start');
  const r = cli(['start', '--agent', agent, '--quick', '--out', out, '--json'], { timeout: 180_000 });
  t.is(r.code, 0, r.stderr);
  t.regex(r.stderr, /has no "dev" tasks: no dev evals, the final GRPO checkpoint is scored/);
  t.notRegex(r.stderr, /grpo eval on dev/);
  t.regex(r.stdout, /; 3 held-out test tasks \(of 1003 in .*tasks\.jsonl: train 1000, dev 0\)/);
  t.is(readFileSync(join(out, 'test-grpo.jsonl'), 'utf8').trim().split('\n').length, 3);
  const result = JSON.parse(readFileSync(join(out, 'agent-start.json'), 'utf8'));
  t.deepEqual(result.tasks, { train: 1000, test: 3, dev: 0 });
  t.is(result.selected.devScore, null);
});
