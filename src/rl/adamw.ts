import * as tf from '@tensorflow/tfjs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { TrainingError } from './errors.ts';

export interface AdamWOptions {
  lr: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** Decoupled weight decay (Loshchilov & Hutter), applied to matrices only (not biases, norms). */
  weightDecay?: number;
}

/**
 * AdamW with its whole state in plain view, so a checkpoint restores it bit for bit: tfjs's own Adam
 * rebuilds its β-powers with pow() on restore, which differs in the last bit from the running
 * product and breaks exact resume. Bias corrections here are computed in float64 from the step count.
 */
export class AdamW {
  private readonly m: tf.Variable[];
  private readonly v: tf.Variable[];
  private t = 0;
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  lr: number;

  constructor(
    private readonly vars: readonly tf.Variable[],
    options: AdamWOptions,
  ) {
    this.lr = options.lr;
    this.beta1 = options.beta1 ?? 0.9;
    this.beta2 = options.beta2 ?? 0.999;
    this.eps = options.eps ?? 1e-8;
    this.weightDecay = options.weightDecay ?? 0;
    if (!(this.lr > 0)) throw new TrainingError(`learning rate must be > 0, got ${this.lr}`);
    this.m = vars.map((x) => tf.variable(tf.zerosLike(x), false));
    this.v = vars.map((x) => tf.variable(tf.zerosLike(x), false));
  }

  get steps(): number {
    return this.t;
  }

  /** One update; `grads` maps variable names to gradients (missing ones are left alone). */
  step(grads: tf.NamedTensorMap): void {
    this.t++;
    const c1 = 1 - this.beta1 ** this.t;
    const c2 = 1 - this.beta2 ** this.t;
    tf.tidy(() => {
      this.vars.forEach((p, i) => {
        const g = grads[p.name];
        if (!g) return;
        const m = this.m[i]!;
        const v = this.v[i]!;
        m.assign(tf.add(tf.mul(m, this.beta1), tf.mul(g, 1 - this.beta1)));
        v.assign(tf.add(tf.mul(v, this.beta2), tf.mul(tf.square(g), 1 - this.beta2)));
        const update = tf.div(tf.div(m, c1), tf.add(tf.sqrt(tf.div(v, c2)), this.eps));
        const decayed = this.weightDecay > 0 && p.rank >= 2 ? tf.mul(p, 1 - this.lr * this.weightDecay) : p;
        p.assign(tf.sub(decayed, tf.mul(update, this.lr)));
      });
    });
  }

  /** Writes adamw.json (step count, names, shapes) and adamw.bin (m then v, float32) into dir. */
  async save(dir: string): Promise<void> {
    const parts = [...this.m, ...this.v].map((x) => x.dataSync() as Float32Array);
    const total = parts.reduce((a, p) => a + p.length, 0);
    const bin = new Float32Array(total);
    let offset = 0;
    for (const p of parts) {
      bin.set(p, offset);
      offset += p.length;
    }
    await writeFile(join(dir, 'adamw.bin'), new Uint8Array(bin.buffer));
    const manifest = { t: this.t, lr: this.lr, vars: this.vars.map((x) => ({ name: x.name, shape: x.shape })) };
    await writeFile(join(dir, 'adamw.json'), JSON.stringify(manifest));
  }

  async load(dir: string): Promise<void> {
    const manifest = JSON.parse(await readFile(join(dir, 'adamw.json'), 'utf8')) as {
      t: number;
      vars: { name: string; shape: number[] }[];
    };
    if (manifest.vars.length !== this.vars.length) {
      throw new TrainingError(`optimizer state has ${manifest.vars.length} variables, the model ${this.vars.length}`);
    }
    manifest.vars.forEach((saved, i) => {
      const shape = this.vars[i]!.shape;
      if (saved.shape.join(',') !== shape.join(',')) {
        throw new TrainingError(`optimizer state for variable ${i} has shape [${saved.shape}], the model [${shape}]`);
      }
    });
    const buf = await readFile(join(dir, 'adamw.bin'));
    const all = new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    let offset = 0;
    for (const x of [...this.m, ...this.v]) {
      const n = x.size;
      if (offset + n > all.length) throw new TrainingError('optimizer state file is too short');
      tf.tidy(() => x.assign(tf.tensor(all.slice(offset, offset + n), x.shape, 'float32')));
      offset += n;
    }
    this.t = manifest.t;
  }

  dispose(): void {
    for (const x of [...this.m, ...this.v]) x.dispose();
  }
}
