import { END_CONVERSATION, type Json, type Message, type OpenAITool, type Policy, type Task } from 'agent-r1-ts';
import { metaOf, type CaseMeta, type Persona } from './tasks.ts';

/**
 * The scripted customer: a pure function of the case (its persona) and the user's own view of the
 * conversation, so replay and worker threads give it again exactly. Each call is one step of its
 * reply: the tool calls the agent's last message asked for, one at a time, then its message.
 *
 * Personas: `cooperative` gives its number at once and checks its phone after every change;
 * `terse` says little and only does what it is told; `confused` gets each instruction wrong the
 * first time it hears it (the opposite setting); `private` gives its number only when told what it
 * is for (to look up the account). Nobody gives a PIN or password.
 */

/** What the customer is told (the opening of its own view; a model playing the user reads it). */
export function userPrompt(task: Task, tools: readonly OpenAITool[]): Message[] {
  const meta = metaOf(task);
  const persona: { [p in Persona]: string } = {
    cooperative: 'You are friendly and give details readily. After each change you check your status screen.',
    terse: 'You answer in as few words as possible and only do exactly what you are told.',
    confused: 'You are not good with phones and easily mix settings up.',
    private: 'You are careful with personal data: you give your phone number only when told why it is needed.',
  };
  return [
    {
      role: 'system',
      content: [
        `You are ${meta.name}, a customer of a phone company. Mobile internet stopped working on your phone, and you`,
        `have contacted the company's help desk. Your phone number is ${meta.phone}. ${persona[meta.persona]}`,
        'The agent cannot see or touch your phone: when asked to check or change something on it, use your tools.',
        'Never share a PIN or a password. When mobile internet works again, thank the agent and end your',
        `message with ${END_CONVERSATION}. Your tools: ${JSON.stringify(tools)}`,
      ].join('\n'),
    },
    { role: 'assistant', content: task.question },
  ];
}

const call = (name: string, args: { [key: string]: Json }) =>
  `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;

interface Call {
  name: string;
  args: { [key: string]: Json };
}

const SETTINGS: Array<[RegExp, string]> = [
  [/turn (on|off) (?:the )?airplane mode/i, 'set_airplane_mode'],
  [/turn (on|off) (?:the )?mobile data/i, 'set_mobile_data'],
  [/turn (on|off) (?:the )?data roaming/i, 'set_data_roaming'],
];
const ASKS_STATUS = /status|is it working|does it work/i;
const ASKS_NUMBER = /phone number|your number/i;
const SAYS_WHY = /look up|account/i;
const ASKS_SECRET = /\b(pin|password|passcode)\b/i;
/** After this many messages of the agent's, the customer gives up. */
export const PATIENCE = 8;

/** What the agent's message asks the customer to do with their phone, in order. */
function plannedCalls(meta: CaseMeta, heard: string, earlier: readonly string[]): Call[] {
  const calls: Call[] = [];
  for (const [pattern, name] of SETTINGS) {
    const m = pattern.exec(heard);
    if (!m) continue;
    let on = m[1]!.toLowerCase() === 'on';
    // The confused customer does the opposite the first time they hear an instruction.
    if (meta.persona === 'confused' && !earlier.some((said) => pattern.test(said))) on = !on;
    calls.push({ name, args: { on } });
  }
  if (/reset (?:your |the )?apn/i.test(heard)) calls.push({ name: 'reset_apn_settings', args: {} });
  if (/restart/i.test(heard)) calls.push({ name: 'restart_device', args: {} });
  if (ASKS_STATUS.test(heard) || (meta.persona === 'cooperative' && calls.length > 0))
    calls.push({ name: 'check_status', args: {} });
  return calls;
}

/** The status screen, read back from a check_status result. */
function statusOf(seen: readonly Message[]): { [key: string]: string } | null {
  for (let i = seen.length - 1; i >= 0; i--) {
    const m = seen[i]!;
    if (m.role !== 'tool' || !m.content.includes('"internet"')) continue;
    try {
      return JSON.parse(m.content) as { [key: string]: string };
    } catch {
      return null;
    }
  }
  return null;
}

/** The status as the customer reads it out: one fixed shape, so any agent can read it. */
export function readOut(s: { [key: string]: string }): string {
  return (
    `Status: service ${s['service']}, airplane mode ${s['airplane_mode']}, mobile data ${s['mobile_data']}, ` +
    `data roaming ${s['data_roaming']}, APN ${s['apn']}, location ${s['location']}, internet ${s['internet']}.`
  );
}

/** The customer's next step: a tool call, or its message. */
export function customerStep(task: Task, messages: readonly Message[]): string {
  const meta = metaOf(task);
  const lastHeard = messages.map((m) => m.role).lastIndexOf('user');
  const heard = lastHeard < 0 ? '' : messages[lastHeard]!.content;
  const earlier = messages
    .slice(0, Math.max(0, lastHeard))
    .filter((m) => m.role === 'user')
    .map((m) => m.content);
  const since = messages.slice(lastHeard + 1);
  const calls = plannedCalls(meta, heard, earlier);
  const done = since.filter((m) => m.role === 'assistant').length;
  if (done < calls.length) return call(calls[done]!.name, calls[done]!.args);

  const status = done > 0 ? statusOf(since) : null;
  if (status?.['internet'] === 'working') return `It works now, thank you! ${END_CONVERSATION}`;
  const parts: string[] = [];
  if (ASKS_SECRET.test(heard)) parts.push("I won't share that.");
  if (ASKS_NUMBER.test(heard)) {
    if (meta.persona === 'private' && !SAYS_WHY.test(heard)) parts.push('Why do you need my number?');
    else parts.push(`My number is ${meta.phone}.`);
  }
  if (status) parts.push(readOut(status));
  else if (calls.length > 0) parts.push(meta.persona === 'terse' ? 'Done.' : 'OK, I did that.');
  if (parts.length === 0)
    parts.push(meta.persona === 'terse' ? 'Still no internet.' : 'My internet still does not work.');
  if (earlier.length + 1 >= PATIENCE) parts.push(`This is going nowhere, goodbye. ${END_CONVERSATION}`);
  return parts.join(' ');
}

/** The scripted customer as a policy (the scenario's default user). */
export const scriptedCustomer: Policy = {
  id: 'scripted-customer',
  version: 'helpdesk-customer-1',
  act: async ({ task, messages }) => ({ text: customerStep(task, messages) }),
};
