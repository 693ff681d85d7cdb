// Writes tasks.jsonl: GSM8K-style multi-step word problems from the calculator scenario's generator.
// train: 2–4 operations; dev: 2–4; test (held out): 3–4. Run: npx tsx examples/ai-sdk-agent/make-tasks.ts
import { writeFileSync } from 'node:fs';
import { multistepTasks } from '../../scenarios/calculator/multistep.ts';

const tasks = [...multistepTasks('train', 0, 1000), ...multistepTasks('dev', 0, 64), ...multistepTasks('test', 0, 200)];
const lines = tasks.map(({ id, split, question, answer, type, meta }) =>
  JSON.stringify({ id, split, question, answer, type, meta }),
);
writeFileSync(new URL('./tasks.jsonl', import.meta.url), lines.join('\n') + '\n');
