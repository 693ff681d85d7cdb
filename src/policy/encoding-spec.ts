import type { EncodingSpec, PolicyEncoding } from './policy.ts';

/**
 * A tokenizing policy's encoding rebuilt from its spec (in a worker thread, which holds no weights):
 * the GPT's chat encoding from its tokenizer, or a Hugging Face folder's template and tokenizer.
 */
export async function encodingFromSpec(spec: EncodingSpec): Promise<PolicyEncoding> {
  if (spec.kind === 'gpt') {
    const { Tokenizer } = await import('./tfjs/tokenizer.ts');
    const { chatEncoding } = await import('./tfjs/chat-template.ts');
    return chatEncoding(new Tokenizer(spec.tokenizer as never));
  }
  const { openHfChat } = await import('../hf/folder.ts');
  const { HfChatEncoding } = await import('./hf/chat-encoding.ts');
  const { HfFolderError } = await import('../hf/errors.ts');
  const chat = await openHfChat(spec.dir);
  if (!chat.template) throw new HfFolderError(spec.dir, null, 'has no chat template');
  return new HfChatEncoding(chat.tokenizer, chat.template, chat.eosTokenIds);
}
