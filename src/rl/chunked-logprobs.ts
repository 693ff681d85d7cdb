import * as tf from '@tensorflow/tfjs';
import { HeadKernel } from '../architectures/kernel/head-kernel.ts';

/**
 * Log-probabilities (and entropies) of chosen tokens under a vocabulary head, computed a block of
 * rows at a time, forward and backward, so that no [rows × vocabulary] tensor outlives its block: the
 * head of a 150k-token vocabulary makes 0.6 MB per row, and a batch's thousand action tokens would
 * otherwise hold gigabytes (per saved intermediate) for the backward pass. The backward pass
 * recomputes each block's logits (a second head matmul) instead of keeping them.
 *
 *   logits = hidden · headᵀ / T;  logp = log_softmax(logits);  out = logp[target], −Σ p·logp
 *   ∂/∂logits = g_lp·(onehot − p) + g_ent·(−p·(logp + H)),  then · 1/T through the head.
 */

/** Rows per block: a block's [rows × vocabulary] tensors stay under ~32 MB each whatever the vocabulary. */
function blockRows(vocab: number): number {
  return Math.max(1, Math.floor((8 << 20) / vocab));
}

/**
 * log-softmax over a large vocabulary, its normalizer summed in blocks of 256 then over the blocks:
 * a float32 sum of 150k terms in one run is off by ~1e-5 in the log; in two levels, ~1e-6.
 */
export function logSoftmaxBlocked(logits: tf.Tensor2D): tf.Tensor2D {
  return tf.tidy(() => {
    const shifted = logits.sub(logits.max(-1, true));
    return shifted.sub(
      rowSums(shifted.exp() as tf.Tensor2D)
        .log()
        .reshape([-1, 1]),
    ) as tf.Tensor2D;
  });
}

/**
 * Each row's sum [N] of x [N, V], in blocks of about 256 and then over the blocks (see
 * logSoftmaxBlocked). The block is a divisor of V where one lies in [128, 256] (151,936 and 151,680,
 * Qwen's, have one), so that no padded copy of x is made; otherwise x is padded to a multiple of 256.
 */
function rowSums(x: tf.Tensor2D): tf.Tensor1D {
  const [N, V] = x.shape;
  let k = 256;
  while (k >= 128 && V % k !== 0) k--;
  if (k < 128) k = 256;
  const Vp = Math.ceil(V / k) * k;
  const padded =
    Vp === V
      ? x
      : x.pad([
          [0, 0],
          [0, Vp - V],
        ]);
  return padded
    .reshape([N, Vp / k, k])
    .sum(2)
    .sum(1) as tf.Tensor1D;
}

/**
 * h [n, d] · headᵀ, as (head · hᵀ)ᵀ: a product with a transposed operand copies that operand, and
 * h is small where the head is not (0.6 GB at Qwen3's vocabulary). Each logit is still one row of h
 * against one row of the head.
 */
function logitsOf(h: tf.Tensor2D, head: tf.Tensor2D): tf.Tensor2D {
  return tf.tidy(() => tf.matMul(head, h, false, true).transpose() as tf.Tensor2D);
}

/**
 * One block's log-softmax, the chosen tokens' log-probs and, when asked, the entropies; each step in
 * its own scope, so few [n × V] tensors are alive at once.
 */
function block(h: tf.Tensor2D, head: tf.Tensor2D, targets: tf.Tensor1D, temperature: number, withEntropy: boolean) {
  const logp = tf.tidy(() => {
    const logits = logitsOf(h, head);
    return logSoftmaxBlocked(temperature === 1 ? logits : (logits.div(temperature) as tf.Tensor2D));
  });
  const V = head.shape[0];
  const picked = tf.tidy(() => {
    const flat = tf.range(0, h.shape[0], 1, 'int32').mul(tf.scalar(V, 'int32')).add(targets) as tf.Tensor1D;
    return tf.gather(logp.reshape([-1]), flat) as tf.Tensor1D;
  });
  const entropy = withEntropy
    ? tf.tidy(() => rowSums(logp.exp().mul(logp) as tf.Tensor2D).neg() as tf.Tensor1D)
    : tf.zeros([h.shape[0]]);
  return { logp, picked, entropy };
}

