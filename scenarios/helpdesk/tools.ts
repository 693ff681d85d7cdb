import { commitEffect, tool, ToolOutput, type Json, type ToolContext } from 'agent-r1-ts';
import { z } from 'zod';
import { applyEffect, statusScreen, type HelpdeskEffect, type HelpdeskState } from './world.ts';

type Ctx = ToolContext<HelpdeskState>;

/** A result whose text is what its caller reads and whose data also carries the world's changes. */
function result(shown: { [key: string]: Json }, effects: HelpdeskEffect[] = [], ctx?: Ctx): ToolOutput {
  const committed = effects.map((e) => commitEffect(ctx!.state.log, e, (x) => applyEffect(ctx!.state, x)) as Json);
  const text = JSON.stringify(shown);
  return new ToolOutput(text, committed.length > 0 ? { ...shown, effects: committed } : shown);
}

const phone = z.string().min(1).max(32).describe("The customer's phone number, as they gave it (e.g. 555-013-2244).");

/** The account, when the number is the customer's; the agent cannot know it unless told. */
function account(ctx: Ctx, number: string) {
  return number.replace(/\D/g, '') === ctx.state.line.phone.replace(/\D/g, '') ? ctx.state.line : null;
}

// The agent's tools: the company's side.

export const findAccount = tool({
  name: 'find_account',
  description:
    "Look up a customer's line by phone number: the holder's name, the line's status, whether roaming is allowed.",
  parameters: z.object({ phone }),
  execute: ({ phone: number }, ctx: Ctx) => {
    const line = account(ctx, number);
    if (!line) return result({ found: false });
    return result({
      found: true,
      line_status: line.status,
      name: line.name,
      roaming: line.roaming ? 'allowed' : 'not allowed',
    });
  },
});

export const resumeLine = tool({
  name: 'resume_line',
  description: 'Resume a suspended line (the phone must then be restarted to reconnect).',
  parameters: z.object({ phone }),
  execute: ({ phone: number }, ctx: Ctx) => {
    const line = account(ctx, number);
    if (!line) return result({ error: 'no line with that number' });
    if (line.status === 'active') return result({ line_status: 'active', note: 'the line was not suspended' });
    return result({ line_status: 'active' }, [{ kind: 'resume_line' }], ctx);
  },
});

export const enableRoaming = tool({
  name: 'enable_roaming',
  description: "Allow roaming on a customer's line (needed to use mobile data abroad).",
  parameters: z.object({ phone }),
  execute: ({ phone: number }, ctx: Ctx) => {
    const line = account(ctx, number);
    if (!line) return result({ error: 'no line with that number' });
    if (line.roaming) return result({ roaming: 'allowed', note: 'roaming was already allowed' });
    return result({ roaming: 'allowed' }, [{ kind: 'enable_roaming' }], ctx);
  },
});

export const agentTools = [findAccount, resumeLine, enableRoaming];

// The user's tools: the phone in their hand.

const on = z.boolean().describe('true: on, false: off');

export const checkStatus = tool({
  name: 'check_status',
  description:
    "Look at the phone's status screen: service, airplane mode, mobile data, data roaming, APN, location, internet.",
  parameters: z.object({}),
  execute: (_args, ctx: Ctx) => result(statusScreen(ctx.state)),
});

const setting = (name: string, what: string, kind: 'airplane_mode' | 'mobile_data' | 'data_roaming') =>
  tool({
    name,
    description: `Turn ${what} on or off in the phone's settings.`,
    parameters: z.object({ on }),
    execute: ({ on: value }, ctx: Ctx) => result({ [kind]: value ? 'on' : 'off' }, [{ kind, on: value }], ctx),
  });

export const setAirplaneMode = setting('set_airplane_mode', 'airplane mode', 'airplane_mode');
export const setMobileData = setting('set_mobile_data', 'mobile data', 'mobile_data');
export const setDataRoaming = setting('set_data_roaming', 'data roaming', 'data_roaming');

export const resetApn = tool({
  name: 'reset_apn_settings',
  description: "Reset the phone's APN (access point) settings to the carrier's defaults; takes effect after a restart.",
  parameters: z.object({}),
  execute: (_args, ctx: Ctx) => result({ apn: 'internet (after a restart)' }, [{ kind: 'reset_apn' }], ctx),
});

export const restartDevice = tool({
  name: 'restart_device',
  description: 'Turn the phone off and on again.',
  parameters: z.object({}),
  execute: (_args, ctx: Ctx) => result({ restarted: true }, [{ kind: 'restart' }], ctx),
});

export const userTools = [checkStatus, setAirplaneMode, setMobileData, setDataRoaming, resetApn, restartDevice];
