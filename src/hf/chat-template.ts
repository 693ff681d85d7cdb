import { Environment, Interpreter, Template } from '@huggingface/jinja';
import { ChatTemplateError, HfFolderError, TemplateBudgetError } from './errors.ts';

/** A message as a chat template reads it: OpenAI's shape (tool calls, tool call ids, names) or the plain one. */
export interface TemplateMessage {
  role: string;
  content: string | null;
  tool_calls?: ReadonlyArray<{ id?: string; type?: 'function'; function: { name: string; arguments: unknown } }>;
  tool_call_id?: string;
  name?: string;
  /** Qwen3's templates read an assistant turn's reasoning from here when it is given apart. */
  reasoning_content?: string;
}

/** A tool as a chat template reads it: OpenAI's function-tool shape, its parameters a JSON Schema. */
export interface TemplateTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: unknown };
}

export interface RenderInput {
  messages: readonly TemplateMessage[];
  tools?: readonly TemplateTool[];
  /** Append the assistant's turn opening (what a model generates after). */
  addGenerationPrompt: boolean;
  /** Further variables some templates read (e.g. `enable_thinking: false` for Qwen3). */
  kwargs?: { [key: string]: unknown };
}

/**
 * The date a template that reads the clock (`strftime_now`) sees: fixed, so that a prompt, and the
 * record holding its ids, do not depend on the day an episode was played. It is the date Llama 3's
 * own template falls back to.
 */
export const TEMPLATE_DATE = new Date(Date.UTC(2024, 6, 26));

// The interpreter prints a function (`{{ namespace }}`, `{{ 'x' ~ range }}`, a macro named without
// its call) as String(fn): its JavaScript source would go into the prompt. Every function it wraps
// (FunctionValue, not exported: reached through a global's prototype) prints as an error instead.
// Python's Jinja prints a repr ("<class 'jinja2.utils.Namespace'>"): text no prompt wants either.
const printed = () => {
  throw new Error('printed a function as text (a name used without calling it?): a function has no text');
};
const functionValue = Object.getPrototypeOf(new Environment().lookupVariable('namespace')) as object;
const wrapped = Symbol('function');
Object.defineProperty(functionValue, 'toString', { value: printed });
Object.defineProperty(functionValue, 'value', {
  get(this: { [wrapped]: unknown }) {
    return this[wrapped];
  },
  set(this: { [wrapped]: unknown }, fn: unknown) {
    if (typeof fn === 'function') Object.defineProperty(fn, 'toString', { value: printed });
    this[wrapped] = fn;
  },
});

/** Rendered prompts longer than this are refused (a template that loops cannot fill memory). */
const MAX_RENDERED_CHARS = 64 * 1024 * 1024;

/**
 * The most work one render may do, in operations: expressions evaluated, blocks rendered (one per
 * loop iteration, an empty body included) and numbers made by range(). A template is untrusted code
 * that runs on the thread serving every request: one that never ends must fail, not hang it. Real
 * templates take tens of operations per message (Qwen3's and Llama 3's, 4,096 messages and 1,024
 * tools: under 300,000, 50-200 ms); five million take about a second.
 */
export const MAX_TEMPLATE_OPERATIONS = 5_000_000;

/** The longest one render may run (the event loop waits for it), whatever its operations. */
export const TEMPLATE_DEADLINE_MS = 2_000;

/** The budget of each render (tests give smaller ones). */
export interface TemplateLimits {
  maxOperations: number;
  deadlineMs: number;
}

export const DEFAULT_TEMPLATE_LIMITS: TemplateLimits = {
  maxOperations: MAX_TEMPLATE_OPERATIONS,
  deadlineMs: TEMPLATE_DEADLINE_MS,
};

/**
 * A model's chat template (Jinja, from tokenizer_config.json or chat_template.jinja), rendered as
 * Transformers' `apply_chat_template(..., tokenize=False)` renders it, through @huggingface/jinja:
 * trim_blocks and lstrip_blocks, `tojson` as Python's json.dumps with ensure_ascii off,
 * `raise_exception` as an error, the tokenizer's special tokens as variables, and the generation
 * prompt. The template runs in the interpreter's sandbox: it can compute text, nothing else.
 */
export class ChatTemplate {
  private readonly templates = new Map<string, Template>();

  /**
   * `sources`: the template, or named templates (tokenizer_config.json's list form: `default`, and
   * `tool_use`, which Transformers picks when tools are given).
   */
  constructor(
    readonly sources: string | { readonly [name: string]: string },
    private readonly specialTokens: { readonly [name: string]: string },
    readonly file = 'tokenizer_config.json',
    readonly limits: TemplateLimits = DEFAULT_TEMPLATE_LIMITS,
  ) {
    for (const [name, source] of Object.entries(typeof sources === 'string' ? { default: sources } : sources)) {
      try {
        this.templates.set(name, new Template(source));
      } catch (error) {
        throw new HfFolderError(
          file,
          'chat_template',
          `${name === 'default' ? '' : `${name}: `}does not parse: ${(error as Error).message}`,
        );
      }
    }
    if (!this.templates.has('default'))
      throw new HfFolderError(file, 'chat_template', 'has no template named "default"');
  }

  /** The template's text (the one used without tools). */
  get source(): string {
    return typeof this.sources === 'string' ? this.sources : this.sources.default!;
  }

