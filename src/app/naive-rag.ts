import type { PolicyOutput } from '../core/types.ts';
import type { BatchPolicy, PolicyRequest } from '../policy/policy.ts';

/** A batch policy that generates token ids with its own tokenizer (the tfjs policy). */
export type TokenizingPolicy = BatchPolicy & { tokenizer: { encode(text: string): number[] } };

/**
 * The paper's Naive RAG, played by a model: one retrieval with the question as the query, then the
 * model's answer from that one observation. The first action is forced to the search call; every
 * later action is forced to start with `<answer>`, and the model writes the rest. So it is the same
 * model as Base Tool Call, with the retrieval fixed instead of chosen.
 */
export function naiveRagModel(
  inner: TokenizingPolicy,
  options: { tool?: string; argument?: string } = {},
): BatchPolicy {
  const tool = options.tool ?? 'search';
  const argument = options.argument ?? 'query';
  const encode = (text: string) => inner.tokenizer.encode(text);
  const answerPrefix = '<answer>';
  const prefixTokens = encode(answerPrefix);
  const actBatch = async (requests: readonly PolicyRequest[]): Promise<PolicyOutput[]> => {
    const outputs: Array<PolicyOutput | undefined> = new Array(requests.length);
    const answering: { at: number; request: PolicyRequest }[] = [];
    requests.forEach((request, at) => {
      if (request.turn === 0) {
        const text = `<tool_call>${JSON.stringify({ name: tool, arguments: { [argument]: request.task.question } })}</tool_call>`;
        outputs[at] = { text, tokens: encode(text) };
      } else {
        const tokens = [...(request.tokens ?? inner.encode!.prompt(request.messages)), ...prefixTokens];
        answering.push({
          at,
          request: { ...request, tokens, maxTokens: Math.max(1, request.maxTokens - prefixTokens.length) },
        });
      }
    });
    if (answering.length > 0) {
      const generated = await inner.actBatch(answering.map((a) => a.request));
      answering.forEach(({ at }, i) => {
        const out = generated[i]!;
        outputs[at] = {
          text: answerPrefix + out.text,
          ...(out.tokens ? { tokens: [...prefixTokens, ...out.tokens] } : {}),
        };
      });
    }
    return outputs as PolicyOutput[];
  };
  return {
    id: `naive-rag(${inner.id})`,
    version: `${inner.version}+naive-rag`,
    encode: inner.encode,
    act: async (request) => (await actBatch([request]))[0]!,
    actBatch,
    release: (episodeId) => inner.release?.(episodeId),
  };
}
