import { z } from 'zod';
import {
  commitEffect,
  createRng,
  defineScenario,
  deriveSeed,
  END_CONVERSATION,
  syncEffects,
  tool,
  ToolOutput,
  toolsSystemPrompt,
  type EffectLog,
  type Json,
  type Message,
  type Policy,
  type Scenario,
  type Task,
  type TaskQuery,
  type ToolContext,
  type ToolEnv,
} from 'agent-r1-ts';

// A conversation with a simulated user (dual control): the agent's tools act on the provider's side
// (the line), only the user's tools act on the user's side (the router). Internet works when both do.

interface RouterTask extends Task {
  meta: { customer: string; lineDown: boolean };
}

interface World {
  log: EffectLog; // event sourcing: replay re-applies the recorded changes (see commitEffect)
  lineUp: boolean;
  /** The router reconnects only when restarted while the line is up. */
  connected: boolean;
}

type Change = { kind: 'reset_line' } | { kind: 'restart_router' };
function apply(world: World, change: Change) {
  if (change.kind === 'reset_line') world.lineUp = true;
  else world.connected = world.lineUp;
}
type Ctx = ToolContext<World>;
const commit = (ctx: Ctx, change: Change) => commitEffect(ctx.state.log, change, (c) => apply(ctx.state, c)) as Json;

// The agent's tools.
const checkLine = tool({
  name: 'check_line',
  description: "Whether a customer's line is up.",
  parameters: z.object({ customer: z.string() }),
  execute: (_args, ctx: Ctx) => ({ line: ctx.state.lineUp ? 'up' : 'down' }),
});
const resetLine = tool({
  name: 'reset_line',
  description: "Reset a customer's line (the router must then be restarted).",
  parameters: z.object({ customer: z.string() }),
  execute: (_args, ctx: Ctx) =>
    new ToolOutput('{"line":"up"}', { line: 'up', effects: [commit(ctx, { kind: 'reset_line' })] }),
});

// The user's tools: the router in their hands.
const restartRouter = tool({
  name: 'restart_router',
  description: 'Unplug the router and plug it back in.',
  parameters: z.object({}),
  execute: (_args, ctx: Ctx) =>
    new ToolOutput('{"restarted":true}', { restarted: true, effects: [commit(ctx, { kind: 'restart_router' })] }),
});
const lookAtRouter = tool({
  name: 'look_at_router',
  description: "The colour of the router's light: green (connected) or red.",
  parameters: z.object({}),
  execute: (_args, ctx: Ctx) => ({ light: ctx.state.connected ? 'green' : 'red' }),
});

function tasks({ split, seed, count }: TaskQuery): RouterTask[] {
  const rng = createRng(deriveSeed('router', split, seed));
  return Array.from({ length: count }, (_, i) => {
    const customer = `C-${rng.int(100, 999)}`;
    return {
      id: `${split}-${seed}-${i}`,
      split,
      question: `My internet is down. I'm customer ${customer}.`,
      meta: { customer, lineDown: rng.chance(0.5) },
    };
  });
}

const env: ToolEnv<RouterTask, World> = {
  init: (task) => ({ log: { applied: 0 }, lineUp: !task.meta.lineDown, connected: false }),
  prompt: (task, tools) => [
    {
      role: 'system',
      content: toolsSystemPrompt('Help the customer. Only they can touch their router: ask them.', tools),
    },
    { role: 'user', content: task.question },
  ],
  // `reply`: the user's turn, when the agent wrote to them; its text is what the agent sees next.
  step: ({ state, action, results, reply }) => {
    syncEffects(state.log, [...results, ...(reply?.steps.flatMap((s) => s.results) ?? [])], (c: Change) =>
      apply(state, c),
    );
    if (action.kind === 'tool_calls')
      return { observation: results.map((r) => r.content).join('\n'), reward: 0, done: false };
    if (action.kind === 'invalid') return { observation: `error: ${action.error}`, reward: -0.1, done: false };
    return { observation: reply?.text ?? null, reward: 0, done: false };
  },
  outcome: ({ state }) => ({ reward: state.connected ? 1 : 0, success: state.connected }),
};

// The agent's reference policy: check the line, reset it if down, then ask for a restart.
const call = (name: string, args: { [key: string]: Json }) => ({
  text: `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`,
});
const expert: Policy = {
  id: 'expert',
  version: '1',
  act: async ({ task, messages }) => {
    const { customer } = (task as RouterTask).meta;
    const seen = messages.filter((m) => m.role === 'tool').map((m) => m.content);
    if (!seen.some((s) => s.includes('"line"'))) return call('check_line', { customer });
    if (seen.at(-1) === '{"line":"down"}') return call('reset_line', { customer });
    return { text: '<answer>Please restart your router and tell me the colour of its light.</answer>' };
  },
};

// The scripted user: a pure function of its own view (its instructions, the agent's messages as
// `user` turns, its own turns and tool results), so replay and worker threads give it again exactly.
const scriptedUser: Policy = {
  id: 'scripted-user',
  version: '1',
  act: async ({ messages }) => {
    const heard = messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
    const since = messages.slice(messages.map((m) => m.role).lastIndexOf('user') + 1);
    const plan = /restart/i.test(heard)
      ? ['restart_router', 'look_at_router']
      : /light/i.test(heard)
        ? ['look_at_router']
        : [];
    const done = since.filter((m) => m.role === 'assistant').length;
    if (done < plan.length) return call(plan[done]!, {});
    const light = since.at(-1)?.content.includes('green') ? 'green' : since.length > 0 ? 'red' : null;
    if (light === 'green') return { text: `It's green, it works! Thanks. ${END_CONVERSATION}` };
    return { text: light ? `The light is ${light}.` : 'It still does not work.' };
  },
};

const userPrompt = (task: RouterTask): Message[] => [
  {
    role: 'system',
    content: `You are customer ${task.meta.customer}; your internet is down. Do what the agent asks with your router's tools. When it works, say so and end with ${END_CONVERSATION}.`,
  },
  { role: 'assistant', content: task.question },
];

const scenario: Scenario<RouterTask, World> = {
  id: 'router-help',
  version: '1',
  description: "A customer's internet, fixed together: the agent's line tools, the customer's router tools.",
  splits: ['train', 'dev', 'test'],
  options: {},
  tasks,
  tools: [checkLine, resetLine],
  env,
  policies: { expert: () => expert },
  // The user: its prompt, its own tools (acting on the same world), its policies (the default here;
  // `--user-policy hf:DIR` lets a model play it), and how many steps one reply may take.
  user: {
    prompt: userPrompt,
    tools: [restartRouter, lookAtRouter],
    policies: { scripted: () => scriptedUser },
    defaultPolicy: 'scripted',
    maxSteps: 4,
  },
  episode: { maxTurns: 8 },
};

export default defineScenario(scenario);
