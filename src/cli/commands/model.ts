import { InvalidArgumentError, type Command } from 'commander';
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { exportModel, openModel } from '../../app/models.ts';
import { AgentR1Error, UsageError } from '../../core/errors.ts';
import type { FloatDtype } from '../../formats/dtype.ts';
import type { TemplateMessage, TemplateTool } from '../../hf/chat-template.ts';
import { LOAD_DTYPE_HELP, loadDtype, nonNegativeInt, nonNegativeNumber, positiveInt, printJson } from '../common.ts';
import type { LoadDtype } from '../../hf/folder.ts';

/** A messages or tools file that is not what the command reads. */
class ConversationFileError extends AgentR1Error {
  constructor(
    readonly file: string,
    problem: string,
  ) {
    super(`${file}: ${problem}`);
  }
}

/** Files of messages or tools are read up to this size. */
const MAX_CONVERSATION_BYTES = 16 << 20;

const toolCall = z.object({
  id: z.string().optional(),
  type: z.literal('function').optional(),
  function: z.object({ name: z.string(), arguments: z.union([z.string(), z.record(z.string(), z.unknown())]) }),
});
const message = z.looseObject({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z.string().nullable(),
  tool_calls: z.array(toolCall).optional(),
  tool_call_id: z.string().optional(),
  name: z.string().optional(),
  reasoning_content: z.string().optional(),
});
const tool = z.object({
  type: z.literal('function'),
  function: z.looseObject({ name: z.string(), description: z.string().optional(), parameters: z.unknown().optional() }),
});