  render(input: RenderInput): string {
    const tools = input.tools && input.tools.length > 0 ? input.tools : null;
    const template = (tools && this.templates.get('tool_use')) || this.templates.get('default')!;
    let text: unknown;
    const budget = new RenderBudget(this.file, this.limits);
    try {
      const env = new Environment(globals(budget));
      const variables = {
        ...this.specialTokens,
        ...input.kwargs,
        messages: input.messages,
        tools,
        documents: null,
        add_generation_prompt: input.addGenerationPrompt,
      };
      for (const [name, value] of Object.entries(variables)) env.set(name, value);
      text = budgetedInterpreter(env, budget).run(template.parsed).value;
    } catch (error) {
      if (error instanceof TemplateBudgetError) throw error;
      throw new ChatTemplateError(this.file, `failed: ${(error as Error).message}`);
    }
    if (typeof text !== 'string') throw new ChatTemplateError(this.file, 'rendered no text');
    if (text.length > MAX_RENDERED_CHARS)
      throw new ChatTemplateError(this.file, `rendered ${text.length} characters; the most is ${MAX_RENDERED_CHARS}`);
    return text;
  }
}

/** Counts a render's operations and watches its clock; throws TemplateBudgetError once either is spent. */
class RenderBudget {
  private operations = 0;
  /** Operations until the clock is read again (reading it on every one would double a render's time). */
  private untilClock = 0;
  private readonly deadline: number;

  constructor(
    private readonly file: string,
    private readonly limits: TemplateLimits,
  ) {
    this.deadline = performance.now() + limits.deadlineMs;
  }

  charge(operations: number): void {
    this.operations += operations;
    if (this.operations > this.limits.maxOperations)
      throw new TemplateBudgetError(this.file, 'operations', this.limits.maxOperations);
    this.untilClock -= operations;
    if (this.untilClock > 0) return;
    this.untilClock = 4096;
    if (performance.now() > this.deadline)
      throw new TemplateBudgetError(this.file, 'milliseconds', this.limits.deadlineMs);
  }
}

/**
 * @huggingface/jinja's interpreter with each expression evaluated and each block rendered (once per
 * loop iteration, an empty body included, where no expression runs) charged to a budget. Both
 * methods are wrapped on the instance: renderBlock is private in the typings (the package is pinned
 * to a version whose interpreter calls both through `this`).
 */
function budgetedInterpreter(env: Environment, budget: RenderBudget): Interpreter {
  const interpreter = new Interpreter(env);
  type Method = (...args: unknown[]) => unknown;
  const methods = interpreter as unknown as { evaluate: Method; renderBlock: Method };
  for (const name of ['evaluate', 'renderBlock'] as const) {
    const inner = methods[name].bind(interpreter);
    methods[name] = (...args) => {
      budget.charge(1);
      return inner(...args);
    };
  }
  return interpreter;
}

/** The longest list `range()` may make (a template is untrusted: it cannot ask for a billion numbers). */
const MAX_RANGE = 1_000_000;

/**
 * What Transformers' Jinja environment gives every template (the interpreter's own globals, with
 * `strftime_now` at TEMPLATE_DATE and `range` bounded and charged to the render's budget): a parent scope, so a template's variables
 * may shadow them.
 */
function globals(budget: RenderBudget): Environment {
  const env = new Environment();
  const values: { [name: string]: unknown } = {
    false: false,
    true: true,
    none: null,
    False: false,
    True: true,
    None: null,
    raise_exception: (message: unknown) => {
      throw new Error(String(message));
    },
    range: (start: number, stop?: number, step = 1) => {
      const [from, to] = stop === undefined ? [0, start] : [start, stop];
      if (!step) throw new Error('range() step must not be zero');
      const count = Math.max(0, Math.ceil((to - from) / step));
      if (count > MAX_RANGE) throw new Error(`range() of ${count} numbers; the most is ${MAX_RANGE}`);
      budget.charge(count);
      return Array.from({ length: count }, (_, i) => from + i * step);
    },
    strftime_now: (format: string) => strftime(TEMPLATE_DATE, format),
  };
  for (const [name, value] of Object.entries(values)) env.set(name, value);
  return env;
}

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/** Python's strftime for the directives chat templates use, in UTC. */
function strftime(date: Date, format: string): string {
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  const fields: { [d: string]: () => string } = {
    d: () => pad(date.getUTCDate()),
    m: () => pad(date.getUTCMonth() + 1),
    Y: () => String(date.getUTCFullYear()),
    y: () => pad(date.getUTCFullYear() % 100),
    b: () => MONTHS[date.getUTCMonth()]!.slice(0, 3),
    B: () => MONTHS[date.getUTCMonth()]!,
    a: () => DAYS[date.getUTCDay()]!.slice(0, 3),
    A: () => DAYS[date.getUTCDay()]!,
    H: () => pad(date.getUTCHours()),
    M: () => pad(date.getUTCMinutes()),
    S: () => pad(date.getUTCSeconds()),
    j: () => pad(Math.floor((date.getTime() - Date.UTC(date.getUTCFullYear(), 0, 1)) / 86_400_000) + 1, 3),
    '%': () => '%',
  };
  return String(format).replace(/%(.)/g, (whole, d: string) => fields[d]?.() ?? whole);
}