/**
 * `hidden` [N, d], `head` [V, d], `targets` [N] (int32): the targets' log-probs [N] and the rows'
 * entropies [N] at `temperature`, `rows` rows at a time. Differentiable with respect to hidden and
 * head; a head that is a frozen variable (LoRA's) gets no gradient, and the head must outlive the
 * backward pass (it is read there rather than saved: saving copies it, 0.6 GB at Qwen3's vocabulary).
 * Without `entropy` (SFT, and RL losses with no entropy term) the entropies are zeros and neither pass
 * computes them: a third of the work over [rows × vocabulary]. On the CPU backends the head runs on
 * `threads` threads (default: every core).
 */
export function chosenLogprobs(
  hidden: tf.Tensor2D,
  head: tf.Tensor2D,
  targets: tf.Tensor1D,
  temperature = 1,
  options: { entropy?: boolean; rows?: number; threads?: number } = {},
): { logprobs: tf.Tensor1D; entropy: tf.Tensor1D } {
  if (fusedHead(hidden, head) && options.rows === undefined) {
    return fusedChosenLogprobs(hidden, head, targets, temperature, options.entropy ?? true, options.threads);
  }
  const rows = options.rows ?? blockRows(head.shape[0]);
  const withEntropy = options.entropy ?? true;
  const N = hidden.shape[0];
  const blocks = Array.from(
    { length: Math.ceil(N / rows) },
    (_, i) => [i * rows, Math.min(rows, N - i * rows)] as const,
  );
  const trainsHead = !(head instanceof tf.Variable) || head.trainable;
  const op = tf.customGrad((h, w, t, save) => {
    const hid = h as tf.Tensor2D;
    const tg = t as tf.Tensor1D;
    (save as tf.GradSaveFunc)([hid, tg]);
    const parts = blocks.map(([from, n]) =>
      tf.tidy(() => {
        const out = block(
          hid.slice([from, 0], [n, -1]),
          w as tf.Tensor2D,
          tg.slice([from], [n]),
          temperature,
          withEntropy,
        );
        return tf.stack([out.picked, out.entropy]);
      }),
    );
    const value = tf.concat(parts, 1) as tf.Tensor2D; // [2, N]: log-probs, entropies
    tf.dispose(parts);
    return {
      value,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [sh, st] = saved as [tf.Tensor2D, tf.Tensor1D];
        const V = head.shape[0];
        let dw: tf.Tensor2D | null = trainsHead ? tf.zerosLike(head) : null;
        const dh: tf.Tensor2D[] = [];
        const scale = 1 / temperature;
        for (const [from, n] of blocks) {
          const [dhBlock, dwNext = null] = tf.tidy(() => {
            const h = sh.slice([from, 0], [n, -1]) as tf.Tensor2D;
            const target = st.slice([from], [n]) as tf.Tensor1D;
            const gLp = dy.slice([0, from], [1, n]).reshape([n, 1]);
            // ∂/∂logits = −p·(g_lp + g_ent·(logp + H)) + g_lp at each row's target. The first term is
            // dense; the second touches one logit a row, so it goes through the head as rows of it
            // (gathered here, scattered into dw once for all blocks below), never as an [n × V] one-hot.
            const dense = tf.tidy(() => {
              const { logp, entropy } = block(h, head, target, temperature, withEntropy);
              const g = withEntropy
                ? logp
                    .add(entropy.reshape([n, 1]))
                    .mul(dy.slice([1, from], [1, n]).reshape([n, 1]))
                    .add(gLp)
                : gLp;
              const d = logp.exp().mul(g).neg();
              return (temperature === 1 ? d : d.mul(scale)) as tf.Tensor2D;
            });
            const atTarget = tf.gather(head, target).mul(gLp.mul(scale));
            const dhBlock = tf.matMul(dense, head).add(atTarget) as tf.Tensor2D;
            return dw ? [dhBlock, dw.add(tf.matMul(dense, h, true, false)) as tf.Tensor2D] : [dhBlock];
          });
          dh.push(dhBlock);
          dw?.dispose();
          dw = dwNext;
        }
        if (dw) {
          // The targets' part of the head's gradient: g_lp·h added to each target's row, all blocks at once.
          const next = tf.tidy(() => {
            const g = dy.slice([0, 0], [1, N]).reshape([N, 1]).mul(scale);
            return dw!.add(tf.unsortedSegmentSum(sh.mul(g), st, V));
          });
          dw.dispose();
          dw = next as tf.Tensor2D;
        }
        const dhAll = tf.concat(dh, 0);
        tf.dispose(dh);
        // A frozen head is not on the trainer's tape: its gradient is never asked for.
        return [dhAll, dw ?? tf.zeros([1]), tf.zerosLike(st)];
      },
    };
  });
  const [logprobs, entropy] = tf.unstack(op(hidden, head, targets)) as [tf.Tensor1D, tf.Tensor1D];
  return { logprobs, entropy };
}