async function readConversationFile<T>(file: string, schema: z.ZodType<T>, what: string): Promise<T> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConversationFileError(file, `cannot read it (${(error as NodeJS.ErrnoException).code ?? error})`);
  }
  if (Buffer.byteLength(text) > MAX_CONVERSATION_BYTES)
    throw new ConversationFileError(file, `more than ${MAX_CONVERSATION_BYTES} bytes`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ConversationFileError(file, `is not JSON: ${(error as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConversationFileError(file, `is not ${what}: at ${issue.path.join('.') || 'the top'}: ${issue.message}`);
  }
  return parsed.data;
}

const readMessages = (file: string) =>
  readConversationFile(file, z.array(message).min(1), 'a list of OpenAI chat messages') as Promise<TemplateMessage[]>;
const readTools = async (file: string | undefined) =>
  file ? ((await readConversationFile(file, z.array(tool), 'a list of OpenAI function tools')) as TemplateTool[]) : [];

function tokenIds(value: string): number[] {
  const ids = value.split(',').map((s) => Number(s.trim()));
  if (value.trim() === '' || !ids.every((n) => Number.isInteger(n) && n >= 0))
    throw new InvalidArgumentError('expected token ids, comma-separated (1,2,3)');
  return ids;
}

function dtype(value: string): FloatDtype {
  const d = value.toUpperCase();
  if (d !== 'F32' && d !== 'F16' && d !== 'BF16') throw new InvalidArgumentError('expected f32, f16 or bf16');
  return d;
}

function format(value: string): 'gguf' | 'hf' {
  if (value !== 'gguf' && value !== 'hf') throw new InvalidArgumentError('expected gguf or hf');
  return value;
}

const MODEL_HELP = 'hf:DIR (a Hugging Face folder: Llama, Qwen2, Qwen3) or ckpt:DIR (a checkpoint of this project)';

export function register(program: Command): void {
  const model = program
    .command('model')
    .description('look into, run and export a model: a Hugging Face folder (hf:DIR) or a checkpoint (ckpt:DIR)');

  model
    .command('info')
    .description("a model's architecture, shapes, parameters, dtype and chat template")
    .requiredOption('--model <M>', MODEL_HELP)
    .option('--json', 'print it as one JSON line')
    .action(async (flags: { model: string; json?: boolean }) => {
      const info = (await openModel(flags.model)).info();
      if (flags.json) printJson(info);
      else
        for (const [k, v] of Object.entries(info))
          process.stdout.write(`${k.padEnd(18)} ${Array.isArray(v) ? v.join(', ') : String(v)}\n`);
    });

  model
    .command('tokenize')
    .description(
      "a text's token ids in the model's tokenizer (special tokens written in the text are specials; nothing is added)",
    )
    .requiredOption('--model <M>', MODEL_HELP)
    .requiredOption('--text <s>', 'the text')
    .option('--json', 'print {"ids": [...]} as the last stdout line')
    .action(async (flags: { model: string; text: string; json?: boolean }) => {
      const ids = (await openModel(flags.model)).tokenize(flags.text);
      if (flags.json) printJson({ ids });
      else process.stdout.write(`${ids.join(' ')}\n`);
    });

  model
    .command('render')
    .description(
      "a conversation through the model's chat template, as Transformers' apply_chat_template writes it, on stdout",
    )
    .requiredOption('--model <M>', MODEL_HELP)
    .requiredOption('--messages <file>', 'a JSON list of OpenAI chat messages')
    .option('--tools <file>', 'a JSON list of OpenAI function tools')
    .option('--no-generation-prompt', "leave out the assistant's opening at the end")
    .action(async (flags: { model: string; messages: string; tools?: string; generationPrompt: boolean }) => {
      const handle = await openModel(flags.model);
      const text = handle.render(
        await readMessages(flags.messages),
        await readTools(flags.tools),
        flags.generationPrompt,
      );
      process.stdout.write(text);
    });

  model
    .command('generate')
    .description("new tokens from a prompt (greedy by default), stopping at the model's end-of-sequence ids")
    .requiredOption('--model <M>', MODEL_HELP)
    .option('--prompt-ids <ids>', 'the prompt as token ids (1,2,3)', tokenIds)
    .option(
      '--messages <file>',
      'the prompt as a conversation: a JSON list of OpenAI chat messages, rendered with the generation prompt',
    )
    .option('--tools <file>', 'a JSON list of OpenAI function tools (with --messages)')
    .requiredOption('--max-new-tokens <n>', 'the most tokens to generate', positiveInt)
    .option('--temperature <t>', 'sampling temperature (0: greedy)', nonNegativeNumber, 0)
    .option('--seed <n>', "the sampler's seed (temperature > 0)", nonNegativeInt, 0)
    .option('--dtype <d>', LOAD_DTYPE_HELP, loadDtype)
    .option('--json', 'print {"ids", "logprobs", "text"} as the last stdout line')
    .action(
      async (flags: {
        model: string;
        promptIds?: number[];
        messages?: string;
        tools?: string;
        maxNewTokens: number;
        temperature: number;
        seed: number;
        dtype?: LoadDtype;
        json?: boolean;
      }) => {
        if ((flags.promptIds === undefined) === (flags.messages === undefined))
          throw new UsageError('give the prompt as one of --prompt-ids or --messages');
        if (flags.tools !== undefined && flags.messages === undefined)
          throw new UsageError('--tools goes with --messages');
        const handle = await openModel(flags.model, { dtype: flags.dtype });
        const prompt =
          flags.promptIds ??
          handle.tokenize(handle.render(await readMessages(flags.messages!), await readTools(flags.tools), true));
        const bad = prompt.find((id) => id >= handle.vocabSize);
        if (bad !== undefined)
          throw new UsageError(`--prompt-ids: ${bad} is not a token id of the model (< ${handle.vocabSize})`);
        const out = await handle.generate(prompt, flags);
        if (flags.json) printJson(out);
        else process.stdout.write(`${out.text}\n`);
      },
    );

  model
    .command('export')
    .description(
      'write the model as a GGUF file (llama.cpp, Ollama, LM Studio) or a Hugging Face folder (Transformers, vLLM)',
    )
    .requiredOption('--model <M>', MODEL_HELP)
    .requiredOption('--format <f>', 'gguf or hf', format)
    .requiredOption('--out <path>', 'the GGUF file, or the folder, to write')
    .option(
      '--dtype <d>',
      "the matrices' dtype: f32, f16 or bf16 (default: the source's, so an export round-trips bit for bit; f32 for LoRA adapters merged)",
      dtype,
    )
    .option(
      '--force',
      'replace --out when it exists (never a folder the model is read from), once the export is complete',
    )
    .action(
      async (flags: { model: string; format: 'gguf' | 'hf'; out: string; dtype?: FloatDtype; force?: boolean }) => {
        const handle = await openModel(flags.model);
        await exportModel(handle, flags.format, flags.out, flags);
        process.stderr.write(`wrote ${flags.out}\n`);
      },
    );
}
