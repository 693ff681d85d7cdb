import { readFileSync } from 'node:fs';
import { html, type Html } from './html.ts';

/** Turns a token id into its text. */
export type TokenDecoder = (id: number) => string;

/**
 * Loads the byte-BPE tokenizer saved with a checkpoint (tokenizer.json, or the `tokenizer` field of
 * the checkpoint's model.json), to show action tokens as text. The
 * tokenizer module belongs to the policy code and is imported lazily; any failure (no file, another
 * format) leaves the viewer showing token ids instead, with the reason.
 */
export async function loadTokenDecoder(path: string | undefined): Promise<{ decode?: TokenDecoder; warning?: string }> {
  if (!path) return {};
  try {
    const { Tokenizer } = (await import('../policy/tfjs/tokenizer.ts')) as {
      Tokenizer: new (json: unknown) => { tokenText(id: number): string };
    };
    const json = JSON.parse(readFileSync(path, 'utf8')) as { tokenizer?: unknown };
    // A checkpoint's model.json embeds its tokenizer; a tokenizer.json is the tokenizer itself.
    const tokenizer = new Tokenizer(json && typeof json === 'object' && json.tokenizer ? json.tokenizer : json);
    return {
      decode: (id) => {
        try {
          return tokenizer.tokenText(id);
        } catch {
          return `⟨${id}⟩`;
        }
      },
    };
  } catch (err) {
    return {
      warning: `tokenizer ${path} could not be loaded (${err instanceof Error ? err.message : String(err)}); showing token ids`,
    };
  }
}

/** Background colour for a token's probability: red (unlikely) through yellow to green (certain). */
function probabilityColour(logprob: number): string {
  const p = Math.min(1, Math.max(0, Math.exp(logprob)));
  return `hsl(${Math.round(120 * p)}, 75%, ${Math.round(86 - 6 * (1 - p))}%)`;
}

/** The action's tokens, each a span coloured by its log-prob, with id, log-prob and probability on hover. */
export function renderTokens(
  tokens: readonly number[],
  logprobs: readonly number[] | undefined,
  decode?: TokenDecoder,
): Html {
  const spans = tokens.map((id, i) => {
    const lp = logprobs?.[i];
    const text = decode ? decode(id) : `⟨${id}⟩`;
    const title =
      lp === undefined
        ? `token ${i} · id ${id}`
        : `token ${i} · id ${id} · logprob ${lp.toFixed(4)} · p ${Math.exp(lp).toFixed(4)}`;
    const style = lp === undefined ? '' : `background:${probabilityColour(lp)}`;
    return html`<span class="tok" title="${title}" style="${style}" data-id="${id}">${text}</span>`;
  });
  return html`<div class="tokens${decode ? '' : ' ids'}">${spans}</div>`;
}
