import { initBackend } from '../src/policy/tfjs/backend.ts';
import { loadScenario } from '../src/scenario/load.ts';
import { resolvePolicy } from '../src/app/resolve-policy.ts';
import { builtinScenarios } from '../scenarios/index.ts';
import { rollout } from '../src/rollout/rollout.ts';
import { sequencesFromRecords, recordTexts, sftMicroGradient } from '../src/policy/tfjs/sft.ts';
import { trainTokenizer } from '../src/policy/tfjs/tokenizer.ts';
import { chatEncoding } from '../src/policy/tfjs/chat-template.ts';
import { GPTModel } from '../src/policy/tfjs/model.ts';
import { DEFAULT_MODEL_CONFIG } from '../src/policy/tfjs/model-config.ts';
import { sumMicroGradients } from '../src/policy/tfjs/data-parallel.ts';

await initBackend(process.env.BACKEND ?? 'wasm');
const scenario = await loadScenario('calculator', builtinScenarios);
const teacher = await resolvePolicy('expert', scenario, 0);
const { records } = await rollout({ scenario, policy: teacher, split: 'train', episodes: 16, seed: 1 });
const tokenizer = trainTokenizer(recordTexts(records), { vocabSize: 1024 });
const config = { ...DEFAULT_MODEL_CONFIG, vocabSize: tokenizer.vocabSize };
const seqs = sequencesFromRecords(records, chatEncoding(tokenizer), { contextLength: 512, onlySuccessful: true }).slice(0, 8);
const model = new GPTModel(config, 1);
const agentTokens = seqs.reduce((n, b) => n + b.mask.reduce((a, m, t) => a + (t > 0 ? m : 0), 0), 0);
const job = (part: typeof seqs) => ({ tokens: part.map((b) => b.tokens), masks: part.map((b) => b.mask), pad: tokenizer.pad, denominator: agentTokens });
const whole = sftMicroGradient(model, job(seqs));
const ones = seqs.map((s) => sftMicroGradient(model, job([s])));
console.log('lengths', seqs.map((s) => s.tokens.length));
console.log('loss whole', whole.stats.loss, 'sum ones', ones.reduce((a, p) => a + p.stats.loss, 0));
const a = sumMicroGradients(model.trainableVariables, [whole]);
const b = sumMicroGradients(model.trainableVariables, ones);
for (const v of model.trainableVariables) {
  const x = a[v.name]?.dataSync(); const y = b[v.name]?.dataSync();
  if (!x || !y) { console.log(v.name, 'missing', !!x, !!y); continue; }
  let d = 0, n = 0;
  for (let i = 0; i < x.length; i++) { d = Math.max(d, Math.abs(x[i] - y[i])); n = Math.max(n, Math.abs(x[i])); }
  console.log(v.name.padEnd(40), v.shape.join('x').padEnd(10), 'maxabs', n.toExponential(2), 'maxdiff', d.toExponential(2));
}
