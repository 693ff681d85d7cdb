import { createRng, deriveSeed, type Json, type Message, type Policy } from 'agent-r1-ts';

/**
 * Reference agents. The expert knows only what the customer said and what its own tools answered:
 * it asks for the number (saying why), looks the line up, resumes it if suspended, asks the customer
 * to read their status screen, allows roaming abroad, then tells them what to change on their phone
 * and to check again — repeating what did not take.
 */

const call = (name: string, args: { [key: string]: Json }) => ({
  text: `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`,
});
const say = (text: string) => ({ text: `<answer>${text}</answer>` });

/** The agent's own tool results so far (`[name] {json}` observation lines). */
function results(messages: readonly Message[]): Array<{ name: string; data: { [key: string]: Json } }> {
  const out: Array<{ name: string; data: { [key: string]: Json } }> = [];
  for (const m of messages) {
    if (m.role !== 'tool') continue;
    for (const line of m.content.split('\n')) {
      const match = /^\[([a-z_]+)\] (\{.*\})$/.exec(line);
      if (!match) continue;
      try {
        out.push({ name: match[1]!, data: JSON.parse(match[2]!) });
      } catch {
        // not a result
      }
    }
  }
  return out;
}

const STATUS =
  /Status: service ([^,]+), airplane mode (\w+), mobile data (\w+), data roaming (\w+), APN (\w+), location (\w+), internet ([\w ]+)\./;

/** The customer's latest status read-out. */
function lastStatus(said: readonly string[]) {
  for (let i = said.length - 1; i >= 0; i--) {
    const m = STATUS.exec(said[i]!);
    if (m) {
      const [, service, airplane, data, roaming, apn, location, internet] = m;
      return {
        service: service!,
        airplane: airplane!,
        data: data!,
        roaming: roaming!,
        apn: apn!,
        location: location!,
        internet: internet!,
      };
    }
  }
  return null;
}

export function expertAction(messages: readonly Message[]): { text: string } {
  const said = messages.filter((m) => m.role === 'user').map((m) => m.content);
  const phone = said.map((s) => /\b\d{3}-\d{3}-\d{4}\b/.exec(s)?.[0]).find((p) => p !== undefined);
  if (!phone) return say('Could you tell me your phone number, so I can look up your account?');
  const seen = results(messages);
  const account = seen.filter((r) => r.name === 'find_account').at(-1)?.data;
  if (!account) return call('find_account', { phone });
  if (account['found'] !== true) return say('I could not find that number. Could you give me your phone number again?');
  const resumed = seen.some((r) => r.name === 'resume_line');
  if (account['line_status'] === 'suspended' && !resumed) return call('resume_line', { phone });
  const status = lastStatus(said);
  if (!status) return say("Please check your phone's status screen and tell me what it shows.");
  const roamingAllowed = account['roaming'] === 'allowed' || seen.some((r) => r.name === 'enable_roaming');
  if (status.location === 'abroad' && !roamingAllowed) return call('enable_roaming', { phone });
  const steps: string[] = [];
  if (status.airplane === 'on') steps.push('turn off airplane mode');
  if (status.data === 'off') steps.push('turn on mobile data');
  if (status.location === 'abroad' && status.roaming === 'off') steps.push('turn on data roaming');
  if (status.apn !== 'internet') steps.push('reset your APN settings');
  if (status.apn !== 'internet' || status.service === 'no service' || steps.length === 0)
    steps.push('restart your phone');
  return say(`Please ${steps.join(', then ')}, and then check your status again.`);
}

export const expert: Policy = {
  id: 'expert',
  version: 'helpdesk-expert-1',
  act: async ({ messages }) => expertAction(messages),
};

export const DEFAULT_NOISY_RATE = 0.7;

/**
 * The demonstrator: the expert, except that in `rate` of its episodes it asks for the account PIN
 * once the line is found — what the desk's rules forbid, so those episodes fail.
 */
export function noisyExpert(seed: number, rate: number): Policy {
  return {
    id: 'noisy-expert',
    version: `helpdesk-noisy-expert-1:${rate}`,
    act: async ({ messages, episodeId }) => {
      const noisy = createRng(deriveSeed(seed, 'helpdesk-noisy', episodeId)).next() < rate;
      const move = expertAction(messages);
      const asked = messages.some((m) => m.role === 'assistant' && /\bPIN\b/.test(m.content));
      if (noisy && !asked && move.text.includes('check your phone')) {
        return say('For security, could you confirm your account PIN? Then please check your phone status screen.');
      }
      return move;
    },
  };
}
