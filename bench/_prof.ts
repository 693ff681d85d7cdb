import { LinearKernel } from '../src/architectures/kernel/linear-kernel.ts';
import { HeadKernel } from '../src/architectures/kernel/head-kernel.ts';
const t = { linear: 0, linearN: 0, head: 0 };
const orig = LinearKernel.prototype.apply;
LinearKernel.prototype.apply = function (...a: Parameters<typeof orig>) { const s = performance.now(); try { return orig.apply(this, a); } finally { t.linear += performance.now() - s; t.linearN++; } };
for (const k of ['forward', 'backward'] as const) { const o = HeadKernel.prototype[k]; (HeadKernel.prototype as any)[k] = function (...a: any[]) { const s = performance.now(); try { return (o as any).apply(this, a); } finally { t.head += performance.now() - s; } }; }
process.on('exit', () => process.stderr.write(`timers ${JSON.stringify(t)}\n`));
process.argv.push('--child', 'lora', '--shape', process.env.SHAPE ?? 'smollm2-135m-body', '--steps', '1');
await import('../bench/hf-sft-step.ts');