/**
 * On the CPU backends (wasm, cpu) the head runs in the fused kernel (architectures/kernel/head-loss):
 * on every core, no [rows × vocabulary] array, the same bits for any thread count. Its rows go four
 * floats at a time, so the width must be a multiple of 4 (every Hugging Face model's is).
 */
function fusedHead(hidden: tf.Tensor2D, head: tf.Tensor2D): boolean {
  const backend = tf.getBackend();
  return (backend === 'wasm' || backend === 'cpu') && hidden.shape[1] % 4 === 0 && head.dtype === 'float32';
}

function fusedChosenLogprobs(
  hidden: tf.Tensor2D,
  head: tf.Tensor2D,
  targets: tf.Tensor1D,
  temperature: number,
  withEntropy: boolean,
  threads: number | undefined,
): { logprobs: tf.Tensor1D; entropy: tf.Tensor1D } {
  const kernel = HeadKernel.shared(threads);
  const [V, d] = head.shape;
  const N = hidden.shape[0];
  const invT = 1 / temperature;
  const trainsHead = !(head instanceof tf.Variable) || head.trainable;
  // The head's data identity: the same data is not copied into the kernel twice (forward, backward).
  const key = head.dataId;
  const op = tf.customGrad((h, w, t) => {
    const hv = (h as tf.Tensor).dataSync() as Float32Array;
    const tv = Int32Array.from((t as tf.Tensor).dataSync());
    const fwd = kernel.forward(key, () => (w as tf.Tensor).dataSync() as Float32Array, V, d, hv, tv, invT);
    const both = new Float32Array(2 * N);
    both.set(fwd.logprobs);
    if (withEntropy) both.set(fwd.entropy, N);
    const value = tf.tensor2d(both, [2, N]);
    return {
      value,
      gradFunc: (dy: tf.Tensor) => {
        const g = dy.dataSync() as Float32Array;
        const gl = g.slice(0, N);
        const ge = withEntropy ? g.slice(N) : new Float32Array(N);
        const { dh, dw } = kernel.backward(
          key,
          () => head.dataSync() as Float32Array,
          V,
          d,
          hv,
          tv,
          invT,
          fwd,
          gl,
          ge,
          trainsHead,
        );
        return [tf.tensor2d(dh, [N, d]), dw ? tf.tensor2d(dw, [V, d]) : tf.zeros([1]), tf.zerosLike(t as tf.Tensor)];
      },
    };
  });
  const [logprobs, entropy] = tf.unstack(op(hidden, head, targets)) as [tf.Tensor1D, tf.Tensor1D];
  return { logprobs, entropy };
}
