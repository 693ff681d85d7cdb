import { actionToAssistant } from '../openai/messages.ts';
import type { GeneratedTurn, TurnAnswerer, TurnControl } from '../openai/completions.ts';
import { OpenAIHttpError } from '../openai/errors.ts';
import { normalizeMessages, type ChatCompletion, type ChatCompletionRequest } from '../openai/wire.ts';
import type { Demonstrator } from './agent-module.ts';

/**
 * A gateway answerer for an agent's scripted demonstrator: the text it writes for the episode's task
 * and conversation, answered as the built-in GPT's answers are (tool calls in `<tool_call>` tags as
 * tool_calls). Its records have text, no ids: the warm start's tokenizer is trained on them.
 */
export class DemonstratorAnswerer implements TurnAnswerer {
  readonly policy: { id: string; version: string };

  constructor(
    private readonly demonstrator: Demonstrator,
    agentVersion: string,
    private readonly modelName: string,
    readonly contextLength = 1_000_000,
  ) {
    this.policy = { id: 'demonstrator', version: agentVersion };
  }

  async generate(body: ChatCompletionRequest, turn: TurnControl): Promise<GeneratedTurn> {
    if (!turn.task) throw new OpenAIHttpError(400, 'a demonstrator answers only episodes the trainer opened');
    const text = this.demonstrator(turn.task, normalizeMessages(body.messages), turn.episodeSeed ?? 0);
    if (typeof text !== 'string') throw new OpenAIHttpError(500, 'the demonstrator returned no text', 'server_error');
    const structured = (body.tools?.length ?? 0) > 0 && body.tool_choice !== 'none';
    const message = structured
      ? actionToAssistant(text, (i) => `call_${(turn.id ?? 'chatcmpl-demo').slice(9, 25)}_${i}`)
      : { role: 'assistant' as const, content: text };
    const calls = (message.tool_calls?.length ?? 0) > 0;
    const completion: ChatCompletion = {
      id: turn.id ?? 'chatcmpl-demo',
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: this.modelName,
      system_fingerprint: `fp_demonstrator`,
      choices: [
        {
          index: 0,
          message: { ...message, refusal: null },
          finish_reason: calls ? 'tool_calls' : 'stop',
          logprobs: null,
        },
      ],
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    };
    return { completion, text };
  }

  complete(): Promise<ChatCompletion> {
    return Promise.reject(new OpenAIHttpError(400, 'a demonstrator answers only episodes the trainer opened'));
  }

  close(): void {}
}
