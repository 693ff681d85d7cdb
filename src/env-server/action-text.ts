import type { PolicyOutput } from '../core/types.ts';
import { assistantToAction } from '../openai/messages.ts';
import type { OpenAIToolCall } from '../openai/wire.ts';
import { EnvProtocolError } from './errors.ts';
import type { EnvAction } from './protocol.ts';

const TAG = /<\/?(answer|tool_call)>/;

/**
 * An action as the text a model would have written for it: raw text as given; tool calls as Hermes
 * `<tool_call>` spans (the same rendering as native tool calls from an OpenAI endpoint); an answer
 * as `<answer>…</answer>`. The episode then parses that text with parseAction, as in any rollout,
 * so a structured action and the model writing its text give the same record.
 */
export function actionOutput(action: EnvAction): PolicyOutput {
  if (action.text !== undefined) {
    const out: PolicyOutput = { text: action.text };
    if (action.tokens) out.tokens = action.tokens;
    if (action.logprobs) out.logprobs = action.logprobs;
    return out;
  }
  if (action.tool_calls) {
    const calls: OpenAIToolCall[] = action.tool_calls.map((c, i) => ({
      id: `call_${i}`,
      type: 'function',
      function: {
        name: c.name,
        arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments ?? {}),
      },
    }));
    return { text: assistantToAction({ content: null, tool_calls: calls }) };
  }
  const answer = action.answer ?? '';
  // The text form cannot hold these: the parser would read a different action than the one sent.
  const tag = TAG.exec(answer);
  if (tag)
    throw new EnvProtocolError('VALIDATION_ERROR', `the answer contains ${tag[0]}, which an <answer> cannot hold`);
  return { text: `<answer>${answer}</answer>` };
}
