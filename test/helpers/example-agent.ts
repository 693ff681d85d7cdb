import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './cli.ts';

/**
 * An agent folder `dir` of examples/ai-sdk-agent's code (re-exported by path, so its packages resolve
 * from the repository) with the example's tasks of `splits`, the test split cut to `tests`: start
 * --agent reads only the folder's tasks.jsonl.
 */
export function exampleAgentFolder(dir: string, splits: string[], tests = Infinity): string {
  mkdirSync(dir);
  const example = join(repoRoot, 'examples/ai-sdk-agent');
  writeFileSync(
    join(dir, 'index.ts'),
    `export { default, demonstrator } from ${JSON.stringify(join(example, 'index.ts'))};\n`,
  );
  const lines = readFileSync(join(example, 'tasks.jsonl'), 'utf8').trim().split('\n');
  const kept = lines.filter((l) => splits.includes(JSON.parse(l).split));
  const cut = [
    ...kept.filter((l) => JSON.parse(l).split !== 'test'),
    ...kept.filter((l) => JSON.parse(l).split === 'test').slice(0, tests),
  ];
  writeFileSync(join(dir, 'tasks.jsonl'), cut.join('\n') + '\n');
  return dir;
}
