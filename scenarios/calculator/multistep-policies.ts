import { createRng, deriveSeed, type Message, type Policy, type PolicyRequest } from 'agent-r1-ts';
import { nextExpression, type Step } from './multistep.ts';

/** How often the noisy expert stops early, per episode, unless the `noisyEarly` option says otherwise. */
export const DEFAULT_NOISY_EARLY = 0.7;

const call = (expression: string) =>
  `<tool_call>${JSON.stringify({ name: 'calculate', arguments: { expression } })}</tool_call>`;
const answer = (n: string | number) => `<answer>${n}</answer>`;

/** The calculator's results so far (the observations that are numbers). */
function results(messages: readonly Message[]): number[] {
  return messages
    .filter((m) => m.role === 'tool' && /^-?\d+(\.\d+)?$/.test(m.content.trim()))
    .map((m) => Number(m.content));
}

function metaOf(req: PolicyRequest): { start: number; steps: Step[] } {
  return req.task.meta as unknown as { start: number; steps: Step[] };
}

/** One call per operation, in order (the running result, the operation, the event's number), then the answer. */
export const multistepExpert: Policy = {
  id: 'expert',
  version: 'calculator-multistep-expert-1',
  act: async (req) => {
    const done = results(req.messages);
    const next = nextExpression(metaOf(req), done);
    return { text: next === null ? answer(done.at(-1) ?? metaOf(req).start) : call(next) };
  },
};

/**
 * The noisy expert errs the way a weak model does on multi-step problems: in a share `early` of its
 * episodes (decided from the policy seed and the episode id, so records replay) it stops one
 * operation short and answers the intermediate result, sure it is done (on a problem of two
 * operations, after the first). The rest are expert episodes. A model that imitates it stops early
 * more often than not, which greedy decoding turns into always: what RL has to unlearn.
 */
export function noisyMultistepExpert(seed: number, early: number): Policy {
  return {
    id: 'noisy-expert',
    version: `calculator-multistep-noisy-expert-2:${early}`,
    act: async (req) => {
      const meta = metaOf(req);
      const stops = createRng(deriveSeed('noisy-expert', seed, req.episodeId)).next() < early;
      const done = results(req.messages);
      if (done.length >= meta.steps.length - (stops ? 1 : 0)) return { text: answer(done.at(-1) ?? meta.start) };
      return { text: call(nextExpression(meta, done)!) };
    },
  };
}
