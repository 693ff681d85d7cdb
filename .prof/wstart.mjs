import { Worker } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
const boot = pathToFileURL(process.argv[2]).href;
const entry = pathToFileURL(process.argv[3]).href;
for (let i = 0; i < 3; i++) {
  const t0 = performance.now();
  const w = new Worker(`import(${JSON.stringify(boot)}).then(async () => { await import(${JSON.stringify(entry)}); process.exit(0); })`, { eval: true });
  await new Promise((r) => w.on('exit', r));
  console.log(process.argv[2], (performance.now() - t0).toFixed(0), 'ms');
}
